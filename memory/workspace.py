"""Person-memory workspace interop: the SOUL.md / USER.md / memory/ file layout agents keep.

::

    SOUL.md                         self-layer blocks, one ``## <key>`` section each
    USER.md                         global ``preference`` memories (what the user wants)
    memory/MEMORY.md                every other global semantic memory, by type
    memory/history.jsonl            global timeline, nanobot's record (see below)
    memory/.cursor                  the last cursor of memory/history.jsonl
    memory/identity_map.yaml        persons, display names and their channel ids
    memory/persons/<p>/MEMORY.md    the person's memories
    memory/persons/<p>/history.jsonl
    memory/persons/<p>/sources/<channel>_<id>.md   memories tied to one channel account

The root files and ``memory/history.jsonl`` are the ones nanobot's ``MemoryStore`` keeps (followed
here: nanobot-ai 0.3.5). A history line is nanobot's record ``{"cursor", "timestamp", "content",
"session_key"?}``: the timestamp is ``YYYY-MM-DD HH:MM`` in local time (ANIMA_TIME_ZONE, or the time
zone given), the session key ``<channel>:<chat id>`` (``telegram:12345678``) or just the channel,
left out when there is none. On import a session key's channel account leads to its person (by the
identity map, the workspace's or the database's), so a nanobot timeline lands in each person's
history; entries are read in cursor order. nanobot's legacy ``memory/HISTORY.md`` (``[YYYY-MM-DD
HH:MM] text`` paragraphs) is read when ``history.jsonl`` is missing or empty, as nanobot migrates it.

Memory files are Markdown lists under ``## <memory_type>`` headings; an item is ``- text``
(``- [pinned] text`` when pinned), further lines of one memory are indented two spaces. A text
whose first line starts with ``[pinned] `` or ``\\`` is written with a ``\\`` in front, and so is a
line of a self-layer block that reads as a block heading (``## direction``) or starts with ``\\``;
import removes that one ``\\``. A source note whose name would be too long for a file system is
named ``<channel>_+<hash>.md`` and its first line (``# <channel>:<id>``, percent-escaped) names the
account.

Only active memories are exported; ids and creation times stay out, so exporting, importing into an
empty database and exporting again gives byte-identical files. Export writes every file into a
staging directory first and then moves them into place, so a failure leaves the target as it was.
Import is idempotent (a fact the person already holds, compared as ``memory_remember`` compares,
whatever its type or channel, or a history entry already there, as many times as the files hold
it, is not written again: an export imported into the database it came from writes nothing) and
all-or-nothing: every file is checked first, and any problem is reported as
``file:line: message`` before anything is written. What Anima does not understand but can skip (an
unknown history field, a heading that is not a memory type, prose between list items, a link leading
out of the workspace, never followed) is a warning with its line, never a failed import.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import unicodedata
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import yaml
from django.db import transaction
from django.utils import timezone

from anima.core.calendar import MomentError, datetime_parse, local_day
from anima.core.forgotten import HISTORY as FORGOTTEN_HISTORY
from anima.core.forgotten import (
    IDENTITY,
    PERSON,
    forgotten_account,
    forgotten_among,
    forgotten_excerpt,
    forgotten_fingerprint,
)
from anima.core.forgotten import MEMORY as FORGOTTEN_MEMORY
from anima.core.jsonvalue import JsonValueError, json_loads, unstorable
from anima.core.models import MemoryType
from anima.core.text import MAX_TEXT_CHARS, is_chinese
from conversations.models import HistoryEntry, Identity, Language, Person, person_slug_valid
from conversations.services import history_append, identity_map, person_ensure
from memory.models import SelfBlock, SelfLayerBlock, SemanticMemory
from memory.selectors import active_semantic_memories, self_layer_blocks
from memory.services import memory_create, memory_pin, same_content_key

SOUL = "SOUL.md"
USER = "USER.md"
MEMORY = "memory/MEMORY.md"
HISTORY = "memory/history.jsonl"
LEGACY_HISTORY = "memory/HISTORY.md"
CURSOR = "memory/.cursor"
IDENTITY_MAP = "memory/identity_map.yaml"
PERSONS = "memory/persons"
PINNED = "[pinned] "
ESCAPE = "\\"
INDENT = "  "
HISTORY_KEYS = ("cursor", "timestamp", "content", "session_key")
# Anima wrote the channel under this key before it followed nanobot's record; still read.
_OLD_CHANNEL_KEY = "channel"
NANOBOT_TIMESTAMP = "%Y-%m-%d %H:%M"
# Longest file name written (bytes); file systems allow 255, the rest is headroom.
MAX_NAME_BYTES = 200
_HASHED = "+"  # never produced by quote(): marks a source note named by a hash
# Plain YAML scalars that would not read back as the same string.
_YAML_PLAIN = re.compile(r"[a-z][a-z0-9_-]*")
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")
_YAML_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}
# nanobot's legacy HISTORY.md: an entry starts with "[YYYY-MM-DD…]"; a "[ts] ROLE:" line inside a
# "[RAW]" entry is one of its messages, not a new entry (nanobot/agent/memory.py, 0.3.5).
_LEGACY_ENTRY_START = re.compile(r"^\[(\d{4}-\d{2}-\d{2}[^\]]*)\]\s*")
_LEGACY_TIMESTAMP = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2})\]\s*")
_LEGACY_RAW_MESSAGE = re.compile(r"^\[\d{4}-\d{2}-\d{2}[^\]]*\]\s+[A-Z][A-Z0-9_]*(?:\s+\[tools:\s*[^\]]+\])?:")


class WorkspaceError(ValueError):
    """The workspace cannot be imported; ``errors`` lists every ``file:line: message``."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("\n".join(errors))


