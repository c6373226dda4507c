"""Writes for memories: semantic rows and diary content blocks."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from anima.core.calendar import local_day
from anima.core.jsonl import (
    ImportReport,
    LineError,
    ProgressCallback,
    check_keys,
    datetime_field,
    json_field,
    jsonl_import,
    text_field,
)
from anima.core.models import BlockTag, Component, Entity, MemoryStatus, MemoryType
from anima.core.segmentation import segment_text
from conversations.models import Conversation, Person
from conversations.services import person_slug, persons_ensure
from memory.models import DiaryEntry, SemanticMemory
from memory.selectors import active_semantic_memories

IMPORT_BATCH_LINES = 500
_MEMORY_KEYS = {"external_id", "memory_type", "content", "person", "created_at", "tags", "pinned", "title", "body"}
BLOCK_TYPES = {tag.value for tag in BlockTag}


def diary_entries_ensure(*, days: Iterable[date]) -> dict[date, Entity]:
    """One diary entry per local day, created on first need (the unique index settles races)."""
    wanted = set(days)
    if not wanted:
        return {}
    Entity.objects.bulk_create(
        [
            Entity(
                primary_component=Component.DIARY_ENTRY,
                source_day=day,
                title=day.isoformat(),
                fts_segmented=segment_text(day.isoformat()),
            )
            for day in sorted(wanted)
        ],
        ignore_conflicts=True,
    )
    return {entry.source_day: entry for entry in DiaryEntry.objects.filter(source_day__in=wanted)}


@dataclass
class _ParsedMemory:
    line: int
    external_id: str
    memory_type: str
    title: str
    content: str
    person: str | None
    created_at: datetime
    tags: list[str]
    pinned: bool
    body: dict[str, Any]

    @property
    def is_block(self) -> bool:
        return self.memory_type in BLOCK_TYPES


def _parse_memory_line(number: int, obj: dict[str, Any]) -> _ParsedMemory:
    check_keys(obj, where="memory", required={"external_id", "memory_type", "content"}, optional=_MEMORY_KEYS)
    memory_type = obj["memory_type"]
    allowed = [*MemoryType.values, *BlockTag.values]
    if memory_type not in allowed:
        raise LineError(f"memory.memory_type must be one of {', '.join(allowed)}, got {memory_type!r}")
    tags = json_field(obj, "tags", where="memory") or []
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        raise LineError("memory.tags must be a list of strings")
    pinned = obj.get("pinned", False)
    if not isinstance(pinned, bool):
        raise LineError("memory.pinned must be true or false")
    body = json_field(obj, "body", where="memory") or {}
    if not isinstance(body, dict):
        raise LineError("memory.body must be an object")
    return _ParsedMemory(
        line=number,
        external_id=text_field(obj, "external_id", where="memory", max_length=200),
        memory_type=memory_type,
        title=text_field(obj, "title", where="memory"),
        content=text_field(obj, "content", where="memory"),
        person=person_slug(obj.get("person"), where="memory.person"),
        created_at=datetime_field(obj, "created_at", where="memory") or timezone.now(),
        tags=tags,
        pinned=pinned,
        body=body,
    )


def memories_import(
    *, lines: Iterable[str], progress: ProgressCallback | None = None, batch_lines: int = IMPORT_BATCH_LINES
) -> ImportReport:
    """Import memories JSONL: semantic types become semantic memories, limbic/narrative/dream diary blocks.

    Idempotent: a line whose external_id is already stored for its kind is left as it is.
    """
    return jsonl_import(
        lines=lines, parse=_parse_memory_line, store=_store_memories, batch_lines=batch_lines, progress=progress
    )


def _store_memories(parsed: list[_ParsedMemory], report: ImportReport) -> None:
    with transaction.atomic():
        persons = persons_ensure(slugs=[p.person for p in parsed if p.person])
        diaries = diary_entries_ensure(days=[local_day(p.created_at) for p in parsed if p.is_block])
        semantic_ids = {p.external_id for p in parsed if not p.is_block}
        block_ids = {p.external_id for p in parsed if p.is_block}
        existing = set(
            Entity.objects.filter(primary_component=Component.SEMANTIC_MEMORY, external_id__in=semantic_ids)
            .values_list("primary_component", "external_id")
            .union(
                Entity.objects.filter(primary_component=Component.CONTENT_BLOCK, external_id__in=block_ids).values_list(
                    "primary_component", "external_id"
                )
            )
        )
        dream_days = set(
            Entity.objects.filter(
                primary_component=Component.CONTENT_BLOCK, tag=BlockTag.DREAM, parent__in=diaries.values()
            ).values_list("parent__source_day", flat=True)
        )
        rows: list[Entity] = []
        for p in parsed:
            component = Component.CONTENT_BLOCK if p.is_block else Component.SEMANTIC_MEMORY
            if (component, p.external_id) in existing:
                continue
            existing.add((component, p.external_id))
            day = local_day(p.created_at)
            if p.memory_type == BlockTag.DREAM:
                if day in dream_days:
                    report.errors.append((p.line, f"memory: a dream for {day} is already stored (one per day)"))
                    continue
                dream_days.add(day)
            rows.append(_entity_for(p, component=component, day=day, persons=persons, diaries=diaries))
        Entity.objects.bulk_create(rows, batch_size=1000)
        for row in rows:
            report.count(row.tag or "semantic", 1)
        report.imported += len(parsed)


def _entity_for(
    p: _ParsedMemory, *, component: str, day: date, persons: dict[str, Any], diaries: dict[date, Entity]
) -> Entity:
    body = {**p.body, "tags": p.tags} if p.tags else dict(p.body)
    entity = Entity(
        primary_component=component,
        external_id=p.external_id,
        title=p.title,
        content=p.content,
        body=body,
        pinned=p.pinned,
        person=persons.get(p.person) if p.person else None,
        source_day=day,
        created_at=p.created_at,
    )
    if component == Component.SEMANTIC_MEMORY:
        entity.memory_type = p.memory_type
        entity.status = MemoryStatus.ACTIVE
        entity.body.setdefault("observed_at", p.created_at.isoformat())
    else:
        entity.tag = p.memory_type
        entity.parent = diaries[day]
    entity.fts_segmented = segment_text(entity.searchable_text())
    return entity


# --- Remember and curate (tools, API, workspace import) ---------------------------------------------


# Advisory-lock namespace of memory_remember (second key: the person id, 0 for global memories).
_REMEMBER_LOCK = 7301


def memory_content_normalize(content: str) -> str:
    """What counts as "the same fact": case-folded, whitespace collapsed."""
    return " ".join(content.split()).casefold()


def memory_remember(
    *,
    content: str,
    memory_type: str = MemoryType.WORLD,
    person: Person | None = None,
    pinned: bool = False,
    source_conversation: Conversation | None = None,
    source_channel: str = "",
    source_id: str = "",
) -> tuple[SemanticMemory, bool]:
    """Write one semantic memory, or find the active one already holding the same fact for ``person``.

    Returns ``(memory, created)``. ``source_id`` (with ``source_channel``) scopes a person memory
    to one channel account, the workspace's ``sources/<channel>_<id>.md`` notes.
    """
    content = content.strip()
    if not content:
        raise ValidationError({"content": "content must not be empty"})
    if memory_type not in MemoryType.values:
        raise ValidationError({"memory_type": f"memory_type must be one of {', '.join(MemoryType.values)}"})
    normalized = memory_content_normalize(content)
    with transaction.atomic():
        # Serialise remembers for one person so two identical concurrent calls cannot both insert.
        with connection.cursor() as cursor:
            # Two int4 keys; folding large ids only makes unrelated persons share a lock now and then.
            key = (person.pk if person else 0) % 2**31
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_REMEMBER_LOCK, key])
        # Any equal fact contains its longest word; Python then compares the normalized texts.
        longest = max(content.split(), key=len)
        candidates = active_semantic_memories().filter(person=person, content__icontains=longest)
        for existing in candidates.order_by("id"):
            if memory_content_normalize(existing.content) == normalized:
                return existing, False
        now = timezone.now()
        body: dict[str, Any] = {"observed_at": now.isoformat()}
        if source_id:
            body["source_id"] = source_id
        memory = SemanticMemory(
            content=content,
            memory_type=memory_type,
            status=MemoryStatus.ACTIVE,
            person=person,
            pinned=pinned,
            source_conversation=source_conversation,
            source_channel=source_channel or (source_conversation.channel if source_conversation else ""),
            source_day=local_day(now),
            body=body,
            created_at=now,
        )
        memory.save()
    return memory, True


def memory_deprecate(*, memory: SemanticMemory, reason: str = "") -> SemanticMemory:
    """Soft-delete: the memory leaves recall and resident memory but stays for belief history."""
    memory.status = MemoryStatus.DEPRECATED
    memory.body = {**memory.body, "deprecated_reason": reason} if reason else memory.body
    memory.save(update_fields=["status", "body", "updated_at"])
    return memory


def memory_restore(*, memory: SemanticMemory) -> SemanticMemory:
    """Back to active, whatever retired it (deprecation or expiry)."""
    memory.status = MemoryStatus.ACTIVE
    memory.expired_reason = ""
    memory.superseded_by = None
    memory.save(update_fields=["status", "expired_reason", "superseded_by", "updated_at"])
    return memory


def memory_pin(*, memory: SemanticMemory) -> SemanticMemory:
    memory.pinned = True
    memory.save(update_fields=["pinned", "updated_at"])
    return memory


def memory_unpin(*, memory: SemanticMemory) -> SemanticMemory:
    memory.pinned = False
    memory.save(update_fields=["pinned", "updated_at"])
    return memory


def memory_delete(*, memory: SemanticMemory) -> None:
    """Physical delete (operators only): references go with it; memories it superseded lose the link."""
    memory.delete()
