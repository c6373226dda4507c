"""The JSONL import plumbing: hostile input, concurrent imports, a fuzz of both importers, and the import log."""

from __future__ import annotations

import io
import json
import threading
from dataclasses import dataclass
from datetime import datetime

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anima.core.calendar import DATE_END, DATE_MIN
from anima.core.jsonl import ImportReport, LineError, jsonl_import
from anima.core.models import Component, Entity, ImportRun
from conversations.models import Conversation, Message, Person
from conversations.services import conversations_import
from memory.imports import memories_import
from memory.models import SemanticMemory

THINGS_LOCK = 0x7E57


def _concurrently(*imports) -> list[ImportReport]:
    """Run each import in its own thread (and database connection) at the same moment."""
    barrier = threading.Barrier(len(imports))
    reports: list[ImportReport | None] = [None] * len(imports)
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait()
            reports[index] = imports[index]()
        except BaseException as exc:  # noqa: BLE001 — surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(imports))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return reports


def _memory_lines(count: int) -> list[str]:
    kinds = ["world", "preference", "limbic", "narrative"]
    return [
        json.dumps(
            {
                "external_id": f"m{index}",
                "memory_type": kinds[index % 4],
                "content": f"memory number {index}",
                "person": f"p{index % 7}",
                "created_at": f"2026-11-{index % 28 + 1:02d}T10:00:00+08:00",
            }
        )
        for index in range(count)
    ]


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_memory_imports_of_one_file_both_succeed_and_store_each_memory_once():
    lines = _memory_lines(600)

    first, second = _concurrently(
        lambda: memories_import(lines=lines, batch_lines=50), lambda: memories_import(lines=lines, batch_lines=50)
    )

    assert first.ok and second.ok, (first.errors, second.errors)
    assert first.imported == second.imported == 600
    stored = Entity.objects.exclude(primary_component=Component.DIARY_ENTRY)
    assert stored.count() == 600
    # The counts are true: between them the two imports created each memory exactly once.
    created = sum(sum(report.created.values()) for report in (first, second))
    assert created == 600


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_conversation_imports_report_what_each_really_stored():
    lines = [
        json.dumps(
            {
                "conversation": {"external_id": f"c{index}", "platform": "cli"},
                "messages": [
                    {"external_id": f"m{n}", "role": "user", "content": f"hi {n}", "created_at": "2026-11-27T09:00:00Z"}
                    for n in range(4)
                ],
            }
        )
        for index in range(400)
    ]

    first, second = _concurrently(
        lambda: conversations_import(lines=lines, batch_lines=40),
        lambda: conversations_import(lines=lines, batch_lines=40),
    )

    assert first.ok and second.ok
    assert Conversation.objects.count() == 400 and Message.objects.count() == 1600
    assert first.created["conversations"] + second.created["conversations"] == 400
    assert first.created["messages"] + second.created["messages"] == 1600


# --- Fuzz: random lines never abort an import, never lose a good line, never store a bad row ---------

_DATES = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)).map(lambda d: d.isoformat())
_TEXT = st.text(max_size=40)
_JUNK = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT | _DATES,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_TEXT, children, max_size=3),
    max_leaves=8,
)


def _good_memory(index: int) -> dict:
    return {
        "external_id": f"good-\u2603-{index}",
        "memory_type": "world",
        "content": f"a good memory {index}",
        "created_at": "2026-11-20T10:00:00+08:00",
    }


_MEMORY_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "external_id": _TEXT | _JUNK,
        "memory_type": st.sampled_from(["world", "limbic", "narrative", "dream", "gossip"]) | _JUNK,
        "content": _TEXT | _JUNK,
        "person": st.sampled_from(["leo", "Not A Slug", ""]) | _JUNK,
        "created_at": _DATES | _JUNK,
        "tags": st.lists(_TEXT, max_size=2) | _JUNK,
        "pinned": st.booleans() | _JUNK,
        "title": _TEXT | _JUNK,
        "body": st.dictionaries(_TEXT, _JUNK, max_size=2) | _JUNK,
    },
)
_RAW_LINE = (
    _JUNK.map(lambda value: json.dumps(value).encode())
    | st.binary(max_size=40)
    | _MEMORY_FIELDS.map(lambda obj: json.dumps(obj).encode())
    | _MEMORY_FIELDS.map(lambda obj: json.dumps(obj, ensure_ascii=False).encode("utf-8", "surrogatepass"))
)


