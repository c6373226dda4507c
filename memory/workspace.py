"""Person-memory workspace interop: the SOUL.md / USER.md / memory/ file layout agents keep.

::

    SOUL.md                         self-layer blocks, one ``## <key>`` section each
    USER.md                         global ``preference`` memories (what the user wants)
    memory/MEMORY.md                every other global semantic memory, by type
    memory/history.jsonl            global timeline: {"cursor", "timestamp", "content"[, "channel"]}
    memory/identity_map.yaml        persons, display names and their channel ids
    memory/persons/<p>/MEMORY.md    the person's memories
    memory/persons/<p>/history.jsonl
    memory/persons/<p>/sources/<channel>_<id>.md   memories tied to one channel account

Memory files are Markdown lists under ``## <memory_type>`` headings; an item is ``- text``
(``- [pinned] text`` when pinned), further lines of one memory are indented two spaces.
Only active memories are exported; ids and creation times stay out, so exporting, importing
into an empty database and exporting again gives byte-identical files. Import is idempotent
(an identical fact or history entry is not written twice) and all-or-nothing: every file is
checked first, and any problem is reported as ``file:line: message`` before anything is written.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import yaml
from django.db import transaction
from django.utils import timezone

from anima.core.calendar import MomentError, datetime_parse
from anima.core.models import MemoryType
from conversations.models import HistoryEntry, Identity, Person, person_slug_valid
from conversations.services import history_append, identity_map, person_ensure
from memory.models import SelfBlock, SelfLayerBlock
from memory.selectors import active_semantic_memories
from memory.services import memory_pin, memory_remember

SOUL = "SOUL.md"
USER = "USER.md"
MEMORY = "memory/MEMORY.md"
HISTORY = "memory/history.jsonl"
IDENTITY_MAP = "memory/identity_map.yaml"
PERSONS = "memory/persons"
PINNED = "[pinned] "
INDENT = "  "
_HISTORY_KEYS = ("cursor", "timestamp", "content", "channel")
# Plain YAML scalars that would not read back as the same string.
_YAML_PLAIN = re.compile(r"[a-z][a-z0-9_-]*")
_YAML_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ufeff\ufffe\uffff\ud800-\udfff]")
_YAML_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}


class WorkspaceError(ValueError):
    """The workspace cannot be imported; ``errors`` lists every ``file:line: message``."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = errors
        super().__init__("\n".join(errors))


@dataclass
class _MemoryItem:
    content: str
    memory_type: str
    pinned: bool


@dataclass
class _HistoryItem:
    timestamp: datetime
    content: str
    channel: str


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


# --- Rendering ------------------------------------------------------------------------------------


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
            parts.append(f"- {PINNED if memory.pinned else ''}{first}\n")
            parts.extend(f"{INDENT}{line}\n" for line in rest)
    return "".join(parts)


def _history_jsonl(entries) -> str:
    lines = []
    for cursor, entry in enumerate(entries, start=1):
        row: dict[str, Any] = {
            "cursor": cursor,
            "timestamp": timezone.localtime(entry.timestamp).isoformat(),
            "content": entry.content,
        }
        if entry.channel:
            row["channel"] = entry.channel
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


def source_filename(*, channel: str, external_id: str) -> str:
    """``<channel>_<id>.md``; the channel's own underscores are escaped so the first ``_`` splits."""
    return f"{quote(channel, safe='').replace('_', '%5F')}_{quote(external_id, safe='')}.md"


def workspace_export(*, root: Path) -> list[Path]:
    """Write the workspace under ``root``; returns the files written."""
    files: dict[str, str] = {}
    blocks = {block.key: block.content for block in SelfLayerBlock.objects.all()}
    files[SOUL] = "# SOUL\n" + "".join(
        f"\n## {key}\n\n{blocks[key].strip(chr(10))}\n" if blocks.get(key, "").strip() else f"\n## {key}\n"
        for key in SelfBlock.values
    )
    memories = list(active_semantic_memories().select_related("person").order_by("id"))
    global_memories = [m for m in memories if m.person_id is None]
    files[USER] = _memory_markdown("USER", [m for m in global_memories if m.memory_type == MemoryType.PREFERENCE])
    files[MEMORY] = _memory_markdown("MEMORY", [m for m in global_memories if m.memory_type != MemoryType.PREFERENCE])
    history = HistoryEntry.objects.order_by("timestamp", "id")
    files[HISTORY] = _history_jsonl(history.filter(person__isnull=True))
    persons = list(Person.objects.prefetch_related("identities").order_by("slug"))
    files[IDENTITY_MAP] = _identity_yaml(persons)
    for person in persons:
        base = f"{PERSONS}/{person.slug}"
        own = [m for m in memories if m.person_id == person.pk]
        files[f"{base}/MEMORY.md"] = _memory_markdown(
            f"MEMORY: {person.slug}", [m for m in own if not m.body.get("source_id")]
        )
        files[f"{base}/history.jsonl"] = _history_jsonl(history.filter(person=person))
        sources: dict[tuple[str, str], list] = {}
        for memory in own:
            if memory.body.get("source_id"):
                sources.setdefault((memory.source_channel, str(memory.body["source_id"])), []).append(memory)
        for (channel, external_id), items in sorted(sources.items()):
            name = source_filename(channel=channel, external_id=external_id)
            files[f"{base}/sources/{name}"] = _memory_markdown(f"{channel}:{external_id}", items)
    written = []
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        # Bytes, not text mode: no newline translation, so the files are byte-stable across platforms.
        path.write_bytes(text.encode("utf-8"))
        written.append(path)
    return written


