"""Importing memories JSONL: semantic types become semantic memories; limbic, narrative and dream lines diary blocks."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone

from anima.core.calendar import local_day, moment_iso
from anima.core.forgotten import MEMORY as FORGOTTEN_MEMORY
from anima.core.forgotten import PERSON, forgotten_excerpt
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
from conversations.services import person_slug, persons_ensure
from memory.services import diary_entries_ensure, memory_valid_from

IMPORT_BATCH_LINES = 500
# Advisory-lock key of memory import batches (concurrent imports take turns per batch).
_IMPORT_LOCK = 7303
_MEMORY_KEYS = {"external_id", "memory_type", "content", "person", "created_at", "tags", "pinned", "title", "body"}
BLOCK_TYPES = {tag.value for tag in BlockTag}


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
        external_id=text_field(obj, "external_id", where="memory", max_length=200, required=True),
        memory_type=memory_type,
        title=text_field(obj, "title", where="memory", max_length=300).strip(),
        content=text_field(obj, "content", where="memory", required=True).strip(),
        person=person_slug(obj.get("person"), where="memory.person"),
        created_at=datetime_field(obj, "created_at", where="memory") or timezone.now(),
        tags=tags,
        pinned=pinned,
        body=body,
    )


def memories_import(
    *,
    lines: Iterable[str | bytes],
    progress: ProgressCallback | None = None,
    batch_lines: int = IMPORT_BATCH_LINES,
    allow_forgotten: bool = False,
) -> ImportReport:
    """Import memories JSONL: semantic types become semantic memories, limbic/narrative/dream diary blocks.

    Idempotent: a line whose external_id is already stored for its kind with the same type,
    person and text is left as it is; with other ones it is a conflict, reported and not stored.
    A line about an erased person or holding a forgotten memory is skipped with a warning unless
    ``allow_forgotten``.
    """
    return jsonl_import(
        kind="memories",
        lines=lines,
        parse=_parse_memory_line,
        store=_store_memories,
        batch_lines=batch_lines,
        lock=_IMPORT_LOCK,
        progress=progress,
        forgettable=_memory_forgettable,
        allow_forgotten=allow_forgotten,
    )


def _memory_forgettable(p: _ParsedMemory) -> list[tuple[str, str, str]]:
    held = [(FORGOTTEN_MEMORY, p.content, f"memory {forgotten_excerpt(p.content)}")]
    return held + ([(PERSON, p.person, f"person {p.person}")] if p.person else [])


def _memory_identity(p: _ParsedMemory) -> tuple[str, str | None, str, str]:
    """What a known external id must come with: its type, person and text."""
    return (p.memory_type, p.person, p.title, p.content)


def _store_memories(parsed: list[_ParsedMemory], report: ImportReport) -> None:
    """Store one batch (the caller's transaction holds the import lock)."""
    semantic_ids = {p.external_id for p in parsed if not p.is_block}
    block_ids = {p.external_id for p in parsed if p.is_block}
    stored = {
        (component, external_id): (kind_semantic or tag, person, title, content)
        for component, external_id, kind_semantic, tag, person, title, content in Entity.objects.filter(
            Q(primary_component=Component.SEMANTIC_MEMORY, external_id__in=semantic_ids)
            | Q(primary_component=Component.CONTENT_BLOCK, external_id__in=block_ids)
        ).values_list("primary_component", "external_id", "memory_type", "tag", "person__slug", "title", "content")
    }
    accepted: list[_ParsedMemory] = []
    for p in parsed:
        key = (Component.CONTENT_BLOCK if p.is_block else Component.SEMANTIC_MEMORY, p.external_id)
        known = stored.get(key)
        if known is None:
            stored[key] = _memory_identity(p)
            accepted.append(p)
        elif known == _memory_identity(p):
            report.imported += 1  # already stored: idempotent
        else:
            fields = ("memory_type", "person", "title", "content")
            differs = ", ".join(
                name for name, old, new in zip(fields, known, _memory_identity(p), strict=True) if old != new
            )
            report.errors.append(
                (
                    p.line,
                    f"conflict: external_id {p.external_id!r} is already stored with another {differs}; not stored",
                )
            )
    persons = persons_ensure(slugs=[p.person for p in accepted if p.person])
    diaries = diary_entries_ensure(days=[local_day(p.created_at) for p in accepted if p.is_block])
    dream_days = set(
        Entity.objects.filter(
            primary_component=Component.CONTENT_BLOCK, tag=BlockTag.DREAM, parent__in=diaries.values()
        ).values_list("parent__source_day", flat=True)
    )
    rows: list[Entity] = []
    for p in accepted:
        component = Component.CONTENT_BLOCK if p.is_block else Component.SEMANTIC_MEMORY
        day = local_day(p.created_at)
        if p.memory_type == BlockTag.DREAM:
            if day in dream_days:
                report.errors.append((p.line, f"memory: a dream for {day} is already stored (one per day)"))
                continue
            dream_days.add(day)
        rows.append(_entity_for(p, component=component, day=day, persons=persons, diaries=diaries))
        report.imported += 1
    Entity.objects.bulk_create(rows, batch_size=1000)
    for row in rows:
        report.count(row.tag or "semantic", 1)


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
        entity.body.setdefault("observed_at", moment_iso(p.created_at))
        entity.valid_from = memory_valid_from(body=entity.body, created_at=p.created_at)
    else:
        entity.tag = p.memory_type
        entity.parent = diaries[day]
    entity.fts_segmented = segment_text(entity.searchable_text())
    return entity