@dataclass
class WorkspaceImport:
    """What an import created, and the ``file:line: message`` warnings about what it skipped."""

    counts: Counter = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)


@dataclass
class _MemoryItem:
    content: str
    memory_type: str
    pinned: bool
    name: str = ""
    line: int = 0


@dataclass
class _HistoryItem:
    name: str
    line: int
    cursor: int
    timestamp: datetime
    content: str
    channel: str
    chat_id: str = ""


@dataclass
class _PersonFiles:
    display_name: str = ""
    ids: list[tuple[str, str]] = field(default_factory=list)
    memories: list[_MemoryItem] = field(default_factory=list)
    history: list[_HistoryItem] = field(default_factory=list)
    # (channel, id) -> memories of sources/<channel>_<id>.md
    sources: dict[tuple[str, str], list[_MemoryItem]] = field(default_factory=dict)


@dataclass
class _Workspace:
    soul: dict[str, str] = field(default_factory=dict)
    memories: list[_MemoryItem] = field(default_factory=list)
    history: list[_HistoryItem] = field(default_factory=list)
    persons: dict[str, _PersonFiles] = field(default_factory=dict)


class _Findings:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.warnings: list[str] = []

    def error(self, name: str, line: int, message: str) -> None:
        self.errors.append(f"{name}:{line}: {message}")

    def warn(self, name: str, line: int, message: str) -> None:
        self.warnings.append(f"{name}:{line}: {message}")


# --- Rendering ------------------------------------------------------------------------------------


def _escaped(line: str, *, reads_as_syntax: bool) -> str:
    return ESCAPE + line if reads_as_syntax or line.startswith(ESCAPE) else line


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


def _soul_heading(line: str) -> str | None:
    """The self-layer block a ``## <key>`` line opens, else None."""
    key = line[3:].strip() if line.startswith("## ") else None
    return key if key in SelfBlock.values else None


def _soul_markdown(blocks: dict[str, str]) -> str:
    parts = ["# SOUL\n"]
    for key in SelfBlock.values:
        content = blocks.get(key, "")
        if not content.strip():
            parts.append(f"\n## {key}\n")
            continue
        lines = [
            _escaped(line, reads_as_syntax=_soul_heading(line) is not None) for line in content.strip("\n").split("\n")
        ]
        parts.append(f"\n## {key}\n\n" + "\n".join(lines) + "\n")
    return "".join(parts)


def session_key_parse(key: str) -> tuple[str, str]:
    """nanobot's session key as (channel, chat id): ``telegram:-100123:topic:42`` → (telegram, -100123)."""
    channel, _, rest = key.partition(":")
    return unquote(channel), rest.split(":topic:", 1)[0]


def _session_channel(channel: str) -> str:
    """A channel as the first part of a session key: its own ``:`` (and ``%``) percent-escaped."""
    return channel.replace("%", "%25").replace(":", "%3A")


def _session_key(entry: HistoryEntry, *, accounts: dict[tuple[int, str], list[str]] | None) -> str:
    """The global timeline names the channel; a person's entry its conversation's account, or the person's
    only account on its channel."""
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


def _title_escaped(text: str, *, also: str = "") -> str:
    """``text`` on one readable line: ``%``, ``also`` and control or line-break characters percent-escaped."""
    return "".join(quote(char, safe="") if char in f"%{also}" or _breaks_a_line(char) else char for char in text)


