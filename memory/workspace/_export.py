"""Export: the database as workspace files, moved into place only once all are written."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from datetime import tzinfo
from pathlib import Path
from typing import Any

from django.utils import timezone

from anima.core.models import MemoryType
from conversations.models import HistoryEntry, Person
from memory.models import SelfBlock, WorkspaceText
from memory.selectors import self_layer_blocks
from memory.subjects.entities import entities_markdown
from memory.subjects.recall import subjects_served
from memory.subjects.selectors import active_facts
from memory.workspace._layout import (
    _YAML_PLAIN,
    _YAML_RESERVED,
    _YAML_UNSAFE,
    CURSOR,
    ENTITIES,
    HISTORY,
    IDENTITY_MAP,
    INDENT,
    MEMORY,
    NANOBOT_TIMESTAMP,
    PERSONS,
    PINNED,
    SOUL,
    SOUL_TITLE,
    USER,
    _escaped,
    _session_channel,
    _soul_heading,
    _source_title,
    source_filename,
)


def _memory_markdown(title: str, memories) -> str:
    by_type: dict[str, list] = {}
    for memory in memories:
        by_type.setdefault(memory.memory_type, []).append(memory)
    parts = [f"# {title}\n"]
    for memory_type in MemoryType.values:
        if memory_type not in by_type:
            continue
        parts.append(f"\n## {memory_type}\n\n")
        for memory in by_type[memory_type]:
            first, *rest = memory.content.split("\n")
            first = _escaped(first, reads_as_syntax=first.startswith(PINNED))
            parts.append(f"- {PINNED if memory.pinned else ''}{first}\n")
            parts.extend(f"{INDENT}{line}\n" for line in rest)
    return "".join(parts)


def _soul_markdown(blocks: dict[str, str], *, kept: str | None = None) -> str:
    """Anima's title and a ``## <key>`` section per block; or, for a SOUL.md Anima could not place all of, what it
    kept verbatim and the sections of the blocks that hold text (the file stays the one its agent wrote)."""
    parts = [SOUL_TITLE if kept is None else kept]
    for key in SelfBlock.values:
        content = blocks.get(key, "")
        if not content.strip():
            if kept is None:
                parts.append(f"\n## {key}\n")
            continue
        lines = [
            _escaped(line, reads_as_syntax=_soul_heading(line) is not None) for line in content.strip("\n").split("\n")
        ]
        parts.append(f"\n## {key}\n\n" + "\n".join(lines) + "\n")
    return "".join(parts)


def _session_key(entry: HistoryEntry, *, accounts: dict[tuple[int, str], list[str]] | None) -> str:
    """An imported record's own key, whole; else the global timeline names the channel, a person's entry its
    conversation's account, or the person's only account on its channel."""
    if entry.session_key:
        return entry.session_key
    channel = _session_channel(entry.channel)
    if accounts is None:
        return channel
    conversation = entry.conversation
    if conversation is not None and conversation.chat_id and conversation.channel_name == entry.channel:
        return f"{channel}:{conversation.chat_id}"
    ids = accounts.get((entry.person_id, entry.channel), [])
    return f"{channel}:{ids[0]}" if len(ids) == 1 and channel else channel


def _history_jsonl(entries, *, tz: tzinfo, accounts: dict[tuple[int, str], list[str]] | None = None) -> str:
    """nanobot's records, cursor 1.. in time order; the global timeline names channels, a person's accounts."""
    lines = []
    for cursor, entry in enumerate(entries, start=1):
        row: dict[str, Any] = {
            "cursor": cursor,
            "timestamp": timezone.localtime(entry.timestamp, tz).strftime(NANOBOT_TIMESTAMP),
            "content": entry.content,
        }
        key = _session_key(entry, accounts=accounts)
        if key:
            row["session_key"] = key
        lines.append(json.dumps(row, ensure_ascii=False) + "\n")
    return "".join(lines)


def _yaml_quoted(value: str) -> str:
    """A YAML double-quoted scalar: JSON's escapes, plus escapes for what YAML refuses or reads as a line break."""
    return _YAML_UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", json.dumps(value, ensure_ascii=False))


def _yaml_scalar(value: str) -> str:
    if _YAML_PLAIN.fullmatch(value) and value not in _YAML_RESERVED:
        return value
    return _yaml_quoted(value)


