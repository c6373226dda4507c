"""API views for memories, recall, the diary and emotional tendencies (thin adapters over services and selectors)."""

from __future__ import annotations

import django_filters
from django.db.models import Prefetch, QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from anima.core.api.views import ApiView, ApiViewSet
from anima.core.forms import RangeDateFilter
from anima.core.models import ForgetReason, MemoryStatus, MemoryType
from conversations.access import OPERATOR, PERSON, SCOPED, access_of
from conversations.models import Person
from memory.forgetting import memory_forget
from memory.forgetting_person import person_forget
from memory.models import DiaryEntry, EmotionalTendency, SemanticMemory
from memory.selectors import (
    RECALL_LIMIT,
    SEARCH_RANK,
    diary_blocks_visible,
    memory_recall,
    ranked_by_ids,
    semantic_memory_filter_ids,
)
from memory.serializers import (
    CorrectSerializer,
    DeprecateSerializer,
    DiaryEntrySerializer,
    EmotionalTendencySerializer,
    ForgetSerializer,
    ForgetTombstoneSerializer,
    RecallQuerySerializer,
    RecallResultSerializer,
    RememberSerializer,
    SemanticMemorySerializer,
)
from memory.services import (
    memory_correct,
    memory_deprecate,
    memory_pin,
    memory_remember,
    memory_restore,
    memory_unpin,
)
from memory.subjects.entities import entities_of_person, entity_detail


class MemoryFilter(django_filters.FilterSet):
    memory_type = django_filters.ChoiceFilter(choices=MemoryType.choices)
    status = django_filters.ChoiceFilter(choices=MemoryStatus.choices)
    person = django_filters.CharFilter(field_name="person__slug")
    pinned = django_filters.BooleanFilter()
    q = django_filters.CharFilter(
        method="search",
        max_length=10_000,
        label=f"Hybrid search of active memories: every one a word finds, and the {RECALL_LIMIT} nearest in meaning",
    )

    class Meta:
        model = SemanticMemory
        fields = ["memory_type", "status", "person", "pinned", "q"]

    def _person(self) -> Person | None:
        slug = self.data.get("person")
        person = Person.objects.filter(slug=slug).first() if slug else None
        return access_of(self.request).person_for(person)

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        self._person()  # a person outside the token's reach is refused by name, not an empty page
        return super().filter_queryset(queryset)

    def search(self, queryset: QuerySet, name: str, value: str) -> QuerySet:
        """Hybrid-search hits first-ranked first (retrieval only covers active memories)."""
        ids = semantic_memory_filter_ids(
            query=value, person=self._person(), global_only=access_of(self.request).global_only
        )
        return ranked_by_ids(queryset, ids=ids).order_by(SEARCH_RANK)


class MemoryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, ApiViewSet):
    """Semantic memories: list / filter / search, remember, correct, curate, forget; DELETE forgets (operators)."""

    queryset = SemanticMemory.objects.select_related("person").order_by("-created_at", "-id")
    serializer_class = SemanticMemorySerializer
    filterset_class = MemoryFilter
    lookup_value_regex = r"\d{1,18}"
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    access_scopes = SCOPED
    access_scopes_by_action = {"destroy": (OPERATOR,)}

    def get_queryset(self):
        return access_of(self.request).owned(super().get_queryset())

    @extend_schema(request=RememberSerializer, responses={200: SemanticMemorySerializer, 201: SemanticMemorySerializer})
    def create(self, request: Request) -> Response:
        """Remember a fact; an identical active fact for the same person is returned (200) instead of duplicated.

        Without ``person`` a token acting for one person remembers it about that person.
        """
        data = RememberSerializer(data=request.data, context={"request": request})
        data.is_valid(raise_exception=True)
        access = access_of(request)
        fields = {**data.validated_data, "person": access.person_for(data.validated_data["person"])}
        access.write_check(fields["person"], what="a memory")
        memory, created = memory_remember(**fields)
        return Response(
            SemanticMemorySerializer(memory).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )

    @extend_schema(request=CorrectSerializer, responses={200: SemanticMemorySerializer})
    def partial_update(self, request: Request, pk: str) -> Response:
        """Correct an active memory. New ``content`` is a new version (returned, with its own id) that
        supersedes this one: the old text stays in belief history (``superseded_by`` leads on); a new
        ``memory_type`` alone changes it in place."""
        data = CorrectSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return self._curate(request, lambda memory: memory_correct(memory=memory, **data.validated_data))

    def perform_destroy(self, instance: SemanticMemory) -> None:
        # A delete is a forget: nothing derived from the memory may outlive it.
        memory_forget(memory=instance, requested_by=_requester(self.request), reason=ForgetReason.OPERATOR)

    @extend_schema(request=ForgetSerializer, responses={200: ForgetTombstoneSerializer})
    @action(detail=True, methods=["post"])
    def forget(self, request: Request, pk: str) -> Response:
        """Forget this memory everywhere (its versions and what quotes or cites it); returns the tombstone."""
        data = ForgetSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        memory = self.get_object()
        access_of(request).write_check(memory.person, what="forgetting a memory")
        tombstone = memory_forget(memory=memory, requested_by=_requester(request), **data.validated_data)
        return Response(ForgetTombstoneSerializer(tombstone).data)

    def _curate(self, request: Request, change) -> Response:
        memory = self.get_object()
        access_of(request).write_check(memory.person, what="changing a memory")
        memory = change(memory=memory)
        return Response(SemanticMemorySerializer(memory).data)

    @extend_schema(request=DeprecateSerializer, responses={200: SemanticMemorySerializer})
    @action(detail=True, methods=["post"])
    def deprecate(self, request: Request, pk: str) -> Response:
        data = DeprecateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return self._curate(request, lambda memory: memory_deprecate(memory=memory, **data.validated_data))

    @extend_schema(request=None, responses={200: SemanticMemorySerializer})
    @action(detail=True, methods=["post"])
    def restore(self, request: Request, pk: str) -> Response:
        # Restored by an operator's hand: the memory is theirs now, and no later night retires it again.
        return self._curate(request, lambda memory: memory_restore(memory=memory, by=_requester(request)))

    @extend_schema(request=None, responses={200: SemanticMemorySerializer})
    @action(detail=True, methods=["post"])
    def pin(self, request: Request, pk: str) -> Response:
        return self._curate(request, memory_pin)

    @extend_schema(request=None, responses={200: SemanticMemorySerializer})
    @action(detail=True, methods=["post"])
    def unpin(self, request: Request, pk: str) -> Response:
        return self._curate(request, memory_unpin)


class PersonForgetView(ApiView):
    access_scopes = (OPERATOR, PERSON)

    @extend_schema(request=ForgetSerializer, responses={200: ForgetTombstoneSerializer})
    def post(self, request: Request, slug: str) -> Response:
        """Forget everything about this person (right to erasure); with ``messages`` their conversations,
        accounts and the person go too. Returns the tombstone."""
        data = ForgetSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        person = Person.objects.filter(slug=slug).first()
        if person is None:
            raise NotFound(f"no person {slug!r}")
        access_of(request).write_check(person, what="forgetting a person")
        tombstone = person_forget(person=person, requested_by=_requester(request), **data.validated_data)
        return Response(ForgetTombstoneSerializer(tombstone).data)


def _person_reached(request: Request, slug: str) -> Person:
    """The person ``slug`` names, when the caller may read them (else 403 naming why; unknown: 404)."""
    person = Person.objects.filter(slug=slug).first()
    if person is None:
        raise NotFound(f"no person {slug!r}")
    return access_of(request).person_for(person)


class PersonEntitiesView(ApiView):
    access_scopes = SCOPED

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, slug: str) -> Response:
        """Who and what this person's memories are about (the person, relatives, pets, places), themself first:
        each with its relation, names, profile and number of facts."""
        person = _person_reached(request, slug)
        return Response({"person": person.slug, "entities": entities_of_person(person=person)})


