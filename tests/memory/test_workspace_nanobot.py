"""Workspaces nanobot wrote and reads back: its history, identities, SOUL.md and global records."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.utils import timezone
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from anima.core.models import MemoryType
from conversations.models import HistoryEntry, Identity, Person
from conversations.selectors import history_search
from memory.forgetting_person import person_forget
from memory.models import SelfBlock, SelfLayerBlock, SemanticMemory
from memory.selectors import memory_recall
from memory.workspace import HISTORY_KEYS, workspace_export, workspace_import
from tests.factories import HistoryEntryFactory, IdentityFactory, PersonFactory, SelfLayerBlockFactory
from tests.memory.nanobot import NanobotWorkspace
from tests.memory.workspaces import ANY_TEXT, database_empty, workspace_files, workspace_populate

NANOBOT_CLOCK = dt.datetime(2026, 3, 1, 9, 30)  # nanobot writes naive local time
LEO_ACCOUNT_MAP = (
    'persons:\n  leo:\n    display_name: Leo\n    ids:\n      - channel: telegram\n        id: ["12345678"]\n'
)


def _minutes(n: int) -> dt.datetime:
    return NANOBOT_CLOCK + dt.timedelta(minutes=n)


def _timeline(person: Person | None) -> list[tuple[str, str, str]]:
    entries = HistoryEntry.objects.filter(person=person).order_by("timestamp", "id")
    return [(timezone.localtime(e.timestamp).strftime("%Y-%m-%d %H:%M"), e.channel, e.content) for e in entries]


def test_a_workspace_nanobot_wrote_imports_with_its_history_identities_and_facts(tmp_path):
    maya = PersonFactory(slug="maya")
    IdentityFactory(person=maya, channel="telegram", external_id="87654321")
    nanobot = NanobotWorkspace(tmp_path / "nb")
    nanobot.write_soul("# Soul\n\nI am nanobot 🐈, a personal AI assistant.\n")
    nanobot.write_user("# User Profile\n\n## Preferences\n\n- Leo prefers short answers in the evening\n")
    nanobot.write_memory(
        "# Long-term Memory\n\n## User Information\n\n- Leo moved to Berlin in March 2026\n"
        "- Leo's daughter Xiaoyu was born in the year of the tiger\n"
    )
    nanobot.append_history("Leo said he moved to Berlin.", session_key="telegram:12345678", at=_minutes(0))
    nanobot.append_history("A summary without a session", at=_minutes(1))
    nanobot.append_history("Maya asked about trains to Lisbon.", session_key="telegram:87654321", at=_minutes(2))
    nanobot.append_history("Group chat summary", session_key="telegram:-1001234567890:topic:42", at=_minutes(3))
    nanobot.append_history(
        "[RAW] 2 messages\n[2026-03-01T09:35] USER: hi\n[2026-03-01T09:35] ASSISTANT [tools: memory_recall]: hello",
        session_key="cli:direct",
        at=_minutes(5),
    )
    nanobot.append_history("Leo plans a trip to Rome in May.", session_key="telegram:12345678", at=_minutes(0))
    # The operator says whose Telegram account 12345678 is; maya's is already known to Anima.
    (tmp_path / "nb" / "memory" / "identity_map.yaml").write_text(LEO_ACCOUNT_MAP, encoding="utf-8")
    err = io.StringIO()

    call_command("import_workspace", str(tmp_path / "nb"), stdout=io.StringIO(), stderr=err)  # exit status 0

    leo = Person.objects.get(slug="leo")
    assert Identity.objects.get(channel="telegram", external_id="12345678").person == leo
    # Each person's timeline in nanobot's cursor order (the two Leo entries share a minute).
    assert _timeline(leo) == [
        ("2026-03-01 09:30", "telegram", "Leo said he moved to Berlin."),
        ("2026-03-01 09:30", "telegram", "Leo plans a trip to Rome in May."),
    ]
    assert _timeline(maya) == [("2026-03-01 09:32", "telegram", "Maya asked about trains to Lisbon.")]
    # The global timeline keeps every record where nanobot put it; the persons' have their copies.
    assert [(channel, content[:18]) for _, channel, content in _timeline(None)] == [
        ("telegram", "Leo said he moved "),
        ("telegram", "Leo plans a trip t"),
        ("", "A summary without "),
        ("telegram", "Maya asked about t"),
        ("telegram", "Group chat summary"),
        ("cli", "[RAW] 2 messages\n["),
    ]
    recalled = memory_recall(query="Berlin", memory_types=["semantic"])
    assert recalled[0]["snippet"] == "Leo moved to Berlin in March 2026"
    assert memory_recall(query="tiger", memory_types=["semantic"])[0]["snippet"].startswith("Leo's daughter")
    assert SemanticMemory.objects.get(content__startswith="Leo prefers").memory_type == MemoryType.PREFERENCE
    assert [entry.content for entry in history_search(text="Rome", person=leo)] == ["Leo plans a trip to Rome in May."]
    warnings = err.getvalue()
    assert "session telegram:-1001234567890 is not mapped to a person" in warnings
    assert "SOUL.md:3: text outside a self-layer block" in warnings  # nanobot's persona is not Anima's: kept as is
    assert sum(workspace_import(root=tmp_path / "nb").counts.values()) == 0


def test_a_legacy_nanobot_history_md_imports_as_nanobot_migrates_it(tmp_path):
    nanobot = NanobotWorkspace(tmp_path / "nb")
    nanobot.append_legacy_history(
        "User asked about the trip to Rome; decided on May.", at=dt.datetime(2026, 1, 15, 14, 30)
    )
    nanobot.append_legacy_history(
        "2 messages\n[2026-01-16T09:01] USER: hi\n[2026-01-16T09:02] ASSISTANT [tools: search]: hello",
        at=dt.datetime(2026, 1, 16, 9, 2),
        raw=True,
    )
    legacy = tmp_path / "nb" / "memory" / "HISTORY.md"
    with legacy.open("a", encoding="utf-8") as handle:  # hand-written paragraphs nanobot also migrates
        handle.write("a line without timestamp\ncontinued\n\n[2026-01-17] day-only stamp entry\n")
    written = timezone.make_aware(dt.datetime(2026, 1, 1, 8, 0)).timestamp()
    os.utime(legacy, (written, written))

    workspace_import(root=tmp_path / "nb")

    # What nanobot 0.3.5's own migration makes of this file (its fallback time is the file's mtime).
    assert _timeline(None) == [
        ("2026-01-01 08:00", "", "a line without timestamp\ncontinued"),
        ("2026-01-01 08:00", "", "[2026-01-17] day-only stamp entry"),
        ("2026-01-15 14:30", "", "User asked about the trip to Rome; decided on May."),
        (
            "2026-01-16 09:02",
            "",
            "[RAW] 2 messages\n[2026-01-16T09:01] USER: hi\n[2026-01-16T09:02] ASSISTANT [tools: search]: hello",
        ),
    ]


def test_an_export_is_a_workspace_nanobot_reads_back_and_appends_to(tmp_path):
    workspace_populate()
    at = dt.datetime(2026, 10, 3, tzinfo=dt.UTC)
    HistoryEntryFactory(person=None, channel="", content="一条没有频道的记录", timestamp=at)
    leo = Person.objects.get(slug="leo")
    HistoryEntryFactory(person=leo, channel="telegram", content="Leo 在 Telegram 上说的", timestamp=at)
    root = tmp_path / "ws"
    workspace_export(root=root)
    nanobot = NanobotWorkspace(root)

    lines = (root / "memory" / "history.jsonl").read_text(encoding="utf-8").splitlines()
    entries = nanobot.history_entries()

    assert len(entries) == len(lines) == HistoryEntry.objects.filter(person=None).count() == 2
    for entry in entries:
        assert list(entry)[:3] == ["cursor", "timestamp", "content"] and set(entry) <= set(HISTORY_KEYS)
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", entry["timestamp"])
    assert [entry["cursor"] for entry in entries] == [1, 2]
    assert entries[0] == {"cursor": 1, "timestamp": "2026-10-01 08:00", "content": "第一次部署", "session_key": "cli"}
    assert "session_key" not in entries[1]
    leo_lines = (root / "memory" / "persons" / "leo" / "history.jsonl").read_text(encoding="utf-8").splitlines()
    # A person's entry names its account (Leo's one Telegram account); one without a channel names none.
    assert [json.loads(line).get("session_key") for line in leo_lines] == [None, "telegram:12345678"]
    assert nanobot.next_cursor() == 3
    nanobot.append_history("Leo 说他下周去罗马", session_key="telegram:12345678", at=dt.datetime(2026, 10, 4, 20, 0))

    counts = workspace_import(root=root).counts

    # nanobot's new record: kept in the global timeline, and copied into Leo's.
    assert counts == {"history": 2}
    records = HistoryEntry.objects.filter(content="Leo 说他下周去罗马")
    assert sorted((e.person.slug if e.person else "", e.session_key) for e in records) == [
        ("", "telegram:12345678"),
        ("leo", "telegram:12345678"),
    ]


# --- nanobot files kept whole: what Anima cannot place goes back as it came ---------------------------

NANOBOT_TEMPLATES = Path(__file__).resolve().parent.parent / "fixtures" / "nanobot"


@pytest.mark.parametrize("template", ["SOUL.md", "legacy-SOUL.md"])
def test_nanobots_own_soul_md_comes_back_byte_identical(tmp_path, template):
    original = (NANOBOT_TEMPLATES / template).read_bytes()
    nanobot = NanobotWorkspace(tmp_path / "nb")
    nanobot.write_soul(original.decode("utf-8"))

    workspace_import(root=tmp_path / "nb")
    workspace_export(root=tmp_path / "out")

    assert (tmp_path / "out" / "SOUL.md").read_bytes() == original


def test_nanobots_soul_md_keeps_its_text_verbatim_beside_the_self_layer_anima_writes(tmp_path):
    original = (NANOBOT_TEMPLATES / "SOUL.md").read_bytes()
    NanobotWorkspace(tmp_path / "nb").write_soul(original.decode("utf-8"))
    workspace_import(root=tmp_path / "nb")
    SelfLayerBlockFactory(key=SelfBlock.SELF_MODEL, content="I remember the people I talk with.")

    workspace_export(root=tmp_path / "first")
    first = (tmp_path / "first" / "SOUL.md").read_bytes()
    database_empty()
    workspace_import(root=tmp_path / "first")
    workspace_export(root=tmp_path / "second")

    # nanobot's text first, as it was; then the blocks that hold text (no empty headings in nanobot's file).
    assert first == original + b"\n## self_model\n\nI remember the people I talk with.\n"
    assert (tmp_path / "second" / "SOUL.md").read_bytes() == first
    assert SelfLayerBlock.objects.get(key=SelfBlock.SELF_MODEL).content == "I remember the people I talk with."
    assert sum(workspace_import(root=tmp_path / "second").counts.values()) == 0


def _nanobot_history(root: Path) -> NanobotWorkspace:
    """nanobot's journal: two records of Leo's Telegram account (one in a forum topic), one without a session."""
    nanobot = NanobotWorkspace(root)
    nanobot.append_history("Leo said he moved to Berlin.", session_key="telegram:12345678", at=_minutes(0))
    nanobot.append_history("A summary without a session", at=_minutes(1))
    nanobot.append_history("Leo asked about Rome.", session_key="telegram:12345678:topic:7", at=_minutes(2))
    (root / "memory" / "identity_map.yaml").write_text(LEO_ACCOUNT_MAP, encoding="utf-8")
    return nanobot


def test_a_global_record_stays_where_nanobot_put_it_with_its_session_key_whole(tmp_path):
    _nanobot_history(tmp_path / "nb")
    original = (tmp_path / "nb" / "memory" / "history.jsonl").read_bytes()

    workspace_import(root=tmp_path / "nb")
    workspace_export(root=tmp_path / "out")

    assert (tmp_path / "out" / "memory" / "history.jsonl").read_bytes() == original
    # Leo's history has its copies, each naming his session as nanobot did.
    leo = [json.loads(line) for line in (tmp_path / "out" / "memory" / "persons" / "leo" / "history.jsonl").open()]
    assert [(row["content"], row["session_key"]) for row in leo] == [
        ("Leo said he moved to Berlin.", "telegram:12345678"),
        ("Leo asked about Rome.", "telegram:12345678:topic:7"),
    ]
    assert sum(workspace_import(root=tmp_path / "out").counts.values()) == 0  # its own export writes nothing
    database_empty()
    workspace_import(root=tmp_path / "out")
    workspace_export(root=tmp_path / "again")
    assert workspace_files(tmp_path / "again") == workspace_files(tmp_path / "out")


def test_a_global_record_of_someones_session_is_theirs_to_search_and_goes_when_they_are_forgotten(tmp_path):
    _nanobot_history(tmp_path / "nb")
    maya = PersonFactory(slug="maya")
    workspace_import(root=tmp_path / "nb")
    leo = Person.objects.get(slug="leo")

    seen_by_maya = [e.content for e in history_search(person=maya, with_global=True, private=True)]
    seen_by_leo = [e.content for e in history_search(person=leo, with_global=True, private=True)]

    assert seen_by_maya == ["A summary without a session"]
    assert "Leo said he moved to Berlin." in seen_by_leo
    person_forget(person=leo, messages=True)
    assert list(HistoryEntry.objects.values_list("content", flat=True)) == ["A summary without a session"]


_SOUL_LINE = st.one_of(
    ANY_TEXT,
    st.sampled_from(["# Soul", "## Core Principles", "## self_model", "- [pinned] x", "\\## direction", "", "\r"]),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_SOUL_LINE, min_size=1, max_size=8), newline=st.booleans())
def test_any_soul_md_text_before_the_first_block_comes_back_verbatim(tmp_path_factory, lines, newline):
    # What precedes the first block heading is what Anima cannot place.
    cut = next((i for i, line in enumerate(lines) if line == "## self_model"), len(lines))
    text = "\n".join(lines[:cut]) + ("\n" if newline else "")
    assume(text.strip("\n") not in ("", "# SOUL") and "\n## self_model" not in f"\n{text}")
    soul = (text if text.endswith("\n") else f"{text}\n") + "## self_model\n\nI listen.\n"
    database_empty()
    root = tmp_path_factory.mktemp("ws")
    NanobotWorkspace(root / "nb").write_soul(soul)

    workspace_import(root=root / "nb")
    workspace_export(root=root / "out")

    assert (root / "out" / "SOUL.md").read_bytes() == soul.encode()
