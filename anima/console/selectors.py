"""What the console's home page shows: counts, last night's run, the week's mood and what needs attention."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta

from django.db.models import Count, Exists, OuterRef, Q
from django.utils import timezone

from anima.core.embeddings import embedding_model
from anima.core.models import BlockTag, Component, Entity, MemoryStatus
from conversations.models import Conversation, Message, Person
from memory.embedding import embed_backlog_count, embed_unavailable_reason
from memory.models import EmotionalTendency, SemanticMemory
from memory.subjects.selectors import profile_q
from sleep.models import PipelineRun, PipelineStepRun, StepStatus

# Failed steps older than this are history, not something to act on today.
ATTENTION_DAYS = 7
ATTENTION_ROWS = 20
RETIRED = (MemoryStatus.EXPIRED, MemoryStatus.DEPRECATED)


@dataclass(frozen=True)
class MemoryCount:
    kind: str  # plural, as in "3 narrative blocks"
    total: int
    detail: str = ""

    @property
    def singular(self) -> str:
        return self.kind.removesuffix("ies") + "y" if self.kind.endswith("ies") else self.kind.removesuffix("s")


@dataclass(frozen=True)
class Embeddings:
    pending: int | None  # None: recall is keyword-only here
    reason: str = ""


@dataclass(frozen=True)
class LastNight:
    run: PipelineRun
    # The latest attempt of each step, in the order the steps ran.
    steps: list[PipelineStepRun]


@dataclass(frozen=True)
class HomeFigures:
    persons: int
    conversations: int
    messages: int
    memories: list[MemoryCount]
    embeddings: Embeddings
    last_night: LastNight | None
    moods: list[EmotionalTendency]
    failed_steps: list[PipelineStepRun]
    retired: list[SemanticMemory] = field(default_factory=list)
    retired_total: int = 0

    @property
    def attention(self) -> int:
        return len(self.failed_steps) + self.retired_total


def console_memory_counts() -> list[MemoryCount]:
    """Stored memories per kind: semantic (active and retired), the diary's blocks per tag, days, summaries."""
    rows = Entity.objects.values_list("primary_component", "tag", "status").annotate(n=Count("id")).order_by()
    semantic = {status: 0 for status in MemoryStatus.values}
    blocks = {tag: 0 for tag in BlockTag.values}
    days = summaries = 0
    for component, tag, status, n in rows:
        if component == Component.SEMANTIC_MEMORY:
            semantic[status] = semantic.get(status, 0) + n
        elif component == Component.CONTENT_BLOCK:
            blocks[tag] = blocks.get(tag, 0) + n
        elif component == Component.DIARY_ENTRY:
            days += n
        elif component == Component.TEMPORAL_SUMMARY:
            summaries += n
    retired = sum(semantic[status] for status in RETIRED)
    return [
        MemoryCount("semantic memories", semantic[MemoryStatus.ACTIVE] + retired, f"{retired} retired"),
        *(MemoryCount(f"{tag} blocks", blocks[tag]) for tag in BlockTag.values),
        MemoryCount("diary days", days),
        MemoryCount("time summaries", summaries),
    ]


def console_embeddings() -> Embeddings:
    reason = embed_unavailable_reason()
    if reason:
        return Embeddings(pending=None, reason=reason)
    return Embeddings(pending=embed_backlog_count(model=embedding_model()))


def console_last_night() -> LastNight | None:
    """The latest full sleep cycle (a single step run from the Sleep page is not a night) with its steps."""
    run = (
        PipelineRun.objects.filter(Q(options__step=None) | Q(options__step__isnull=True))
        .order_by("-started_at", "-pk")
        .first()
    )
    if run is None:
        return None
    latest: dict[str, PipelineStepRun] = {}
    for step in run.steps.order_by("pk"):
        latest.pop(step.step, None)  # a retry moves the step to where it ran last
        latest[step.step] = step
    return LastNight(run=run, steps=list(latest.values()))


def console_failed_steps(*, now: datetime) -> list[PipelineStepRun]:
    """Steps that failed in the last ATTENTION_DAYS and have not succeeded since for the same day."""
    fixed = PipelineStepRun.objects.filter(
        run__day=OuterRef("run__day"), step=OuterRef("step"), status=StepStatus.SUCCEEDED, pk__gt=OuterRef("pk")
    )
    recent = PipelineStepRun.objects.filter(run__started_at__gte=now - timedelta(days=ATTENTION_DAYS))
    return list(
        recent.filter(status=StepStatus.FAILED)
        .exclude(Exists(fixed))
        .select_related("run")
        .order_by("-pk")[:ATTENTION_ROWS]
    )


def console_retired_facts(*, night: LastNight | None, now: datetime) -> tuple[list[SemanticMemory], int]:
    """Semantic memories retired while last night's run ran (its first ATTENTION_ROWS, and how many in all).

    Not a subject's profile: the night writes it anew whenever its facts change, which is nothing to review."""
    if night is None:
        return [], 0
    retired = SemanticMemory.objects.filter(
        status__in=RETIRED, updated_at__gte=night.run.started_at, updated_at__lte=night.run.finished_at or now
    ).exclude(profile_q())
    rows = list(retired.select_related("person", "superseded_by").order_by("-updated_at", "-pk")[:ATTENTION_ROWS])
    return rows, retired.count() if len(rows) == ATTENTION_ROWS else len(rows)


def console_week_moods(*, today: date) -> list[EmotionalTendency]:
    """The latest tendency of each person (and the overall one first) whose week overlaps the one up to today."""
    recent = EmotionalTendency.objects.filter(day__gte=today - timedelta(days=7), day__lte=today)
    latest = recent.filter(person=OuterRef("person"), day__gt=OuterRef("day"))
    rows = recent.exclude(Exists(latest)).exclude(person__isnull=True).select_related("person")
    overall = recent.filter(person__isnull=True).order_by("-day").first()
    return [*([overall] if overall else []), *rows.order_by("person__slug")]


def console_home(*, now: datetime | None = None) -> HomeFigures:
    """Everything the console's home page shows, read in one go."""
    now = now or timezone.now()
    night = console_last_night()
    retired, retired_total = console_retired_facts(night=night, now=now)
    return HomeFigures(
        persons=Person.objects.count(),
        conversations=Conversation.objects.count(),
        messages=Message.objects.count(),
        memories=console_memory_counts(),
        embeddings=console_embeddings(),
        last_night=night,
        moods=console_week_moods(today=timezone.localdate(now)),
        failed_steps=console_failed_steps(now=now),
        retired=retired,
        retired_total=retired_total,
    )
