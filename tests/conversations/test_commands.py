from __future__ import annotations

import io
import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from conversations.models import Conversation, Message, Person
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


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_conversations", str(tmp_path / "nope.jsonl"))


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
        (["ghost", "--scope", "agent", "--person", "leo"], "no user 'ghost' (--create makes it)"),
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


# As the docs write them, on the demo's data.
DOCS_AGENT = "token_scope runtime --create --scope agent --person leo"
DOCS_BOT = "token_scope leo-telegram --create --scope agent --conversation demo-conv-leo-tg-1128-am"
DOCS_APP = "token_scope leo-app --create --scope person --person leo"


@pytest.mark.parametrize("invocation", [DOCS_AGENT, DOCS_BOT, DOCS_APP])
def test_one_command_creates_the_user_its_scope_and_a_token_that_works_on_the_demo_data(invocation, demo_sample):
    name, *args = invocation.split()[1:]

    out = _token_scope(name, *args)

    key = re.search(r"^token (\w{40})\b", out, re.MULTILINE).group(1)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    listed = client.get("/api/conversations/", {"page_size": 200}).json()["results"]
    persons = {conversation["person"] for conversation in listed}
    assert listed and persons == {"leo"}
    if "--conversation" in args:
        assert [c["external_id"] for c in listed] == ["demo-conv-leo-tg-1128-am"]
    user = get_user_model().objects.get(username=name)
    assert not user.is_staff and not user.has_usable_password()


def test_create_again_keeps_the_token_and_prints_no_key():
    PersonFactory(slug="leo")
    PersonFactory(slug="maya")
    first = _token_scope("runtime", "--create", "--scope", "agent", "--person", "leo")
    again = _token_scope("runtime", "--create", "--scope", "agent", "--person", "maya")

    key = Token.objects.get(user__username="runtime").key
    assert f"token {key}" in first and key not in again
    assert "runtime: an agent token bound to persons maya" in again
    assert Token.objects.filter(user__username="runtime").count() == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["runtime", "--create"], "--create needs --scope"),
        (["runtime", "--create", "--scope", "agent", "--person", "nobody"], "unknown person(s): nobody"),
        (["runtime", "--create", "--scope", "agent"], "at least one person or conversation"),
        (["ops", "--create", "--scope", "agent", "--person", "leo"], "ops is staff"),
    ],
)
def test_create_refuses_a_scope_it_cannot_give_and_leaves_no_user_behind(args, message):
    UserFactory(username="ops", is_staff=True)
    PersonFactory(slug="leo")

    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("token_scope", *args, stdout=io.StringIO())

    assert not get_user_model().objects.filter(username="runtime").exists()
    assert not Token.objects.exists()


def _conversation_line(external_id: str, content: str, *, person: str = "leo", **message) -> str:
    conversation = {"external_id": external_id, "platform": "telegram", "chat_id": external_id, "person": person}
    first = {"external_id": "m1", "role": "user", "content": content, "created_at": "2026-11-27T09:00:00+08:00"}
    return json.dumps({"conversation": conversation, "messages": [first | message]}, ensure_ascii=False)


def _import(path, command: str = "import_conversations") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command(command, str(path), stdout=out, stderr=err)
    except CommandError as exc:
        return exc.returncode, out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def test_hostile_lines_are_each_reported_by_number_and_every_good_line_is_stored(tmp_path):
    many_words = " ".join(f"w{index:x}" for index in range(160_000))  # ~1 MB: too long for one tsvector
    lines = [
        _conversation_line("c1", "first good line").encode(),
        _conversation_line("c2", "lone SURROGATE", person="maya").encode().replace(b"SURROGATE", b"\\ud800"),
        _conversation_line("c3", many_words).encode(),
        _conversation_line("c4", "café").encode().replace("é".encode(), b"\xe9"),
        _conversation_line("c5", "an ancient date", created_at="0001-01-01T00:00:00").encode(),
        _conversation_line("c6", "far future", created_at="2200-01-01T00:00:00").encode(),
        _conversation_line("c7", "deep", tool_payload="DEEP").encode().replace(b'"DEEP"', b"[" * 5000 + b"]" * 5000),
        _conversation_line("c8", "last good line").encode(),
    ]
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")

    status, out, err = _import(path)

    assert status == 1
    assert "stored 2 conversations, 2 messages" in out
    reported = {
        int(line.split(":")[0].removeprefix("line ")): line for line in err.splitlines() if line.startswith("line")
    }
    assert sorted(reported) == [2, 3, 4, 5, 6, 7]
    assert "lone surrogate" in reported[2]
    assert "messages[0].content is longer than 100000 characters" in reported[3]
    offset = lines[3].index(b"\xe9")
    assert f"not UTF-8 (invalid continuation byte at byte {offset + 1} of the line" in reported[4]
    assert "messages[0].created_at must be between 1900-01-01 and 2199-12-31" in reported[5]
    assert "2199-12-31" in reported[6]
    assert "nested deeper than 64 levels" in reported[7] and "tool_payload" in reported[7]
    assert set(Conversation.objects.values_list("external_id", flat=True)) == {"c1", "c8"}
    assert not Person.objects.filter(slug="maya").exists()


def test_a_line_the_database_refuses_is_reported_and_the_rest_of_its_batch_is_stored(tmp_path):
    # A rule only the database knows (a constraint added for this test) refuses one line of the batch.
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE messages ADD CONSTRAINT test_no_forbidden CHECK (content <> 'forbidden')")
    path = tmp_path / "batch.jsonl"
    path.write_text(
        "\n".join(_conversation_line(f"c{n}", "forbidden" if n == 2 else f"line {n}") for n in (1, 2, 3)) + "\n",
        encoding="utf-8",
    )

    status, out, err = _import(path)

    assert status == 1
    assert "line 2: refused by the database" in err and "test_no_forbidden" in err
    assert "3 conversations read" not in out and "stored 2 conversations, 2 messages" in out
    assert set(Conversation.objects.values_list("external_id", flat=True)) == {"c1", "c3"}


def test_a_known_message_id_with_other_content_is_a_conflict_and_nothing_of_its_line_is_stored(tmp_path):
    path = tmp_path / "conflict.jsonl"
    path.write_text(
        "\n".join(
            [
                _conversation_line("c1", "the original words"),
                _conversation_line("c1", "other words under the same id", person="leo"),
                _conversation_line("c1", "the original words", person="maya"),
            ]
        )
        + "\n",
        encoding="utf-8",
    )

    status, out, err = _import(path)

    assert status == 1
    assert "line 2: conflict: messages[0].external_id 'm1' is already stored with other content" in err
    assert "line 3: conflict: conversation 'c1' is already stored with another account (person 'leo' ≠ 'maya')" in err
    assert list(Message.objects.values_list("content", flat=True)) == ["the original words"]
    assert not Person.objects.filter(slug="maya").exists()
    status, out, err = _import(path)  # against what is stored now: the same two conflicts, nothing new
    assert status == 1 and "stored 0 conversations, 0 messages" in out and err.count("conflict") == 2
