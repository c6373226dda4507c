"""Reads over memories: recall surfaces, resident memory, the self layer."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.db.models import Case, IntegerField, Q, QuerySet, Value, When

from anima.core.calendar import moment_bound
from anima.core.config import config_get
from anima.core.db import replica_reads
from anima.core.models import BlockTag, Component, Entity, MemoryStatus
from conversations.models import Conversation, Message, Person
from memory.models import SelfLayerBlock, SemanticMemory
from memory.search import (
    ALL_BRANCHES,
    MAX_LIMIT,
    SearchTimeout,
    SourceSpec,
    clamp_limit,
    entity_source,
    hybrid_search,
    message_source,
    search_query_build,
)

logger = logging.getLogger(__name__)

RESIDENT_PINNED_HARD_CAP = 40


def active_semantic_memories() -> QuerySet[SemanticMemory]:
    return SemanticMemory.objects.filter(status=MemoryStatus.ACTIVE)


def resident_memories(*, person: Person | None = None, global_only: bool = False) -> list[SemanticMemory]:
    """Pinned memories (at most 40; more are cut here with a warning) then the most referenced ones.

    With ``person``: global (person-less) memories plus that person's only; without, all —
    unless ``global_only``, which user-facing callers set when the human is unknown.
    """
    config = config_get(section="memory.resident")
    pinned_limit = min(config["pinned_limit"], RESIDENT_PINNED_HARD_CAP)
    visible = active_semantic_memories().filter(_person_scope(person, global_only=global_only))
    pinned = list(visible.filter(pinned=True).order_by("-reference_count", "id")[: pinned_limit + 1])
    if len(pinned) > pinned_limit:
        logger.warning("more than %d pinned memories; resident memory keeps the first %d", pinned_limit, pinned_limit)
        pinned = pinned[:pinned_limit]
    top = list(
        visible.filter(pinned=False, reference_count__gt=0).order_by("-reference_count", "id")[
            : config["top_referenced"]
        ]
    )
    return pinned + top


SEARCH_RANK = "search_rank"
# Every semantic memory, whatever its status: operators search deprecated and expired ones too.
_ALL_SEMANTIC = f"t.primary_component = '{Component.SEMANTIC_MEMORY}'"


def semantic_memory_search_ids(*, text: str) -> list[int]:
    """Ids of semantic memories of any status matching ``text``, best first (the console's search).

    Raises QuerySyntaxError for a malformed query.
    """
    source = entity_source(name="semantic", where_sql=_ALL_SEMANTIC, person_id=None, since=None, until=None)
    with replica_reads():
        hits = hybrid_search(query=search_query_build(text=text), sources=[source], limit=MAX_LIMIT, text=text)
    return [hit.id for hit in hits]


def ranked_by_ids(queryset: QuerySet, *, ids: list[int]) -> QuerySet:
    """``queryset`` narrowed to ``ids``, annotated with each row's position there as ``search_rank``."""
    if not ids:
        return queryset.none().annotate(**{SEARCH_RANK: Value(0)})  # still orderable by the rank
    rank = Case(*(When(pk=pk, then=Value(position)) for position, pk in enumerate(ids)), output_field=IntegerField())
    return queryset.filter(pk__in=ids).annotate(**{SEARCH_RANK: rank})


def memory_line(*, content: str, entity_id: int) -> str:
    """One memory as a prompt line, ending in the marker that cites it."""
    return f"- {content} [[anima:{entity_id}]]"


def resident_memory_lines(*, person: Person | None = None) -> list[str]:
    """One line per resident memory, each ending in its citation marker."""
    return [memory_line(content=memory.content, entity_id=memory.pk) for memory in resident_memories(person=person)]


def _person_scope(person: Person | None, *, global_only: bool = False) -> Q:
    # As in recall: no person means no scoping (sleep's identity context sees every memory),
    # except for a user-facing caller whose human is unknown: global memories only.
    if person is None:
        return Q(person__isnull=True) if global_only else Q()
    return Q(person__isnull=True) | Q(person=person)


def self_layer_text() -> str:
    """The six self-layer blocks as prompt text (empty blocks left out)."""
    blocks = SelfLayerBlock.objects.exclude(content="").order_by("id")
    return "\n\n".join(f"## {block.get_key_display()}\n{block.content}" for block in blocks)


def identity_context() -> str:
    """Who is thinking: the self layer's blocks and the resident memories, with their citations."""
    self_layer = self_layer_text() or "(self layer empty)"
    resident = "\n".join(resident_memory_lines()) or "(no resident memories)"
    return f"# Identity context\n\n{self_layer}\n\n## Resident memory\n{resident}"


# --- Recall ---

SEMANTIC = "semantic"
SESSION = "session"
LIMBIC = "limbic"
AUTOBIOGRAPHICAL = "autobiographical"
MEMORY_TYPES = (SEMANTIC, SESSION, LIMBIC, AUTOBIOGRAPHICAL)
SNIPPET_CHARS = 240

# ``primary_component || ''`` keeps the planner off the (component, status) btree, which matches every
# memory: the GIN indexes are the selective path (bench/recall_scale.py).
_ENTITY_WHERE = {
    SEMANTIC: f"t.primary_component || '' = '{Component.SEMANTIC_MEMORY}' AND t.status || '' = '{MemoryStatus.ACTIVE}'",
    LIMBIC: f"t.primary_component || '' = '{Component.CONTENT_BLOCK}' AND t.tag = '{BlockTag.LIMBIC}'",
    AUTOBIOGRAPHICAL: f"t.primary_component || '' = '{Component.CONTENT_BLOCK}' AND t.tag = '{BlockTag.NARRATIVE}'",
}


def memory_recall(
    *,
    query: str,
    memory_types: Iterable[str] | None = None,
    limit: int = 10,
    person: Person | None = None,
    since: date | datetime | None = None,
    until: date | datetime | None = None,
    channel: str | None = None,
    global_only: bool = False,
    branches: Sequence[str] = ALL_BRANCHES,
) -> list[dict[str, Any]]:
    """Hybrid recall over semantic, session, limbic and autobiographical memory, one ranked list.

    Keyword (FTS, trigram) and, where vectors exist, dense branches of every source, fused on
    normalised scores (``memory.search.score_fuse``); ``score`` is 0..1.

    ``person`` scopes to that person's memories and conversations plus global (person-less)
    memories; without ``person``, ``global_only`` keeps to global memories and no
    conversation snippets (a user-facing caller whose human is unknown). ``since``/``until`` bound
    the creation time (a date means the whole day; both inclusive). ``channel`` restricts
    session hits to conversations of that channel. ``branches`` narrows the branches searched
    (benchmarks compare keyword-only and dense-only recall with the default).
    Raises memory.search.QuerySyntaxError for a malformed query.
    """
    types = _memory_types(memory_types)
    limit = clamp_limit(limit)
    start, end = moment_bound(since), moment_bound(until, end_of_day=True)
    person_id = person.pk if person else None
    # Fixed SQL, no user input: an unknown human sees nobody's private rows.
    unscoped = global_only and person is None
    sources: list[SourceSpec] = []
    for memory_type in types:
        if memory_type == SESSION:
            if unscoped:
                continue  # every conversation is someone's: an unknown human sees none of them
            source = message_source(name=SESSION, person_id=person_id, since=start, until=end, channel=channel)
        else:
            where_sql = _ENTITY_WHERE[memory_type] + (" AND t.person_id IS NULL" if unscoped else "")
            source = entity_source(name=memory_type, where_sql=where_sql, person_id=person_id, since=start, until=end)
        sources.append(source)
    # Recall reads the replica when one is configured (unless a caller pinned the primary).
    with replica_reads():
        hits = hybrid_search(
            query=search_query_build(text=query), sources=sources, limit=limit, text=query, branches=branches
        )[:limit]
        return _results(hits)


def memory_semantic_search(
    *,
    query: str,
    limit: int = 10,
    person: Person | None = None,
    since=None,
    until=None,
    global_only: bool = False,
    branches: Sequence[str] = ALL_BRANCHES,
) -> list[dict[str, Any]]:
    """Semantic memories only (the memory_semantic_search tool)."""
    return memory_recall(
        query=query,
        memory_types=[SEMANTIC],
        limit=limit,
        person=person,
        since=since,
        until=until,
        global_only=global_only,
        branches=branches,
    )


def _memory_types(memory_types: Iterable[str] | None) -> list[str]:
    if memory_types is None:
        return list(MEMORY_TYPES)
    types = list(dict.fromkeys(memory_types))
    unknown = [t for t in types if t not in MEMORY_TYPES]
    if unknown or not types:
        raise ValueError(f"unknown memory type(s) {unknown or types}; use {', '.join(MEMORY_TYPES)}")
    return types


def _results(hits) -> list[dict[str, Any]]:
    entity_ids = [hit.id for hit in hits if hit.source != SESSION]
    message_ids = [hit.id for hit in hits if hit.source == SESSION]
    entities = {
        row["id"]: row
        for row in Entity.objects.filter(pk__in=entity_ids).values("id", "external_id", "content", "created_at")
    }
    messages = {
        row["id"]: row
        for row in Message.objects.filter(pk__in=message_ids).values(
            "id", "external_id", "content", "created_at", "role", "conversation__external_id"
        )
    }
    results = []
    for hit in hits:
        row = messages.get(hit.id) if hit.source == SESSION else entities.get(hit.id)
        if row is None:  # deleted between the two queries
            continue
        result = {
            "memory_type": hit.source,
            "id": hit.id,
            "external_id": row["external_id"],
            "score": round(hit.score, 6),
            "snippet": row["content"][:SNIPPET_CHARS],
            "created_at": row["created_at"].isoformat(),
            "conversation_external_id": row.get("conversation__external_id"),
            "message_external_id": row["external_id"] if hit.source == SESSION else None,
            # Explainable recall: which branch found the hit, at which 1-based rank, with which score.
            "ranks": dict(hit.ranks),
            "scores": {branch: round(score, 6) for branch, score in hit.scores.items()},
        }
        if hit.source == SEMANTIC:
            result["semantic_memory_id"] = hit.id
        if hit.source == SESSION:
            result["role"] = row["role"]
        results.append(result)
    return results


@dataclass(frozen=True)
class PassiveRecall:
    """Semantic hits for the latest user message, as the runtime-only ``passive_memory_context`` message."""

    hits: list[dict[str, Any]]
    text: str

    NAME = "passive_memory_context"

    def as_message(self) -> dict[str, str] | None:
        if not self.text:
            return None
        return {"role": "assistant", "name": self.NAME, "content": self.text}


def passive_recall(*, conversation: Conversation, user_message: str, person: Person | None = None) -> PassiveRecall:
    """Semantic memories relevant to ``user_message``, cut by score; never persisted.

    ``person`` is the human behind the conversation (default: ``conversation.person``); with
    none, only global memories are candidates. Cut-off = max(min_score, top score *
    min_relative_score); skipped for cron conversations.
    """
    config = config_get(section="memory.passive_recall")
    if not config["enabled"] or conversation.is_cron or not (user_message or "").strip():
        return PassiveRecall(hits=[], text="")
    person = person or conversation.person
    pool = max(config["limit"] * 4, 20)
    try:
        candidates = memory_semantic_search(query=user_message, limit=pool, person=person, global_only=True)
    except ValueError:
        # A chat message is not a search query: operator slips must not break the turn.
        return PassiveRecall(hits=[], text="")
    except SearchTimeout:
        # Nor may a slow search: the turn goes on without passive memories.
        logger.warning(
            "passive recall timed out for conversation %s; the turn has no passive memories", conversation.pk
        )
        return PassiveRecall(hits=[], text="")
    if config["exclude_resident"]:
        resident = {memory.pk for memory in resident_memories(person=person, global_only=True)}
        candidates = [hit for hit in candidates if hit["id"] not in resident]
    if not candidates:
        return PassiveRecall(hits=[], text="")
    cutoff = max(config["min_score"], candidates[0]["score"] * config["min_relative_score"])
    hits, lines, used = [], [], 0
    for hit in candidates:
        if hit["score"] < cutoff or len(hits) >= config["limit"]:
            break
        line = memory_line(content=hit["snippet"], entity_id=hit["id"])
        if used + len(line) + 1 > config["max_chars"]:
            break
        hits.append(hit)
        lines.append(line)
        used += len(line) + 1
    text = "Possibly relevant memories:\n" + "\n".join(lines) if lines else ""
    return PassiveRecall(hits=hits, text=text)