# --- Parsing --------------------------------------------------------------------------------------


class _Errors(list):
    def add(self, name: str, line: int, message: str) -> None:
        self.append(f"{name}:{line}: {message}")


def _read(root: Path, relative: str, errors: _Errors) -> str | None:
    path = root / relative
    if not path.is_file():
        return None
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        errors.add(relative, 1, f"not UTF-8 text ({exc.reason} at byte {exc.start})")
        return None


def _text_ok(text: str, name: str, line: int, errors: _Errors) -> bool:
    if "\x00" in text:
        errors.add(name, line, "NUL characters are not allowed")
        return False
    return True


def _parse_soul(text: str, name: str, errors: _Errors) -> dict[str, str]:
    blocks: dict[str, list[str]] = {}
    current: str | None = None
    for number, line in enumerate(text.split("\n"), start=1):
        if not _text_ok(line, name, number, errors):
            continue
        heading = line[3:].strip() if line.startswith("## ") else None
        if heading in SelfBlock.values:
            if heading in blocks:
                errors.add(name, number, f"block {heading!r} appears twice")
            current = heading
            blocks[current] = []
        elif current is not None:
            blocks[current].append(line)
        elif line.strip() and not line.startswith("# "):
            errors.add(
                name, number, f"text before the first block heading; expected '## <{'|'.join(SelfBlock.values)}>'"
            )
    return {key: "\n".join(lines).strip("\n") for key, lines in blocks.items()}


def _parse_memories(text: str, name: str, errors: _Errors, *, default_type: str) -> list[_MemoryItem]:
    items: list[tuple[int, _MemoryItem]] = []
    memory_type = default_type
    blanks = 0
    for number, line in enumerate(text.split("\n"), start=1):
        if not _text_ok(line, name, number, errors):
            continue
        if line.startswith("## "):
            heading = line[3:].strip()
            if heading not in MemoryType.values:
                errors.add(name, number, f"unknown memory type {heading!r}; one of {', '.join(MemoryType.values)}")
            memory_type = heading
            items.append((number, None))  # a heading ends the previous item
        elif line.startswith("# ") and not items:
            continue  # the file's title
        elif line.startswith("- "):
            body = line[2:]
            pinned = body.startswith(PINNED)
            items.append(
                (number, _MemoryItem(content=body.removeprefix(PINNED), memory_type=memory_type, pinned=pinned))
            )
        elif line.startswith(INDENT) and items and items[-1][1] is not None:
            # Empty lines just before a continuation belong to the memory (editors strip the indent).
            items[-1][1].content += "\n" * (blanks + 1) + line[len(INDENT) :]
        elif line.strip():
            errors.add(name, number, "expected '## <memory_type>', '- <memory>' or an indented continuation line")
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
            errors.add(name, number, "empty memory")
        elif item.memory_type in MemoryType.values:
            result.append(item)
    return result


def _parse_history(text: str, name: str, errors: _Errors) -> list[_HistoryItem]:
    items = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.add(name, number, f"invalid JSON: {exc.msg} at column {exc.colno}")
            continue
        if not isinstance(row, dict):
            errors.add(name, number, "expected a JSON object")
            continue
        unknown = sorted(set(row) - set(_HISTORY_KEYS))
        if unknown:
            errors.add(name, number, f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(_HISTORY_KEYS)}")
            continue
        content, channel, raw_time = row.get("content"), row.get("channel", ""), row.get("timestamp")
        if not isinstance(content, str) or not content.strip():
            errors.add(name, number, "content must be a non-empty string")
        elif not isinstance(channel, str):
            errors.add(name, number, "channel must be a string")
        elif "cursor" in row and (not isinstance(row["cursor"], int) or isinstance(row["cursor"], bool)):
            errors.add(name, number, "cursor must be an integer")
        elif _text_ok(content + channel, name, number, errors):
            timestamp = _timestamp(raw_time)
            if timestamp is None:
                errors.add(name, number, f"timestamp must be an ISO 8601 datetime, got {raw_time!r}")
            else:
                items.append(_HistoryItem(timestamp=timestamp, content=content, channel=channel))
    return items