def _breaks_a_line(char: str) -> bool:
    category = unicodedata.category(char)
    return category.startswith("C") or category in ("Zl", "Zp")


def source_filename(*, channel: str, external_id: str) -> str:
    """``<channel>_<id>.md``, the channel's own underscores escaped so the first ``_`` splits.

    A name longer than MAX_NAME_BYTES becomes ``<channel>_+<hash>.md``; the note's title names the account.
    """
    name = f"{quote(channel, safe='').replace('_', '%5F')}_{quote(external_id, safe='')}.md"
    if len(name.encode()) <= MAX_NAME_BYTES:
        return name
    digest = hashlib.sha256(f"{channel}\0{external_id}".encode()).hexdigest()[:24]
    return f"{quote(channel, safe='').replace('_', '%5F')[:60]}_{_HASHED}{digest}.md"


def _source_title(channel: str, external_id: str) -> str:
    return f"{_title_escaped(channel, also=':')}:{_title_escaped(external_id)}"


def _workspace_files(*, tz: tzinfo) -> dict[str, str]:
    files: dict[str, str] = {}
    files[SOUL] = _soul_markdown({block.key: block.content for block in self_layer_blocks()})
    memories = list(active_semantic_memories().select_related("person").order_by("id"))
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


# --- Parsing --------------------------------------------------------------------------------------


def _outside(root: Path, relative: str, findings: _Findings) -> bool:
    """True, with a warning naming it, when ``relative`` is (or lies under) a link leading out of the workspace.

    A workspace is a directory someone handed over: a link in it to ``~/.ssh`` or another person's
    notes must not become memories. Links within the workspace are followed. (Callers ask only about a
    file or directory that exists, so a loop of links never gets here.)
    """
    target = (root / relative).resolve()
    if target.is_relative_to(root.resolve()):
        return False
    findings.warn(relative, 1, f"a link to {target}, outside the workspace; not imported")
    return True


def _read(root: Path, relative: str, findings: _Findings) -> str | None:
    path = root / relative
    if not path.is_file() or _outside(root, relative, findings):
        return None
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        findings.error(relative, 1, f"not UTF-8 text ({exc.reason} at byte {exc.start})")
        return None


def _text_ok(text: str, name: str, line: int, findings: _Findings) -> bool:
    if unstorable(text):
        findings.error(name, line, "NUL characters and lone surrogates are not allowed")
        return False
    return True


def _unescaped(line: str) -> str:
    return line[len(ESCAPE) :] if line.startswith(ESCAPE) else line


def _parse_soul(text: str, name: str, findings: _Findings) -> dict[str, str]:
    blocks: dict[str, list[str]] = {}
    current: str | None = None
    for number, line in enumerate(text.split("\n"), start=1):
        if not _text_ok(line, name, number, findings):
            continue
        heading = _soul_heading(line)
        if heading is not None:
            if heading in blocks:
                findings.error(name, number, f"block {heading!r} appears twice")
            current = heading
            blocks[current] = []
        elif current is not None:
            blocks[current].append(_unescaped(line))
        elif line.strip() and not line.startswith("# "):
            findings.warn(
                name, number, f"text outside a self-layer block (## <{'|'.join(SelfBlock.values)}>) is not imported"
            )
    return {key: "\n".join(lines).strip("\n") for key, lines in blocks.items()}


def _memory_type_of(heading: str) -> str | None:
    """The memory type a heading names (``## preference``, ``## Preferences``), else None."""
    word = heading.strip().lower()
    for memory_type in MemoryType.values:
        if word in (memory_type, f"{memory_type}s"):
            return memory_type
    return None


