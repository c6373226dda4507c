"""API views for conversations, messages, people, identities and history (thin adapters)."""

from __future__ import annotations

import django_filters
from django.db import IntegrityError, transaction
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from anima.core.api.views import ApiGenericView, ApiViewSet, AtomicWritesMixin
from anima.core.db import search_time_limit
from conversations.access import SCOPED, access_of
from conversations.models import Conversation, HistoryEntry, Identity, Message, Person, Platform
from conversations.selectors import history_search, identity_resolve, persons_with_identities
from conversations.serializers import (
    ConversationSerializer,
    HistoryAppendSerializer,
    HistoryEntrySerializer,
    HistoryQuerySerializer,
    IdentityMapSerializer,
    IdentityQuerySerializer,
    IdentitySerializer,
    MessageCreateSerializer,
    MessageSerializer,
    PersonRenameSerializer,
    PersonSerializer,
)
from conversations.services import history_append, identity_map, message_create, person_rename


class ConversationFilter(django_filters.FilterSet):
    external_id = django_filters.CharFilter(label="The conversation with this external id (the id its channel gives)")
    platform = django_filters.ChoiceFilter(choices=Platform.choices)
    channel = django_filters.CharFilter()
    person = django_filters.CharFilter(field_name="person__slug")
    archived = django_filters.BooleanFilter()

    class Meta:
        model = Conversation
        fields = ["external_id", "platform", "channel", "person", "archived"]


class ConversationViewSet(
    AtomicWritesMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    ApiViewSet,
):
    queryset = Conversation.objects.select_related("person").order_by("-updated_at", "-id")
    serializer_class = ConversationSerializer
    filterset_class = ConversationFilter
    lookup_value_regex = r"\d{1,18}"
    http_method_names = ["get", "post", "patch", "head", "options"]
    access_scopes = SCOPED

    def get_queryset(self):
        return access_of(self.request).conversations(super().get_queryset())

    def perform_create(self, serializer) -> None:
        self._save_within_reach(serializer)

    def perform_update(self, serializer) -> None:
        self._save_within_reach(serializer)

    def _save_within_reach(self, serializer) -> None:
        # What the conversation resolves to decides its reach: written, checked, and undone if outside.
        with transaction.atomic():
            conversation = serializer.save()
            access_of(self.request).conversation_write_check(conversation)
        # A new person drops the snapshot in the database (a trigger): answer with that, not the old one.
        conversation.refresh_from_db(fields=["system_prompt", "system_prompt_built_at"])

    @extend_schema(request=MessageCreateSerializer, responses={200: MessageSerializer, 201: MessageSerializer})
    @action(detail=True, methods=["get", "post"], serializer_class=MessageSerializer, filterset_class=None)
    def messages(self, request: Request, pk: str) -> Response:
        """GET: the conversation's messages, oldest first. POST: add one (its [[anima:ID]] citations count).

        POST is idempotent on ``external_id``: a message already stored under it is returned as is.
        """
        conversation = self.get_object()
        if request.method == "GET":
            page = self.paginate_queryset(
                Message.objects.filter(conversation=conversation).order_by("created_at", "id")
            )
            return self.get_paginated_response(MessageSerializer(page, many=True).data)
        data = MessageCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        existing = self._stored_message(conversation, data.validated_data["external_id"])
        if existing is not None:
            return Response(MessageSerializer(existing).data, status=status.HTTP_200_OK)
        try:
            message = message_create(conversation=conversation, **data.validated_data)
        except IntegrityError:
            # A concurrent POST stored the same external_id first.
            message = self._stored_message(conversation, data.validated_data["external_id"])
            if message is None:
                raise
            return Response(MessageSerializer(message).data, status=status.HTTP_200_OK)
        return Response(MessageSerializer(message).data, status=status.HTTP_201_CREATED)

    @staticmethod
    def _stored_message(conversation: Conversation, external_id: str | None) -> Message | None:
        if external_id is None:
            return None
        return Message.objects.filter(conversation=conversation, external_id=external_id).first()


class PersonFilter(django_filters.FilterSet):
    """``channel`` and ``external_id`` together name one channel account: its person (as identities/resolve)."""

    channel = django_filters.CharFilter(method="_account", label="With external_id: a channel account's channel")
    external_id = django_filters.CharFilter(method="_account", label="With channel: a channel account's id")

    class Meta:
        model = Person
        fields = ["channel", "external_id"]

    def _account(self, queryset, name: str, value: str):
        return queryset  # both are applied at once in filter_queryset: one account, not one match each

    def filter_queryset(self, queryset):
        queryset = super().filter_queryset(queryset)
        account = {name: self.form.cleaned_data.get(name) for name in ("channel", "external_id")}
        account = {name: value for name, value in account.items() if value}
        if not account:
            return queryset
        return queryset.filter(pk__in=Identity.objects.filter(**account).values("person"))


