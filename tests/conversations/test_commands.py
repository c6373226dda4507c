from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from conversations.models import Conversation, Message
from tests.factories import ConversationFactory, PersonFactory, UserFactory


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


# --- token_scope ----------------------------------------------------------------------------------


def _token_scope(*args: str) -> str:
    out = io.StringIO()
    call_command("token_scope", *args, stdout=out)
    return out.getvalue()


def test_token_scope_sets_shows_and_clears_a_scope():
    UserFactory(username="runtime")
    PersonFactory(slug="leo")
    PersonFactory(slug="maya")
    ConversationFactory(external_id="tg-1", person=None, chat_id="")

    unscoped = _token_scope("runtime")
    agent = _token_scope("runtime", "--scope", "agent", "--person", "leo", "maya", "--conversation", "tg-1")
    shown = _token_scope("runtime")
    person = _token_scope("runtime", "--scope", "person", "--person", "leo")
    cleared = _token_scope("runtime", "--clear")

    assert "no rights" in unscoped and "drf_create_token runtime" in unscoped
    assert "runtime: an agent token bound to persons leo, maya and conversations tg-1" in agent
    assert shown.strip() == agent.strip()
    assert "runtime: a person token of leo" in person
    assert "scope cleared" in cleared and "no rights" in cleared


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ghost", "--scope", "agent", "--person", "leo"], "no user 'ghost'"),
        (["runtime", "--scope", "agent", "--person", "nobody"], "unknown person(s): nobody"),
        (["runtime", "--scope", "agent", "--conversation", "nope"], "unknown conversation(s): nope"),
        (["runtime", "--scope", "person", "--person", "leo", "maya"], "exactly one person"),
        (["runtime", "--person", "leo"], "need --scope"),
        (["ops", "--scope", "agent", "--person", "leo"], "ops is staff"),
    ],
)
def test_token_scope_refuses_what_it_cannot_do_with_a_clear_message(args, message):
    UserFactory(username="runtime")
    UserFactory(username="ops", is_staff=True)
    PersonFactory(slug="leo")
    PersonFactory(slug="maya")

    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call_command("token_scope", *args, stdout=io.StringIO())