def _parse_memories(text: str, name: str, findings: _Findings, *, default_type: str) -> list[_MemoryItem]:
    items: list[tuple[int, _MemoryItem | None]] = []
    memory_type = default_type
    blanks = 0
    for number, line in enumerate(text.split("\n"), start=1):
        if not _text_ok(line, name, number, findings):
            continue
        if line.startswith("## "):
            heading = line[3:].strip()
            named = _memory_type_of(heading)
            if named is None:
                findings.warn(
                    name, number, f"{heading!r} is not a memory type; its items are imported as {default_type}"
                )
            memory_type = named or default_type
            items.append((number, None))  # a heading ends the previous item
        elif line.startswith("# ") and not items:
            continue  # the file's title
        elif line.startswith(("- ", "* ")) or line.rstrip() in ("-", "*"):
            body = line[2:]
            pinned = body.startswith(PINNED)
            content = _unescaped(body.removeprefix(PINNED))
            item = _MemoryItem(content=content, memory_type=memory_type, pinned=pinned, name=name, line=number)
            items.append((number, item))
        elif line.startswith(INDENT) and items and items[-1][1] is not None:
            # Empty lines just before a continuation belong to the memory (editors strip the indent).
            items[-1][1].content += "\n" * (blanks + 1) + line[len(INDENT) :]
        elif line.strip():
            findings.warn(name, number, "not a list item ('- <memory>') or its indented continuation; not imported")
            items.append((number, None))
        else:
            blanks += 1
            continue
        blanks = 0
    result = []
    for number, item in items:
        if item is None:
            continue
        item.content = item.content.strip()
        if not item.content:
            findings.warn(name, number, "empty list item; not imported")
        elif len(item.content) > MAX_TEXT_CHARS:
            findings.error(name, number, f"memory longer than {MAX_TEXT_CHARS} characters")
        else:
            result.append(item)
    return result


def _history_timestamp(value: Any, name: str, number: int, findings: _Findings, tz: tzinfo) -> datetime | None:
    if not isinstance(value, str):
        findings.error(name, number, f"timestamp must be a string (YYYY-MM-DD HH:MM or ISO 8601), got {value!r}")
        return None
    try:
        return datetime_parse(value, field="timestamp", tz=tz)
    except MomentError as exc:
        findings.error(name, number, str(exc))
        return None


def _parse_history(text: str, name: str, findings: _Findings, tz: tzinfo) -> list[_HistoryItem]:
    items: list[_HistoryItem] = []
    cursor = 0
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json_loads(line, where="line")
        except (ValueError, JsonValueError) as exc:
            findings.error(name, number, f"invalid JSON: {getattr(exc, 'msg', exc)}")
            continue
        if not isinstance(row, dict):
            findings.error(name, number, "expected a JSON object")
            continue
        unknown = sorted(str(key) for key in set(row) - {*HISTORY_KEYS, _OLD_CHANNEL_KEY})
        if unknown:
            findings.warn(name, number, f"unknown field(s) {', '.join(unknown)} not imported")
        item = _history_item(row, name, number, findings, tz, previous_cursor=cursor)
        if item is not None:
            cursor = item.cursor
            items.append(item)
    # nanobot's order is the cursor's; a line without one keeps its place after the cursor before it.
    return sorted(items, key=lambda item: (item.cursor, item.line))


def _history_item(
    row: dict, name: str, number: int, findings: _Findings, tz: tzinfo, *, previous_cursor: int
) -> _HistoryItem | None:
    content, raw_cursor = row.get("content"), row.get("cursor", previous_cursor)
    key, channel = row.get("session_key"), row.get(_OLD_CHANNEL_KEY, "")
    if not isinstance(content, str):
        findings.error(name, number, "content must be a string")
    elif not isinstance(raw_cursor, int) or isinstance(raw_cursor, bool) or raw_cursor < 0:
        findings.error(name, number, "cursor must be a non-negative integer")
    elif (key is not None and not isinstance(key, str)) or not isinstance(channel, str):
        findings.error(name, number, "session_key and channel must be strings")
    elif not content.strip():
        findings.warn(name, number, "empty content; not imported")
    elif len(content) > MAX_TEXT_CHARS:
        findings.error(name, number, f"content longer than {MAX_TEXT_CHARS} characters")
    elif _text_ok(content + (key or "") + channel, name, number, findings):
        timestamp = _history_timestamp(row.get("timestamp"), name, number, findings, tz)
        chat_id = ""
        if key:
            channel, chat_id = session_key_parse(key)
        if len(channel) > 64:
            findings.error(name, number, "the channel of session_key is longer than 64 characters")
        elif timestamp is not None:
            return _HistoryItem(name, number, raw_cursor, timestamp, content, channel, chat_id)
    return None


def _legacy_chunks(text: str) -> list[tuple[int, str]]:
    """nanobot's split of a legacy HISTORY.md into entries, each with the line it starts on."""
    chunks: list[tuple[int, list[str]]] = []
    saw_blank = False
    for number, line in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), start=1):
        current = chunks[-1][1] if chunks else []
        starts = bool(current) and (
            (saw_blank and line.strip())
            or (_LEGACY_ENTRY_START.match(line) and not (_legacy_raw(current) and _LEGACY_RAW_MESSAGE.match(line)))
        )
        if not chunks or starts:
            chunks.append((number, [line]))
            saw_blank = False
            continue
        current.append(line)
        saw_blank = not line.strip()
    found = []
    for number, lines in chunks:
        while lines and not lines[0].strip():
            lines.pop(0)
            number += 1
        chunk = "\n".join(lines).strip()
        if chunk:
            found.append((number, chunk))
    return found