def _in_range(moment: datetime) -> bool:
    return DATE_MIN <= moment.date() < DATE_END


def _readable_or_bad(line: bytes) -> bool:
    """A line the import must either store or report: anything but a blank one."""
    try:
        return bool(line.decode("utf-8").strip())
    except UnicodeDecodeError:
        return True


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bad=st.lists(_RAW_LINE, min_size=1, max_size=8), data=st.data())
def test_fuzzed_memory_lines_never_abort_the_import_lose_a_good_line_or_store_a_bad_row(bad, data):
    # Each example in a savepoint rolled back after it: a stored limbic line is append-only, no delete resets it.
    with transaction.atomic():
        good = [json.dumps(_good_memory(index)).encode() for index in range(3)]
        positions = data.draw(st.permutations(range(len(bad) + len(good))))
        lines: list[bytes] = [b""] * len(positions)
        for line, position in zip(bad + good, positions, strict=True):
            lines[position] = line

        report = memories_import(lines=lines, batch_lines=4)

        assert report.lines == len(lines)
        stored = Entity.objects.exclude(primary_component=Component.DIARY_ENTRY)
        assert {f"good-\u2603-{index}" for index in range(3)} <= set(stored.values_list("external_id", flat=True))
        for row in stored:
            assert row.content.strip() and row.external_id.strip()
            assert _in_range(row.created_at), row.created_at
        # Every line is either stored, a duplicate of a stored one, or reported by its number.
        reported = {number for number, _ in report.errors}
        assert len(reported) == len(report.errors)
        assert report.imported + len(reported) == sum(1 for line in lines if _readable_or_bad(line))
        transaction.set_rollback(True)


_MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "boss"]) | _JUNK, "created_at": _DATES | _JUNK},
    optional={"content": _TEXT | _JUNK, "external_id": _TEXT | _JUNK, "tool_payload": _JUNK, "name": _TEXT},
)
_CONVERSATION_LINE = st.fixed_dictionaries(
    {
        "conversation": st.fixed_dictionaries(
            {"external_id": _TEXT | _JUNK},
            optional={
                "platform": st.sampled_from(["cli", "telegram", "fax"]),
                "created_at": _DATES | _JUNK,
                "chat_id": _TEXT,
                "person": st.sampled_from(["leo", "maya", "Bad Slug"]),
            },
        )
        | _JUNK
    },
    optional={"messages": st.lists(_MESSAGE, max_size=3) | _JUNK},
).map(lambda obj: json.dumps(obj).encode())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bad=st.lists(_CONVERSATION_LINE | st.binary(max_size=30), min_size=1, max_size=6))
def test_fuzzed_conversation_lines_never_abort_the_import_lose_a_good_line_or_store_a_bad_row(bad):
    Message.objects.all().delete()
    Conversation.objects.all().delete()
    good = {
        "conversation": {"external_id": "good-\u2603", "platform": "cli"},
        "messages": [{"external_id": "g1", "role": "user", "content": "kept", "created_at": "2026-11-27T09:00:00Z"}],
    }
    lines = [*bad[:3], json.dumps(good).encode(), *bad[3:]]

    report = conversations_import(lines=lines, batch_lines=3)

    assert report.lines == len(lines)
    assert Message.objects.filter(conversation__external_id="good-\u2603", content="kept").exists()
    for message in Message.objects.all():
        assert _in_range(message.created_at) and message.created_at.tzinfo is not None
    for conversation in Conversation.objects.all():
        assert conversation.external_id.strip() and _in_range(conversation.created_at)
    assert all(1 <= number <= len(lines) for number, _ in report.errors)


# --- The import log ---------------------------------------------------------------------------------


@dataclass
class _Thing:
    line: int
    text: str


def _parse_thing(number: int, obj: dict) -> _Thing:
    if "text" not in obj:
        raise LineError("line.text is required")
    return _Thing(line=number, text=obj["text"])


