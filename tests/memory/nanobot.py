"""A nanobot workspace without nanobot: its MemoryStore's files, written and read the way nanobot-ai 0.3.5 does.

nanobot itself cannot be a test dependency (it pins ``mcp<2`` and pulls ~90 packages). The writer mirrors
``nanobot/agent/memory.py`` (``MemoryStore.append_history``, ``write_memory``, ``write_user``,
``write_soul``) of nanobot-ai 0.3.5 and the legacy ``memory/HISTORY.md`` that nanobot 0.1.x wrote; its
output was checked byte for byte against nanobot's own class (same inputs, frozen clock). The reader
mirrors 0.3.5's ``_iter_valid_entries`` / ``_valid_history_payload`` / ``_next_cursor``: what nanobot
accepts when it reads a history file back. Content is written as given (nanobot also runs
``strip_think()`` and caps an entry at 64,000 characters).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any


class NanobotWorkspace:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.memory_dir = self.root / "memory"
        self.memory_dir.mkdir(parents=True, exist_ok=True)  # MemoryStore.__init__ creates memory/ only

    # memory/history.jsonl: one JSON object per line, cursor = last cursor + 1 (from 1); memory/.cursor
    # holds the last cursor as text.
    def append_history(self, content: str, *, session_key: str | None = None, at: datetime | None = None) -> int:
        path = self.memory_dir / "history.jsonl"
        cursor = 1
        if path.exists():
            lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            if lines:
                cursor = int(json.loads(lines[-1])["cursor"]) + 1
        cursor_file = self.memory_dir / ".cursor"
        if cursor_file.exists():
            cursor = max(cursor, int(cursor_file.read_text(encoding="utf-8").strip()) + 1)
        record: dict[str, Any] = {
            "cursor": cursor,
            "timestamp": (at or datetime.now()).strftime("%Y-%m-%d %H:%M"),  # naive local time, minutes
            "content": content.rstrip().strip(),
        }
        if session_key:  # left out (never null) when absent or empty
            record["session_key"] = session_key
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        cursor_file.write_text(str(cursor), encoding="utf-8")
        return cursor

    def write_memory(self, text: str) -> None:
        (self.memory_dir / "MEMORY.md").write_text(text, encoding="utf-8")

    def write_user(self, text: str) -> None:
        (self.root / "USER.md").write_text(text, encoding="utf-8")

    def write_soul(self, text: str) -> None:
        (self.root / "SOUL.md").write_text(text, encoding="utf-8")

    # Legacy (nanobot 0.1.x) memory/HISTORY.md: entries "[YYYY-MM-DD HH:MM] text", each followed by a blank line.
    def append_legacy_history(self, text: str, *, at: datetime, raw: bool = False) -> None:
        stamp = at.strftime("%Y-%m-%d %H:%M")
        entry = f"[{stamp}] [RAW] {text}" if raw else f"[{stamp}] {text}"
        with open(self.memory_dir / "HISTORY.md", "a", encoding="utf-8") as handle:
            handle.write(entry.rstrip() + "\n\n")

    # --- Reading back, as nanobot 0.3.5 does -------------------------------------------------------

    def history_entries(self) -> list[dict[str, Any]]:
        """The entries nanobot keeps: a non-negative int cursor (not a bool), str timestamp and content,
        session_key str or absent; other lines are dropped."""
        kept = []
        path = self.memory_dir / "history.jsonl"
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            cursor = entry.get("cursor") if isinstance(entry, dict) else None
            if isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0:
                continue
            if not isinstance(entry.get("timestamp"), str) or not isinstance(entry.get("content"), str):
                continue
            if entry.get("session_key") is not None and not isinstance(entry["session_key"], str):
                continue
            kept.append(entry)
        return kept

    def next_cursor(self) -> int:
        counter_file = self.memory_dir / ".cursor"
        counter = int(counter_file.read_text(encoding="utf-8").strip()) if counter_file.exists() else None
        last = max((entry["cursor"] for entry in self.history_entries()), default=0)
        return max(counter or 0, last) + 1