def _legacy_raw(lines: list[str]) -> bool:
    first = next((line for line in lines if line.strip()), "")
    match = _LEGACY_TIMESTAMP.match(first)
    return bool(match) and first[match.end() :].lstrip().startswith("[RAW]")


def _parse_legacy_history(root: Path, text: str, findings: _Findings, tz: tzinfo) -> list[_HistoryItem]:
    fallback = datetime.fromtimestamp((root / LEGACY_HISTORY).stat().st_mtime, tz).replace(second=0, microsecond=0)
    items = []
    for cursor, (number, chunk) in enumerate(_legacy_chunks(text), start=1):
        if not _text_ok(chunk, LEGACY_HISTORY, number, findings):
            continue
        timestamp, content = fallback, chunk
        match = _LEGACY_TIMESTAMP.match(chunk)
        if match:
            timestamp = _history_timestamp(match.group(1), LEGACY_HISTORY, number, findings, tz)
            content = chunk[match.end() :].lstrip() or chunk
        if timestamp is not None:
            items.append(_HistoryItem(LEGACY_HISTORY, number, cursor, timestamp, content, ""))
    return items


def _scalar(node: yaml.Node, name: str, what: str, findings: _Findings) -> str | None:
    if not isinstance(node, yaml.ScalarNode):
        findings.error(name, node.start_mark.line + 1, f"{what} must be a single value")
        return None
    return "" if node.tag.endswith(":null") else node.value


def _mapping(
    node: yaml.Node, name: str, what: str, findings: _Findings, allowed: set[str] | None = None
) -> dict[str, tuple[int, yaml.Node]]:
    """A YAML mapping as {key: (line of the key, value node)}; keys outside ``allowed`` are errors."""
    if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null"):
        return {}
    if not isinstance(node, yaml.MappingNode):
        findings.error(name, node.start_mark.line + 1, f"{what} must be a mapping")
        return {}
    result = {}
    for key, value in node.value:
        text = _scalar(key, name, f"a key of {what}", findings)
        if text is None:
            continue
        if allowed is not None and text not in allowed:
            line = key.start_mark.line + 1
            findings.error(name, line, f"unknown key {text!r} in {what}; allowed: {', '.join(sorted(allowed))}")
            continue
        result[text] = (key.start_mark.line + 1, value)
    return result


def _is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null")


def _parse_identity_map(text: str, name: str, findings: _Findings) -> dict[str, _PersonFiles]:
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        findings.error(name, mark.line + 1 if mark else 1, f"invalid YAML: {getattr(exc, 'problem', exc)}")
        return {}
    persons: dict[str, _PersonFiles] = {}
    top = _mapping(root, name, "the file", findings, {"persons"}) if root is not None else {}
    if "persons" not in top:
        return persons
    for slug, (line, node) in _mapping(top["persons"][1], name, "persons", findings).items():
        if not person_slug_valid(slug):
            findings.error(name, line, f"person {slug!r} must be a slug (lowercase letters, digits, - or _)")
            continue
        fields = _mapping(node, name, f"person {slug}", findings, {"display_name", "ids"})
        person = persons.setdefault(slug, _PersonFiles())
        if "display_name" in fields:
            person.display_name = _scalar(fields["display_name"][1], name, "display_name", findings) or ""
        ids = fields.get("ids", (line, None))[1]
        if ids is None or _is_null(ids):
            continue
        if not isinstance(ids, yaml.SequenceNode):
            findings.error(name, ids.start_mark.line + 1, f"ids of {slug} must be a list")
            continue
        for entry in ids.value:
            account = _mapping(entry, name, f"an id entry of {slug}", findings, {"channel", "id"})
            if "channel" not in account or "id" not in account:
                findings.error(name, entry.start_mark.line + 1, f"an id entry of {slug} needs channel and id")
                continue
            channel = _scalar(account["channel"][1], name, "channel", findings)
            id_node = account["id"][1]
            for value in id_node.value if isinstance(id_node, yaml.SequenceNode) else [id_node]:
                external_id = _scalar(value, name, "id", findings)
                if channel and external_id:
                    person.ids.append((channel, external_id))
                elif channel is not None and external_id is not None:
                    findings.error(name, value.start_mark.line + 1, "channel and id must not be empty")
    return persons