class PersonEntityView(ApiView):
    access_scopes = SCOPED

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, slug: str, key: str) -> Response:
        """One of this person's subjects by key, relation, name or alias: its profile, facts, the subjects
        related through it and its timeline (facts and the latest lines naming it)."""
        person = _person_reached(request, slug)
        detail = entity_detail(person=person, key=key)
        if detail is None:
            raise NotFound(f"{person.slug} has no entity {key!r}")
        return Response({"person": person.slug, "entity": detail})


def _requester(request: Request) -> str:
    return f"api:{request.user.get_username()}"


class RecallView(ApiView):
    access_scopes = SCOPED
    query_serializer = RecallQuerySerializer

    @extend_schema(
        parameters=[RecallQuerySerializer],
        responses={200: inline_serializer("RecallResponse", {"results": RecallResultSerializer(many=True)})},
    )
    def get(self, request: Request) -> Response:
        """Hybrid recall over semantic, session, limbic and autobiographical memory, one ranked list."""
        params = RecallQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        query = params.validated_data
        access = access_of(request)
        results = memory_recall(
            query=query["q"],
            memory_types=query["types"],
            limit=query["limit"],
            person=access.person_for(query["person"]),
            since=query["since"],
            until=query["until"],
            channel=query["channel"],
            global_only=access.global_only,
            as_of=query["as_of"],
            min_score=query["min_score"],
            entity=query["entity"],
        )
        return Response({"results": results})


class DiaryFilter(django_filters.FilterSet):
    since = RangeDateFilter(field_name="source_day", lookup_expr="gte")
    until = RangeDateFilter(field_name="source_day", lookup_expr="lte")

    class Meta:
        model = DiaryEntry
        fields = ["since", "until"]


class DiaryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ApiViewSet):
    """Diary entries (one per local day) with their limbic, narrative and dream blocks."""

    queryset = DiaryEntry.objects.order_by("-source_day")
    serializer_class = DiaryEntrySerializer
    filterset_class = DiaryFilter
    lookup_value_regex = r"\d{1,18}"
    access_scopes = SCOPED

    def get_queryset(self):
        blocks = diary_blocks_visible(access=access_of(self.request))
        return super().get_queryset().prefetch_related(Prefetch("blocks", queryset=blocks))


class EmotionalTendencyFilter(django_filters.FilterSet):
    person = django_filters.CharFilter(field_name="person__slug")
    overall = django_filters.BooleanFilter(field_name="person", lookup_expr="isnull", label="Only the overall rows")
    since = RangeDateFilter(field_name="day", lookup_expr="gte")
    until = RangeDateFilter(field_name="day", lookup_expr="lte")
    notable = django_filters.BooleanFilter(method="notable_only", label="Only notable weeks")

    class Meta:
        model = EmotionalTendency
        fields = ["person", "overall", "since", "until", "notable"]

    def filter_queryset(self, queryset: QuerySet) -> QuerySet:
        slug = self.data.get("person")
        if slug:
            # A person outside the token's reach is refused by name, not an empty page.
            access_of(self.request).person_for(Person.objects.filter(slug=slug).first())
        return super().filter_queryset(queryset)

    def notable_only(self, queryset: QuerySet, name: str, value: bool | None) -> QuerySet:
        if value is None:
            return queryset
        return queryset.exclude(mood="") if value else queryset.filter(mood="")


class EmotionalTendencyViewSet(mixins.ListModelMixin, ApiViewSet):
    """Emotional tendencies per person and day (newest first), written by the nightly sleep step.

    A scoped token sees its own persons' rows only; the overall rows (person null) mix everyone's
    anchors, so they are for operators.
    """

    queryset = EmotionalTendency.objects.select_related("person").order_by("-day", "person__slug")
    serializer_class = EmotionalTendencySerializer
    filterset_class = EmotionalTendencyFilter
    access_scopes = SCOPED

    def get_queryset(self):
        access = access_of(self.request)
        queryset = super().get_queryset()
        return queryset if access.person_ids is None else queryset.filter(person__in=access.person_ids)