def _timestamp(value: Any) -> datetime | None:
    try:
        return datetime_parse(value, field="timestamp") if isinstance(value, str) else None
    except MomentError:
        return None


def _scalar(node: yaml.Node, name: str, what: str, errors: _Errors) -> str | None:
    if not isinstance(node, yaml.ScalarNode):
        errors.add(name, node.start_mark.line + 1, f"{what} must be a single value")
        return None
    return "" if node.tag.endswith(":null") else node.value


def _mapping(
    node: yaml.Node, name: str, what: str, errors: _Errors, allowed: set[str] | None = None
) -> dict[str, tuple[int, yaml.Node]]:
    """A YAML mapping as {key: (line of the key, value node)}; keys outside ``allowed`` are errors."""
    if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null"):
        return {}
    if not isinstance(node, yaml.MappingNode):
        errors.add(name, node.start_mark.line + 1, f"{what} must be a mapping")
        return {}
    result = {}
    for key, value in node.value:
        text = _scalar(key, name, f"a key of {what}", errors)
        if text is None:
            continue
        if allowed is not None and text not in allowed:
            line = key.start_mark.line + 1
            errors.add(name, line, f"unknown key {text!r} in {what}; allowed: {', '.join(sorted(allowed))}")
            continue
        result[text] = (key.start_mark.line + 1, value)
    return result


def _is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null")


def _parse_identity_map(text: str, name: str, errors: _Errors) -> dict[str, _PersonFiles]:
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        errors.add(name, mark.line + 1 if mark else 1, f"invalid YAML: {getattr(exc, 'problem', exc)}")
        return {}
    persons: dict[str, _PersonFiles] = {}
    top = _mapping(root, name, "the file", errors, {"persons"}) if root is not None else {}
    if "persons" not in top:
        return persons
    for slug, (line, node) in _mapping(top["persons"][1], name, "persons", errors).items():
        if not person_slug_valid(slug):
            errors.add(name, line, f"person {slug!r} must be a slug (lowercase letters, digits, - or _)")
            continue
        fields = _mapping(node, name, f"person {slug}", errors, {"display_name", "ids"})
        person = persons.setdefault(slug, _PersonFiles())
        if "display_name" in fields:
            person.display_name = _scalar(fields["display_name"][1], name, "display_name", errors) or ""
        ids = fields.get("ids", (line, None))[1]
        if ids is None or _is_null(ids):
            continue
        if not isinstance(ids, yaml.SequenceNode):
            errors.add(name, ids.start_mark.line + 1, f"ids of {slug} must be a list")
            continue
        for entry in ids.value:
            account = _mapping(entry, name, f"an id entry of {slug}", errors, {"channel", "id"})
            if "channel" not in account or "id" not in account:
                errors.add(name, entry.start_mark.line + 1, f"an id entry of {slug} needs channel and id")
                continue
            channel = _scalar(account["channel"][1], name, "channel", errors)
            id_node = account["id"][1]
            for value in id_node.value if isinstance(id_node, yaml.SequenceNode) else [id_node]:
                external_id = _scalar(value, name, "id", errors)
                if channel and external_id:
                    person.ids.append((channel, external_id))
                elif channel is not None and external_id is not None:
                    errors.add(name, value.start_mark.line + 1, "channel and id must not be empty")
    return persons


def _parse_source_name(filename: str) -> tuple[str, str] | None:
    stem = filename.removesuffix(".md")
    channel, sep, external_id = stem.partition("_")
    if not sep or not channel or not external_id:
        return None
    return unquote(channel), unquote(external_id)