def _source_account(path: Path, text: str) -> tuple[str, str] | None:
    """The account a source note is about: from its name, or from its title when the name is a hash."""
    channel, sep, external_id = path.name.removesuffix(".md").partition("_")
    if not sep or not channel or not external_id:
        return None
    if not external_id.startswith(_HASHED):
        return unquote(channel), unquote(external_id)
    title = text.split("\n", 1)[0]
    channel, sep, external_id = title.removeprefix("# ").partition(":")
    if not title.startswith("# ") or not sep:
        return None
    return unquote(channel), unquote(external_id)


def _workspace_parse(root: Path, findings: _Findings, tz: tzinfo) -> _Workspace:
    workspace = _Workspace()
    if not root.is_dir():
        raise WorkspaceError([f"{root}: not a directory"])
    if (text := _read(root, SOUL, findings)) is not None:
        workspace.soul = _parse_soul(text, SOUL, findings)
    if (text := _read(root, USER, findings)) is not None:
        workspace.memories += _parse_memories(text, USER, findings, default_type=MemoryType.PREFERENCE)
    if (text := _read(root, MEMORY, findings)) is not None:
        workspace.memories += _parse_memories(text, MEMORY, findings, default_type=MemoryType.WORLD)
    if (text := _read(root, HISTORY, findings)) is not None and text.strip():
        workspace.history = _parse_history(text, HISTORY, findings, tz)
    elif (text := _read(root, LEGACY_HISTORY, findings)) is not None:
        workspace.history = _parse_legacy_history(root, text, findings, tz)
    if (text := _read(root, IDENTITY_MAP, findings)) is not None:
        workspace.persons = _parse_identity_map(text, IDENTITY_MAP, findings)
    persons_dir = root / PERSONS
    persons_here = persons_dir.is_dir() and not _outside(root, PERSONS, findings)
    for directory in sorted(persons_dir.iterdir()) if persons_here else []:
        if not directory.is_dir():
            continue
        slug = directory.name
        base = f"{PERSONS}/{slug}"
        if not person_slug_valid(slug):
            findings.error(base, 1, f"person directory {slug!r} must be a slug (lowercase letters, digits, - or _)")
            continue
        if _outside(root, base, findings):
            continue
        person = workspace.persons.setdefault(slug, _PersonFiles())
        if (text := _read(root, f"{base}/MEMORY.md", findings)) is not None:
            person.memories = _parse_memories(text, f"{base}/MEMORY.md", findings, default_type=MemoryType.WORLD)
        if (text := _read(root, f"{base}/history.jsonl", findings)) is not None:
            person.history = _parse_history(text, f"{base}/history.jsonl", findings, tz)
        sources_dir = directory / "sources"
        sources_here = sources_dir.is_dir() and not _outside(root, f"{base}/sources", findings)
        for path in sorted(sources_dir.glob("*.md")) if sources_here else []:
            relative = f"{base}/sources/{path.name}"
            if (text := _read(root, relative, findings)) is None:
                continue
            source = _source_account(path, text)
            if source is None:
                findings.error(relative, 1, "source notes must be named <channel>_<id>.md")
                continue
            person.sources[source] = _parse_memories(text, relative, findings, default_type=MemoryType.WORLD)
    return workspace


def _route_history(workspace: _Workspace, findings: _Findings) -> None:
    """Send each global entry whose session account belongs to a person to that person's history.

    An account belongs to whom the workspace's identity map says, else the database's identities.
    A person's own entry may not name someone else's account.
    """
    owners = {
        (channel, external_id): slug
        for channel, external_id, slug in Identity.objects.values_list("channel", "external_id", "person__slug")
    }
    for slug, files in workspace.persons.items():
        for account in files.ids:
            owners[account] = slug
    unmapped: set[tuple[str, str]] = set()
    kept = []
    for item in workspace.history:
        owner = owners.get((item.channel, item.chat_id)) if item.chat_id else None
        if owner is not None:
            workspace.persons.setdefault(owner, _PersonFiles()).history.append(item)
            continue
        if item.chat_id and (item.channel, item.chat_id) not in unmapped:
            unmapped.add((item.channel, item.chat_id))
            findings.warn(
                item.name,
                item.line,
                f"session {item.channel}:{item.chat_id} is not mapped to a person; its entries are global history",
            )
        kept.append(item)
    workspace.history = kept
    for slug, files in workspace.persons.items():
        for item in files.history:
            owner = owners.get((item.channel, item.chat_id)) if item.chat_id else None
            if owner is not None and owner != slug and item.name != HISTORY:
                findings.error(item.name, item.line, f"session {item.channel}:{item.chat_id} belongs to {owner}")
        files.history.sort(key=lambda item: (item.name != HISTORY, item.cursor, item.line))


