"""API views for conversations, messages, people, identities and history (thin adapters)."""

from __future__ import annotations

import django_filters
from django.db import IntegrityError
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from anima.core.api.views import ApiGenericView, ApiViewSet, AtomicWritesMixin
from conversations.models import Conversation, HistoryEntry, Identity, Message, Platform
from conversations.selectors import history_search, persons_with_identities
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
    PersonSerializer,
)
from conversations.services import history_append, identity_map, identity_resolve, message_create


class ConversationFilter(django_filters.FilterSet):
    platform = django_filters.ChoiceFilter(choices=Platform.choices)
    channel = django_filters.CharFilter()
    person = django_filters.CharFilter(field_name="person__slug")
    archived = django_filters.BooleanFilter()

    class Meta:
        model = Conversation
        fields = ["platform", "channel", "person", "archived"]


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


class PersonViewSet(
    AtomicWritesMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, ApiViewSet
):
    queryset = persons_with_identities()
    serializer_class = PersonSerializer
    lookup_field = "slug"
    lookup_value_regex = r"[a-z0-9_-]{1,64}"


class IdentityFilter(django_filters.FilterSet):
    channel = django_filters.CharFilter()
    person = django_filters.CharFilter(field_name="person__slug")

    class Meta:
        model = Identity
        fields = ["channel", "person"]


class IdentityViewSet(mixins.ListModelMixin, ApiViewSet):
    """Channel accounts and the person each resolves to."""

    queryset = Identity.objects.select_related("person").order_by("channel", "external_id")
    serializer_class = IdentitySerializer
    filterset_class = IdentityFilter

    @extend_schema(request=IdentityMapSerializer, responses={201: IdentitySerializer})
    def create(self, request: Request) -> Response:
        """map_identity: map ``channel:external_id`` to a person (created on first sight)."""
        data = IdentityMapSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        identity = identity_map(
            channel=data.validated_data["channel"],
            external_id=data.validated_data["external_id"],
            person_slug=data.validated_data["person"],
            display_name=data.validated_data["display_name"],
        )
        return Response(IdentitySerializer(identity).data, status=status.HTTP_201_CREATED)

    @extend_schema(parameters=[IdentityQuerySerializer], responses={200: PersonSerializer})
    @action(detail=False, methods=["get"], filterset_class=None, pagination_class=None)
    def resolve(self, request: Request) -> Response:
        """The person a channel account belongs to (404 when unmapped)."""
        data = IdentityQuerySerializer(data=request.query_params)
        data.is_valid(raise_exception=True)
        person = identity_resolve(
            channel=data.validated_data["channel"], external_id=data.validated_data["external_id"]
        )
        if person is None:
            raise NotFound("this channel account is not mapped to a person")
        return Response(PersonSerializer(person).data)


class HistoryView(ApiGenericView):
    """The history timeline: search by text, time range, channel and person."""

    serializer_class = HistoryEntrySerializer
    queryset = HistoryEntry.objects.none()  # for the schema; history_search builds the real one

    @extend_schema(parameters=[HistoryQuerySerializer], responses={200: HistoryEntrySerializer(many=True)})
    def get(self, request: Request) -> Response:
        params = HistoryQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        query = params.validated_data
        entries = history_search(
            text=query["q"],
            since=query["since"],
            until=query["until"],
            channel=query["channel"],
            person=query["person"],
            global_only=query["scope"] == "global",
        )
        page = self.paginate_queryset(entries)
        return self.get_paginated_response(HistoryEntrySerializer(page, many=True).data)

    @extend_schema(request=HistoryAppendSerializer, responses={201: HistoryEntrySerializer})
    def post(self, request: Request) -> Response:
        """Append one timeline entry (e.g. a consolidated conversation summary)."""
        data = HistoryAppendSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        entry = history_append(**data.validated_data)
        return Response(HistoryEntrySerializer(entry).data, status=status.HTTP_201_CREATED)
