from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from conversations.models import Conversation, Message


def _write(tmp_path, lines: list[str]):
    path = tmp_path / "conversations.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


GOOD = json.dumps(
    {
        "conversation": {"external_id": "c1", "platform": "cli", "person": "leo"},
        "messages": [
            {"external_id": "m1", "role": "user", "content": "你好", "created_at": "2026-11-27T09:00:00+08:00"}
        ],
    },
    ensure_ascii=False,
)


def test_import_command_reports_what_it_stored(tmp_path):
    out = io.StringIO()
    call_command("import_conversations", str(_write(tmp_path, [GOOD])), stdout=out, stderr=io.StringIO())
    assert "stored 1 conversations, 1 messages" in out.getvalue()
    assert Message.objects.get().content == "你好"


def test_bad_lines_exit_non_zero_naming_the_line_but_keep_the_good_ones(tmp_path):
    err = io.StringIO()
    with pytest.raises(CommandError, match="1 bad line") as excinfo:
        call_command("import_conversations", str(_write(tmp_path, [GOOD, "[1, 2]"])), stdout=io.StringIO(), stderr=err)
    assert excinfo.value.returncode == 1
    assert "line 2: expected a JSON object" in err.getvalue()
    assert Conversation.objects.filter(external_id="c1").exists()


def test_missing_file_and_non_utf8_are_clear_errors(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_conversations", str(tmp_path / "nope.jsonl"))
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(CommandError, match="not UTF-8"):
        call_command("import_memories", str(latin1), stdout=io.StringIO(), stderr=io.StringIO())