def test_an_import_records_its_lines_stored_and_refused():
    stored: list[_Thing] = []

    def store(parsed: list[_Thing], report) -> None:
        stored.extend(parsed)
        report.imported += len(parsed)

    lines = ['{"text": "a"}', "", "[1]", '{"other": 1}', '{"text": "b"}']
    report = jsonl_import(kind="things", lines=lines, parse=_parse_thing, store=store, batch_lines=2, lock=THINGS_LOCK)
    assert [thing.text for thing in stored] == ["a", "b"]
    run = ImportRun.objects.get()
    assert (run.kind, run.lines, run.imported, run.bad) == ("things", 5, 2, 2)
    assert (report.lines, report.imported, len(report.errors)) == (5, 2, 2)
    assert run.started_at <= run.finished_at


def test_an_import_stopped_by_an_error_still_records_what_it_did():
    def store(parsed: list[_Thing], report) -> None:
        if any(thing.text == "boom" for thing in parsed):
            raise OSError("disk full")
        report.imported += len(parsed)

    lines = ['{"text": "a"}', '{"text": "boom"}', '{"text": "c"}']
    with pytest.raises(OSError, match="disk full"):
        jsonl_import(kind="things", lines=lines, parse=_parse_thing, store=store, batch_lines=1, lock=THINGS_LOCK)
    run = ImportRun.objects.get()
    assert (run.lines, run.imported, run.bad) == (2, 1, 0)


def test_re_importing_jsonl_after_a_forget_skips_what_was_forgotten_with_a_warning_unless_allowed(tmp_path):
    """Issue 35 item 8: the original import files must not undo an erasure or a forgotten memory."""
    conversations = tmp_path / "conversations.jsonl"
    conversations.write_text(
        json.dumps(
            {
                "conversation": {
                    "external_id": "maya-1",
                    "platform": "telegram",
                    "chat_id": "2002",
                    "person": "maya",
                },
                "messages": [
                    {
                        "external_id": "m1",
                        "role": "user",
                        "content": "I am Maya, a nurse",
                        "created_at": "2026-11-27T09:00:00+08:00",
                    }
                ],
            }
        )
        + "\n"
    )
    memories = tmp_path / "memories.jsonl"
    memories.write_text(
        "\n".join(
            json.dumps(line)
            for line in (
                {"external_id": "f1", "memory_type": "world", "person": "maya", "content": "Maya is a nurse"},
                {"external_id": "f2", "memory_type": "world", "content": "The garden gate sticks"},
                {"external_id": "f3", "memory_type": "world", "content": "The well is deep"},
            )
        )
        + "\n"
    )

    def run(command: str, path, *args: str) -> str:
        err = io.StringIO()
        call_command(command, str(path), "--quiet", *args, stdout=io.StringIO(), stderr=err)  # exit status 0
        return err.getvalue()

    run("import_conversations", conversations)
    run("import_memories", memories)
    call_command("forget", "--person", "maya", "--messages", "--yes", stdout=io.StringIO())
    gate = SemanticMemory.objects.get(content="The garden gate sticks")
    call_command("forget", "--memory", str(gate.pk), "--yes", stdout=io.StringIO())

    assert "line 1: warning: person maya, account telegram:2002 was forgotten; line not imported" in run(
        "import_conversations", conversations
    )
    warnings = run("import_memories", memories)
    assert "line 1: warning: memory 'Maya is a nurse', person maya was forgotten; line not imported" in warnings
    assert "line 2: warning: memory 'The garden gate sticks' was forgotten; line not imported" in warnings
    assert not Person.objects.filter(slug="maya").exists()
    assert not Conversation.objects.filter(external_id="maya-1").exists()
    assert set(SemanticMemory.objects.values_list("content", flat=True)) == {"The well is deep"}

    assert "imported anyway (--allow-forgotten)" in run("import_conversations", conversations, "--allow-forgotten")
    run("import_memories", memories, "--allow-forgotten")
    assert Conversation.objects.filter(external_id="maya-1", person__slug="maya").exists()
    assert SemanticMemory.objects.filter(content="Maya is a nurse", person__slug="maya").exists()
    assert SemanticMemory.objects.filter(content="The garden gate sticks").exists()