class PersonViewSet(
    AtomicWritesMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, ApiViewSet
):
    queryset = persons_with_identities()
    serializer_class = PersonSerializer
    filterset_class = PersonFilter
    lookup_field = "slug"
    lookup_value_regex = r"[a-z0-9_-]{1,64}"
    http_method_names = ["get", "post", "patch", "head", "options"]
    access_scopes_by_action = {"list": SCOPED, "retrieve": SCOPED, "partial_update": SCOPED}

    def get_queryset(self):
        return access_of(self.request).persons(super().get_queryset())

    @extend_schema(request=PersonRenameSerializer, responses={200: PersonSerializer})
    def partial_update(self, request: Request, slug: str) -> Response:
        """Change a person's display name (the slug stays: it is how every surface names them)."""
        person = self.get_object()
        access_of(request).write_check(person, what="renaming a person")
        data = PersonRenameSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        person_rename(person=person, **data.validated_data)
        return Response(PersonSerializer(self.get_object()).data)


class IdentityFilter(django_filters.FilterSet):
    channel = django_filters.CharFilter()
    external_id = django_filters.CharFilter()
    person = django_filters.CharFilter(field_name="person__slug")

    class Meta:
        model = Identity
        fields = ["channel", "external_id", "person"]


class IdentityViewSet(mixins.ListModelMixin, ApiViewSet):
    """Channel accounts and the person each resolves to."""

    queryset = Identity.objects.select_related("person").order_by("channel", "external_id")
    serializer_class = IdentitySerializer
    filterset_class = IdentityFilter
    # Mapping an account decides whose memories a conversation reaches: operators only.
    access_scopes_by_action = {"list": SCOPED, "resolve": SCOPED}

    def get_queryset(self):
        return access_of(self.request).owned(super().get_queryset())

    @extend_schema(request=IdentityMapSerializer, responses={201: IdentitySerializer})
    def create(self, request: Request) -> Response:
        """map_identity: map ``channel:external_id`` to a person (created on first sight)."""
        data = IdentityMapSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        account = {key: data.validated_data[key] for key in ("channel", "external_id")}
        access_of(request).identity_map_check(**account, person_slug=data.validated_data["person"])
        identity = identity_map(
            **account, person_slug=data.validated_data["person"], display_name=data.validated_data["display_name"]
        )
        return Response(IdentitySerializer(identity).data, status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[IdentityQuerySerializer], responses={200: PersonSerializer})
    @action(
        detail=False,
        methods=["get"],
        filterset_class=None,
        pagination_class=None,
        query_serializer=IdentityQuerySerializer,
    )
    def resolve(self, request: Request) -> Response:
        """The person a channel account belongs to (404 when unmapped)."""
        data = IdentityQuerySerializer(data=request.query_params)
        data.is_valid(raise_exception=True)
        person = identity_resolve(
            channel=data.validated_data["channel"], external_id=data.validated_data["external_id"]
        )
        if person is None or not access_of(request).reaches(person.pk):
            raise NotFound("this channel account is not mapped to a person you can reach")
        return Response(PersonSerializer(person).data)


class HistoryView(ApiGenericView):
    """The history timeline: search by text, time range, channel and person."""

    serializer_class = HistoryEntrySerializer
    queryset = HistoryEntry.objects.none()  # for the schema; history_search builds the real one
    access_scopes = SCOPED
    query_serializer = HistoryQuerySerializer

    @extend_schema(parameters=[HistoryQuerySerializer], responses={200: HistoryEntrySerializer(many=True)})
    def get(self, request: Request) -> Response:
        params = HistoryQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        query = params.validated_data
        access = access_of(request)
        # A named person: that timeline. Otherwise the token's person (with the global timeline), or
        # only the global one for a token acting for nobody in particular; an operator sees every one.
        person = None if query["scope"] == "global" else access.person_for(query["person"])
        entries = history_search(
            text=query["q"],
            since=query["since"],
            until=query["until"],
            channel=query["channel"],
            person=person,
            global_only=query["scope"] == "global" or access.global_only,
            with_global=query["person"] is None,
            private=not access.is_operator,
        )
        # Text search over the whole timeline: bounded like recall (a 503 naming the limit past it).
        with search_time_limit(what="history search"):
            page = self.paginate_queryset(entries)
            data = HistoryEntrySerializer(page, many=True).data
        return self.get_paginated_response(data)

    @extend_schema(request=HistoryAppendSerializer, responses={201: HistoryEntrySerializer})
    def post(self, request: Request) -> Response:
        """Append one timeline entry (e.g. a consolidated conversation summary).

        Without ``person`` a token acting for one person appends it to that person's timeline.
        """
        data = HistoryAppendSerializer(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        access = access_of(request)
        fields = {**data.validated_data, "person": access.person_for(data.validated_data["person"])}
        access.write_check(fields["person"], what="a history entry")
        entry = history_append(**fields)
        return Response(HistoryEntrySerializer(entry).data, status=status.HTTP_201_CREATED)