# --- Import ---------------------------------------------------------------------------------------


def workspace_import(
    *, root: Path, force: bool = False, tz: tzinfo | None = None, allow_forgotten: bool = False
) -> WorkspaceImport:
    """Import the workspace under ``root`` (idempotent, all-or-nothing); returns what was created and the warnings.

    Naive timestamps are read in ``tz`` (default ANIMA_TIME_ZONE). A locked self-layer block
    (existence_anchor) that already has different content is kept unless ``force``. What a forget
    took (a person erased, a memory or history entry forgotten) is skipped with a warning naming it,
    unless ``allow_forgotten``. Raises WorkspaceError naming file and line of every problem.
    """
    findings = _Findings()
    workspace = _workspace_parse(root, findings, tz or timezone.get_current_timezone())
    if not findings.errors:
        _route_history(workspace, findings)
    if findings.errors:
        raise WorkspaceError(findings.errors)
    _forgotten_drop(workspace, findings, allow=allow_forgotten)
    result = WorkspaceImport(warnings=findings.warnings)
    counts = result.counts
    with transaction.atomic():
        _import_soul(workspace.soul, counts, force=force)
        _import_memories(workspace.memories, person=None, counts=counts, held=_memories_held(person=None))
        _import_history(workspace.history, person=None, counts=counts)
        for slug, files in workspace.persons.items():
            person = person_ensure(slug=slug, display_name=files.display_name)
            for channel, external_id in files.ids:
                if not Identity.objects.filter(channel=channel, external_id=external_id, person=person).exists():
                    identity_map(channel=channel, external_id=external_id, person_slug=slug)
                    counts["identities"] += 1
            held = _memories_held(person=person)
            _import_memories(files.memories, person=person, counts=counts, held=held)
            for source, items in files.sources.items():
                _import_memories(items, person=person, counts=counts, held=held, source=source)
            _import_history(files.history, person=person, counts=counts)
    return result


def _forgotten_drop(workspace: _Workspace, findings: _Findings, *, allow: bool) -> None:
    """Leave out what a forget took, matched by the tombstones' fingerprints, each with a warning naming it:
    a workspace exported before an erasure must not undo it. With ``allow`` it is imported, still named."""
    persons = workspace.persons
    candidates = {_fingerprint(PERSON, slug) for slug in persons}
    for files in persons.values():
        candidates.update(_fingerprint(IDENTITY, _account(*account)) for account in files.ids)
        candidates.update(_fingerprint(FORGOTTEN_MEMORY, item.content) for item in _all_memories(files))
        candidates.update(_fingerprint(FORGOTTEN_HISTORY, item.content) for item in files.history)
    candidates.update(_fingerprint(FORGOTTEN_MEMORY, item.content) for item in workspace.memories)
    candidates.update(_fingerprint(FORGOTTEN_HISTORY, item.content) for item in workspace.history)
    forgotten = forgotten_among(fingerprints=candidates)
    if not forgotten:
        return
    outcome = "imported anyway (--allow-forgotten)" if allow else "not imported"

    def kept(items: list, kind: str, what: str) -> list:
        left = []
        for item in items:
            if _fingerprint(kind, item.content) in forgotten:
                named = f"{what} {forgotten_excerpt(item.content)}"
                findings.warn(item.name, item.line, f"{named} was forgotten; {outcome}")
                if not allow:
                    continue
            left.append(item)
        return left

    for slug, files in list(persons.items()):
        if _fingerprint(PERSON, slug) in forgotten:
            memories = sum(1 for _ in _all_memories(files))
            findings.warnings.append(
                f"{PERSONS}/{slug}/: person {slug} was erased; {outcome}: their {memories} memories, "
                f"{len(files.history)} history entries and {len(files.ids)} accounts"
            )
            if not allow:
                del persons[slug]
            continue
        for account in files.ids:
            if _fingerprint(IDENTITY, _account(*account)) in forgotten:
                findings.warn(IDENTITY_MAP, 1, f"account {account[0]}:{account[1]} of {slug} was erased; {outcome}")
        if not allow:
            files.ids = [a for a in files.ids if _fingerprint(IDENTITY, _account(*a)) not in forgotten]
        files.memories = kept(files.memories, FORGOTTEN_MEMORY, "memory")
        files.sources = {source: kept(items, FORGOTTEN_MEMORY, "memory") for source, items in files.sources.items()}
        files.history = kept(files.history, FORGOTTEN_HISTORY, "history entry")
    workspace.memories = kept(workspace.memories, FORGOTTEN_MEMORY, "memory")
    workspace.history = kept(workspace.history, FORGOTTEN_HISTORY, "history entry")


