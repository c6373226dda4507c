"""The workspace's file names, record keys and escapes, shared by export and import."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import quote, unquote

from memory.models import SelfBlock

SOUL = "SOUL.md"
USER = "USER.md"
MEMORY = "memory/MEMORY.md"
HISTORY = "memory/history.jsonl"
LEGACY_HISTORY = "memory/HISTORY.md"
CURSOR = "memory/.cursor"
IDENTITY_MAP = "memory/identity_map.yaml"
PERSONS = "memory/persons"
# A person's subjects as they read (written by export, never imported: the night builds them from the facts).
ENTITIES = "entities.md"
PINNED = "[pinned] "
ESCAPE = "\\"
INDENT = "  "
HISTORY_KEYS = ("cursor", "timestamp", "content", "session_key")
# What SOUL.md holds before its first block when Anima wrote it: its title.
SOUL_TITLE = "# SOUL\n"
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
    # The record's session key as written (``telegram:-100123:topic:42``): kept whole and written back.
    session_key: str = ""


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
    # What SOUL.md holds before its first self-layer block, verbatim (None: no SOUL.md).
    soul_preamble: str | None = None
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

    def warned(self, name: str) -> bool:
        """True when a warning about file ``name`` was given already."""
        return any(warning.startswith(f"{name}:") for warning in self.warnings)


def _escaped(line: str, *, reads_as_syntax: bool) -> str:
    return ESCAPE + line if reads_as_syntax or line.startswith(ESCAPE) else line


def _soul_heading(line: str) -> str | None:
    """The self-layer block a ``## <key>`` line opens, else None."""
    key = line[3:].strip() if line.startswith("## ") else None
    return key if key in SelfBlock.values else None


def session_key_parse(key: str) -> tuple[str, str]:
    """nanobot's session key as (channel, chat id): ``telegram:-100123:topic:42`` → (telegram, -100123)."""
    channel, _, rest = key.partition(":")
    return unquote(channel), rest.split(":topic:", 1)[0]


def _session_channel(channel: str) -> str:
    """A channel as the first part of a session key: its own ``:`` (and ``%``) percent-escaped."""
    return channel.replace("%", "%25").replace(":", "%3A")


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