def _workspace_parse(root: Path) -> _Workspace:
    errors = _Errors()
    workspace = _Workspace()
    if not root.is_dir():
        raise WorkspaceError([f"{root}: not a directory"])
    if (text := _read(root, SOUL, errors)) is not None:
        workspace.soul = _parse_soul(text, SOUL, errors)
    if (text := _read(root, USER, errors)) is not None:
        workspace.memories += _parse_memories(text, USER, errors, default_type=MemoryType.PREFERENCE)
    if (text := _read(root, MEMORY, errors)) is not None:
        workspace.memories += _parse_memories(text, MEMORY, errors, default_type=MemoryType.WORLD)
    if (text := _read(root, HISTORY, errors)) is not None:
        workspace.history = _parse_history(text, HISTORY, errors)
    if (text := _read(root, IDENTITY_MAP, errors)) is not None:
        workspace.persons = _parse_identity_map(text, IDENTITY_MAP, errors)
    persons_dir = root / PERSONS
    for directory in sorted(persons_dir.iterdir()) if persons_dir.is_dir() else []:
        if not directory.is_dir():
            continue
        slug = directory.name
        base = f"{PERSONS}/{slug}"
        if not person_slug_valid(slug):
            errors.add(base, 1, f"person directory {slug!r} must be a slug (lowercase letters, digits, - or _)")
            continue
        person = workspace.persons.setdefault(slug, _PersonFiles())
        if (text := _read(root, f"{base}/MEMORY.md", errors)) is not None:
            person.memories = _parse_memories(text, f"{base}/MEMORY.md", errors, default_type=MemoryType.WORLD)
        if (text := _read(root, f"{base}/history.jsonl", errors)) is not None:
            person.history = _parse_history(text, f"{base}/history.jsonl", errors)
        sources_dir = directory / "sources"
        for path in sorted(sources_dir.glob("*.md")) if sources_dir.is_dir() else []:
            relative = f"{base}/sources/{path.name}"
            source = _parse_source_name(path.name)
            if source is None:
                errors.add(relative, 1, "source notes must be named <channel>_<id>.md")
                continue
            if (text := _read(root, relative, errors)) is not None:
                person.sources[source] = _parse_memories(text, relative, errors, default_type=MemoryType.WORLD)
    if errors:
        raise WorkspaceError(list(errors))
    return workspace


# --- Import ---------------------------------------------------------------------------------------


def workspace_import(*, root: Path, force: bool = False) -> Counter:
    """Import the workspace under ``root`` (idempotent, all-or-nothing); returns what was created.

    A locked self-layer block (existence_anchor) that already has different content is kept
    unless ``force``. Raises WorkspaceError naming file and line of every problem.
    """
    workspace = _workspace_parse(root)
    counts: Counter = Counter()
    with transaction.atomic():
        _import_soul(workspace.soul, counts, force=force)
        for item in workspace.memories:
            _import_memory(item, person=None, counts=counts)
        _import_history(workspace.history, person=None, counts=counts)
        for slug, files in workspace.persons.items():
            person = person_ensure(slug=slug, display_name=files.display_name)
            for channel, external_id in files.ids:
                if not Identity.objects.filter(channel=channel, external_id=external_id, person=person).exists():
                    identity_map(channel=channel, external_id=external_id, person_slug=slug)
                    counts["identities"] += 1
            for item in files.memories:
                _import_memory(item, person=person, counts=counts)
            for (channel, external_id), items in files.sources.items():
                for item in items:
                    _import_memory(item, person=person, counts=counts, source=(channel, external_id))
            _import_history(files.history, person=person, counts=counts)
    return counts


def _import_soul(blocks: dict[str, str], counts: Counter, *, force: bool) -> None:
    for key, content in blocks.items():
        block, _ = SelfLayerBlock.objects.get_or_create(key=key, defaults={"locked": key == SelfBlock.EXISTENCE_ANCHOR})
        if block.content == content:
            continue
        if block.locked and block.content and not force:
            counts["self_blocks_locked_kept"] += 1
            continue
        block.content = content
        block.save(update_fields=["content", "updated_at"])
        counts["self_blocks"] += 1


def _import_memory(
    item: _MemoryItem, *, person: Person | None, counts: Counter, source: tuple[str, str] | None = None
) -> None:
    memory, created = memory_remember(
        content=item.content,
        memory_type=item.memory_type,
        person=person,
        pinned=item.pinned,
        source_channel=source[0] if source else "",
        source_id=source[1] if source else "",
    )
    if created:
        counts["memories"] += 1
    elif item.pinned and not memory.pinned:
        memory_pin(memory=memory)


def _import_history(items: list[_HistoryItem], *, person: Person | None, counts: Counter) -> None:
    for item in items:
        if HistoryEntry.objects.filter(
            person=person, timestamp=item.timestamp, content=item.content, channel=item.channel
        ).exists():
            continue
        history_append(content=item.content, timestamp=item.timestamp, channel=item.channel, person=person)
        counts["history"] += 1
