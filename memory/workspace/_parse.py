"""Reading a workspace: every file parsed and checked, each problem named by file and line."""

from __future__ import annotations

from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import yaml

from anima.core.calendar import MomentError, datetime_parse
from anima.core.jsonvalue import JsonValueError, json_loads, unstorable
from anima.core.models import MemoryType
from anima.core.text import MAX_TEXT_CHARS
from conversations.models import person_slug_valid
from memory.models import SelfBlock
from memory.workspace._layout import (
    _HASHED,
    _LEGACY_ENTRY_START,
    _LEGACY_RAW_MESSAGE,
    _LEGACY_TIMESTAMP,
    _OLD_CHANNEL_KEY,
    ESCAPE,
    HISTORY,
    HISTORY_KEYS,
    IDENTITY_MAP,
    INDENT,
    LEGACY_HISTORY,
    MEMORY,
    PERSONS,
    PINNED,
    SOUL,
    USER,
    WorkspaceError,
    _Findings,
    _HistoryItem,
    _MemoryItem,
    _PersonFiles,
    _soul_heading,
    _Workspace,
    session_key_parse,
)


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


def _parse_soul(text: str, name: str, findings: _Findings) -> tuple[str, dict[str, str]]:
    """SOUL.md as (what precedes its first self-layer block, verbatim; the blocks).

    The text before the first block is what Anima cannot place (nanobot's own persona, free-form Markdown): it is
    kept as written, without the one line break an export puts before the first block.
    """
    blocks: dict[str, list[str]] = {}
    current: str | None = None
    lines = text.split("\n")
    preamble = len(lines)
    for number, line in enumerate(lines, start=1):
        if not _text_ok(line, name, number, findings):
            continue
        heading = _soul_heading(line)
        if heading is not None:
            if heading in blocks:
                findings.error(name, number, f"block {heading!r} appears twice")
            current = heading
            blocks[current] = []
            preamble = min(preamble, number - 1)
        elif current is not None:
            blocks[current].append(_unescaped(line))
        elif line.strip() and not line.startswith("# ") and preamble == len(lines) and not findings.warned(name):
            findings.warn(
                name,
                number,
                f"text outside a self-layer block (## <{'|'.join(SelfBlock.values)}>) is kept as written and "
                "exported again; it is not part of the self layer",
            )
    kept = "\n".join(lines[:preamble])
    return kept, {key: "\n".join(lines).strip("\n") for key, lines in blocks.items()}


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
        elif len(key or "") > 255:
            findings.error(name, number, "session_key is longer than 255 characters")
        elif timestamp is not None:
            return _HistoryItem(name, number, raw_cursor, timestamp, content, channel, chat_id, key or "")
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
        workspace.soul_preamble, workspace.soul = _parse_soul(text, SOUL, findings)
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