def _fingerprint(kind: str, text: str) -> str:
    return forgotten_fingerprint(kind=kind, text=text)


def _account(channel: str, external_id: str) -> str:
    return forgotten_account(channel=channel, external_id=external_id)


def _all_memories(files: _PersonFiles):
    yield from files.memories
    for items in files.sources.values():
        yield from items


def _import_soul(blocks: dict[str, str], counts: Counter, *, force: bool) -> None:
    for key, content in blocks.items():
        language = Language.ZH if is_chinese(content) else Language.EN
        block, _ = SelfLayerBlock.objects.get_or_create(
            key=key, language=language, defaults={"locked": key == SelfBlock.EXISTENCE_ANCHOR}
        )
        if block.content == content:
            continue
        if block.locked and block.content and not force:
            counts["self_blocks_locked_kept"] += 1
            continue
        block.content = content
        block.save(update_fields=["content", "updated_at"])
        counts["self_blocks"] += 1


def _memories_held(*, person: Person | None) -> dict[str, list[SemanticMemory]]:
    """``person``'s active memories (the global ones for None) by what counts as the same fact, oldest first."""
    held: dict[str, list[SemanticMemory]] = {}
    for memory in active_semantic_memories().filter(person=person).only("id", "content", "pinned").order_by("id"):
        held.setdefault(same_content_key(memory.content), []).append(memory)
    return held


def _import_memories(
    items: list[_MemoryItem],
    *,
    person: Person | None,
    counts: Counter,
    held: dict[str, list[SemanticMemory]],
    source: tuple[str, str] | None = None,
) -> None:
    """Write the memories ``person`` does not hold yet, as many times as the files hold each.

    A memory is already there when the person holds the same fact (``same_content_key``, as
    ``memory_remember`` compares: "Leo likes tea." is "leo likes tea"), whatever its type, channel
    or source note: an export records no channel for a fact sleep extracted, so re-importing it
    must still find it. Each memory held answers one item of the files (``held`` is shared by all
    of a person's files and used up), so "LEO LIKES  TEA" beside "Leo likes tea" in the files are
    two memories, as exported from two.
    """
    channel, source_id = source or ("", "")
    now = timezone.now()
    for item in items:
        same = held.get(same_content_key(item.content))
        if same:
            # A pinned item takes a pinned copy (or pins one); an unpinned item leaves pinned copies to pinned items.
            memory = next((m for m in same if m.pinned == item.pinned), same[0])
            same.remove(memory)
            if item.pinned and not memory.pinned:
                memory_pin(memory=memory)
            continue
        body: dict[str, Any] = {"observed_at": now.isoformat()}
        if source_id:
            body["source_id"] = source_id
        memory_create(
            content=item.content,
            memory_type=item.memory_type,
            person=person,
            pinned=item.pinned,
            source_channel=channel,
            source_day=local_day(now),
            body=body,
            created_at=now,
        )
        counts["memories"] += 1


def _minute(moment: datetime) -> datetime:
    # In UTC: an old local offset such as Shanghai's +08:05:43 would floor a local minute to other seconds.
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


def _import_history(items: list[_HistoryItem], *, person: Person | None, counts: Counter) -> None:
    """Append the entries the database does not hold yet (same minute, text and channel), as many as the file has."""
    if not items:
        return
    start = min(_minute(item.timestamp) for item in items)
    end = max(_minute(item.timestamp) for item in items) + timedelta(minutes=1)
    existing = Counter(
        (_minute(timestamp), content, channel)
        for timestamp, content, channel in HistoryEntry.objects.filter(
            person=person, timestamp__gte=start, timestamp__lt=end
        ).values_list("timestamp", "content", "channel")
    )
    for item in items:
        key = (_minute(item.timestamp), item.content, item.channel)
        if existing[key] > 0:
            existing[key] -= 1
            continue
        history_append(content=item.content, timestamp=item.timestamp, channel=item.channel, person=person)
        counts["history"] += 1