def _identity_yaml(persons: list[Person]) -> str:
    if not persons:
        return "persons: {}\n"
    lines = ["persons:"]
    for person in persons:
        lines.append(f"  {_yaml_scalar(person.slug)}:")
        lines.append(f"    display_name: {_yaml_quoted(person.display_name)}")
        by_channel: dict[str, list[str]] = {}
        for identity in person.identities.all():
            by_channel.setdefault(identity.channel, []).append(identity.external_id)
        if not by_channel:
            lines.append("    ids: []")
            continue
        lines.append("    ids:")
        for channel in sorted(by_channel):
            ids = ", ".join(_yaml_quoted(value) for value in sorted(by_channel[channel]))
            lines.append(f"      - channel: {_yaml_scalar(channel)}")
            lines.append(f"        id: [{ids}]")
    return "\n".join(lines) + "\n"


def _workspace_files(*, tz: tzinfo) -> dict[str, str]:
    files: dict[str, str] = {}
    kept = WorkspaceText.objects.filter(path=SOUL).values_list("content", flat=True).first()
    files[SOUL] = _soul_markdown({block.key: block.content for block in self_layer_blocks()}, kept=kept)
    # Profiles are written with their subjects (ENTITIES), not as facts: the night makes them again from the facts.
    memories = list(active_facts().select_related("person").order_by("id"))
    global_memories = [m for m in memories if m.person_id is None]
    files[USER] = _memory_markdown("USER", [m for m in global_memories if m.memory_type == MemoryType.PREFERENCE])
    files[MEMORY] = _memory_markdown("MEMORY", [m for m in global_memories if m.memory_type != MemoryType.PREFERENCE])
    history = HistoryEntry.objects.select_related("conversation").order_by("timestamp", "id")
    global_history = list(history.filter(person__isnull=True))
    files[HISTORY] = _history_jsonl(global_history, tz=tz)
    files[CURSOR] = str(len(global_history))
    persons = list(Person.objects.prefetch_related("identities").order_by("slug"))
    files[IDENTITY_MAP] = _identity_yaml(persons)
    accounts: dict[tuple[int, str], list[str]] = {}
    for person in persons:
        for identity in person.identities.all():
            accounts.setdefault((person.pk, identity.channel), []).append(identity.external_id)
    for person in persons:
        base = f"{PERSONS}/{person.slug}"
        own = [m for m in memories if m.person_id == person.pk]
        files[f"{base}/MEMORY.md"] = _memory_markdown(
            f"MEMORY: {person.slug}", [m for m in own if not m.body.get("source_id")]
        )
        files[f"{base}/history.jsonl"] = _history_jsonl(history.filter(person=person), tz=tz, accounts=accounts)
        if subjects_served(person=person).exists():
            files[f"{base}/{ENTITIES}"] = entities_markdown(person=person)
        sources: dict[tuple[str, str], list] = {}
        for memory in own:
            if memory.body.get("source_id"):
                sources.setdefault((memory.source_channel, str(memory.body["source_id"])), []).append(memory)
        for (channel, external_id), items in sorted(sources.items()):
            name = source_filename(channel=channel, external_id=external_id)
            files[f"{base}/sources/{name}"] = _memory_markdown(_source_title(channel, external_id), items)
    return files


def workspace_export(*, root: Path, tz: tzinfo | None = None) -> list[Path]:
    """Write the workspace under ``root`` (timestamps in ``tz``, default ANIMA_TIME_ZONE); returns the files.

    Every file is written to a staging directory beside ``root`` first; only then are they moved into
    ``root``, replacing its workspace files (and its ``memory/persons``) and leaving other files alone.
    """
    files = _workspace_files(tz=tz or timezone.get_current_timezone())
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = root.parent / f".{root.name}.export-{uuid.uuid4().hex[:12]}"
    staging.mkdir()
    try:
        for relative, text in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            # Bytes, not text mode: no newline translation, so the files are byte-stable across platforms.
            path.write_bytes(text.encode("utf-8"))
        _move_into_place(staging, root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [root / relative for relative in files]


def _move_into_place(staging: Path, root: Path) -> None:
    if not root.exists():
        staging.rename(root)
        return
    for relative in (SOUL, USER, MEMORY, HISTORY, CURSOR, IDENTITY_MAP):
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / relative, root / relative)
    # The persons directory is the export's as a whole: a person no longer in the database leaves with it.
    persons, replaced = root / PERSONS, staging / "replaced-persons"
    if persons.exists():
        persons.rename(replaced)
    if (staging / PERSONS).exists():
        (staging / PERSONS).rename(persons)
