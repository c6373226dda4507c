"""Workspace interop: export → import into an empty database → export is byte-identical; hand-written import."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import re
import shutil
from pathlib import Path

import pgtrigger
import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from anima.core.models import Entity, MemoryStatus, MemoryType
from conversations.models import HistoryEntry, Identity, Person
from conversations.selectors import history_search
from memory.forgetting import person_forget
from memory.models import SelfBlock, SelfLayerBlock, SemanticMemory
from memory.selectors import memory_recall
from memory.services import memory_create, memory_remember
from memory.workspace import HISTORY_KEYS, WorkspaceError, workspace_export, workspace_import
from tests.factories import HistoryEntryFactory, IdentityFactory, PersonFactory, SelfLayerBlockFactory
from tests.memory.nanobot import NanobotWorkspace

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "workspace"


def _files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def _empty_database() -> None:
    with pgtrigger.ignore("conversations.HistoryEntry:history_entries_append_only"):
        HistoryEntry.objects.all().delete()
    Entity.objects.all().delete()
    Identity.objects.all().delete()
    Person.objects.all().delete()
    SelfLayerBlock.objects.all().delete()


def _populate() -> None:
    leo = PersonFactory(slug="leo", display_name="Leo / 主人")
    IdentityFactory(person=leo, channel="telegram", external_id="12345678")
    IdentityFactory(person=leo, channel="wechat_work", external_id="a/b c")
    PersonFactory(slug="yes", display_name='quote " and \\ backslash')
    SelfLayerBlockFactory(key=SelfBlock.EXISTENCE_ANCHOR, content="我是 Anima", locked=True)
    SelfLayerBlockFactory(key=SelfBlock.AUTOBIOGRAPHY_SUMMARY, content="## Turning points\n- 搬到杭州")
    memory_remember(content="喜欢 Python", memory_type=MemoryType.PREFERENCE, person=leo)
    memory_remember(content="multi-line fact\n\nwith a gap\n  and indent", person=leo, pinned=True)
    memory_remember(content="在 Telegram 上用语音", person=leo, source_channel="wechat_work", source_id="a/b c")
    memory_remember(content="Short answers please", memory_type=MemoryType.PREFERENCE)
    memory_remember(content="杭州的冬天很冷")
    retired, _ = memory_remember(content="an old belief")
    SemanticMemory.objects.filter(pk=retired.pk).update(status=MemoryStatus.DEPRECATED)
    HistoryEntryFactory(
        person=None, channel="cli", content="第一次部署", timestamp=dt.datetime(2026, 10, 1, tzinfo=dt.UTC)
    )
    HistoryEntryFactory(
        person=leo, channel="", content='said "hi"\nthen left', timestamp=dt.datetime(2026, 10, 2, tzinfo=dt.UTC)
    )


def test_export_import_export_is_byte_identical(tmp_path):
    _populate()
    workspace_export(root=tmp_path / "first")
    exported = _files(tmp_path / "first")
    _empty_database()

    workspace_import(root=tmp_path / "first")
    workspace_export(root=tmp_path / "second")

    assert _files(tmp_path / "second") == exported
    assert "memory/persons/leo/sources/wechat%5Fwork_a%2Fb%20c.md" in exported
    assert b"an old belief" not in b"".join(exported.values())  # only active memories are exported
    leo_memory = exported["memory/persons/leo/MEMORY.md"].decode()
    assert "- [pinned] multi-line fact\n  \n  with a gap\n    and indent\n" in leo_memory


def test_import_is_idempotent(tmp_path):
    first = workspace_import(root=FIXTURE).counts
    counts = (SemanticMemory.objects.count(), HistoryEntry.objects.count(), Identity.objects.count())

    again = workspace_import(root=FIXTURE).counts

    assert first["memories"] > 0 and first["history"] > 0 and first["identities"] > 0
    assert sum(again.values()) == 0
    assert (SemanticMemory.objects.count(), HistoryEntry.objects.count(), Identity.objects.count()) == counts


def test_an_export_imported_into_the_database_it_came_from_writes_nothing(tmp_path):
    leo = PersonFactory(slug="leo")
    # What the nightly extraction writes: facts carrying the channel they were said on (telegram, web), which
    # a workspace file does not record; a global one too; a pinned one; the same fact twice.
    for content, person, channel, pinned in [
        ("Leo 住在杭州", leo, "telegram", False),
        ("Leo is allergic to peanuts", leo, "web", True),
        ("Leo likes tea", leo, "cli", False),
        ("Leo likes tea", leo, "", False),
        ("I prefer concise answers", None, "web", False),
    ]:
        memory_create(
            content=content, memory_type=MemoryType.WORLD, person=person, source_channel=channel, pinned=pinned
        )
    memory_remember(content="在 Telegram 上用语音", person=leo, source_channel="wechat", source_id="42")
    before = set(SemanticMemory.objects.values_list("id", "content", "pinned", "source_channel"))

    workspace_export(root=tmp_path / "ws")
    result = workspace_import(root=tmp_path / "ws")

    assert result.counts["memories"] == 0
    assert set(SemanticMemory.objects.values_list("id", "content", "pinned", "source_channel")) == before


def test_a_fact_the_person_holds_is_not_imported_again_however_it_is_cased_spaced_or_typed(tmp_path):
    leo = PersonFactory(slug="leo")
    held = memory_create(content="Leo lives in Hangzhou", memory_type=MemoryType.WORLD, person=leo)
    memory_create(content="Maya lives in Lisbon", memory_type=MemoryType.WORLD, person=PersonFactory(slug="maya"))
    person_dir = tmp_path / "ws" / "memory" / "persons" / "leo"
    person_dir.mkdir(parents=True)
    (person_dir / "MEMORY.md").write_text(
        "## experience\n\n- [pinned] leo lives in  HANGZHOU.\n- Maya lives in Lisbon\n", encoding="utf-8"
    )

    result = workspace_import(root=tmp_path / "ws")

    # Leo holds the first (now pinned, as the file says); Maya's fact is not Leo's, so it is his new memory.
    assert result.counts["memories"] == 1
    held.refresh_from_db()
    assert held.pinned and held.memory_type == MemoryType.WORLD
    assert sorted(SemanticMemory.objects.filter(person=leo).values_list("content", flat=True)) == [
        "Leo lives in Hangzhou",
        "Maya lives in Lisbon",
    ]


def test_hand_written_workspace_imports_people_memories_history_and_soul():
    workspace_import(root=FIXTURE)

    leo = Person.objects.get(slug="leo")
    assert leo.display_name == "Leo / 主人"
    assert set(leo.identities.values_list("channel", "external_id")) == {
        ("telegram", "12345678"),
        ("telegram", "87654321"),
        ("cli", "direct"),
    }
    # An unquoted YAML number stays the account id as written.
    assert Identity.objects.get(channel="wechat", external_id="555").person.slug == "mia"
    pinned = SemanticMemory.objects.get(person=leo, content="不喜欢频繁汇报")
    assert pinned.pinned and pinned.memory_type == MemoryType.PREFERENCE
    assert SemanticMemory.objects.get(person=None, content="不喜欢频繁汇报").memory_type == MemoryType.PREFERENCE
    assert SemanticMemory.objects.get(content__startswith="The project").content == (
        "The project is called Anima.\nIt keeps long-term memory for a companion."
    )
    voice = SemanticMemory.objects.get(content="在 Telegram 上习惯用语音")
    assert (voice.person, voice.source_channel, voice.body["source_id"]) == (leo, "telegram", "12345678")
    assert SemanticMemory.objects.get(person__slug="mia").memory_type == MemoryType.WORLD
    assert list(HistoryEntry.objects.filter(person=leo).values_list("channel", flat=True)) == ["telegram", "telegram"]
    assert HistoryEntry.objects.filter(person=None, channel="cli").count() == 1
    summary = SelfLayerBlock.objects.get(key=SelfBlock.AUTOBIOGRAPHY_SUMMARY).content
    assert summary == "## Turning points\n- 第一次和 Leo 聊起杭州"
    assert SelfLayerBlock.objects.get(key=SelfBlock.EXISTENCE_ANCHOR).locked


def test_locked_block_is_kept_unless_forced(tmp_path):
    SelfLayerBlockFactory(key=SelfBlock.EXISTENCE_ANCHOR, content="the original anchor", locked=True)

    workspace_import(root=FIXTURE)
    assert SelfLayerBlock.objects.get(key=SelfBlock.EXISTENCE_ANCHOR).content == "the original anchor"

    workspace_import(root=FIXTURE, force=True)
    assert SelfLayerBlock.objects.get(key=SelfBlock.EXISTENCE_ANCHOR).content.startswith("我是 Anima")


@pytest.mark.parametrize(
    ("relative", "text", "expected"),
    [
        (
            "memory/history.jsonl",
            '{"cursor": 1, "timestamp": "2026-10-01T10:00:00+08:00", "content": "ok"}\n{oops\n',
            "memory/history.jsonl:2: invalid JSON",
        ),
        (
            "memory/history.jsonl",
            '{"timestamp": "yesterday", "content": "x"}\n',
            "memory/history.jsonl:1: timestamp must be",
        ),
        (
            "memory/history.jsonl",
            '{"cursor": 1, "timestamp": "0001-01-01 00:00", "content": "x"}\n',
            "memory/history.jsonl:1: timestamp must be between 1900-01-01 and 2199-12-31",
        ),
        (
            "memory/persons/leo/history.jsonl",
            '{"cursor": 1, "timestamp": "2026-10-01 10:00", "content": "x", "session_key": "wechat:555"}\n',
            "memory/persons/leo/history.jsonl:1: session wechat:555 belongs to mia",
        ),
        (
            "memory/identity_map.yaml",
            "persons:\n  leo:\n    display_name: Leo\n    ids: [oops\n",
            "memory/identity_map.yaml:5: invalid YAML",
        ),
        (
            "memory/identity_map.yaml",
            "persons:\n  Leo Big:\n    display_name: Leo\n",
            "memory/identity_map.yaml:2: person 'Leo Big' must be a slug",
        ),
        (
            "memory/identity_map.yaml",
            "persons:\n  leo:\n    ids:\n      - channel: telegram\n",
            "memory/identity_map.yaml:4: an id entry of leo needs channel and id",
        ),
        (
            "memory/identity_map.yaml",
            "persons:\n  leo:\n    nickname: L\n",
            "memory/identity_map.yaml:3: unknown key 'nickname'",
        ),
    ],
)
def test_bad_files_are_refused_naming_file_and_line_and_nothing_is_written(tmp_path, relative, text, expected):
    root = tmp_path / "ws"
    shutil.copytree(FIXTURE, root)
    (root / relative).write_text(text, encoding="utf-8")

    with pytest.raises(WorkspaceError) as caught:
        workspace_import(root=root)

    assert any(error.startswith(expected) for error in caught.value.errors), caught.value.errors
    assert not Person.objects.exists() and not SemanticMemory.objects.exists()


def test_commands_export_and_import(tmp_path, capsys):
    call_command("import_workspace", str(FIXTURE))
    call_command("export_workspace", str(tmp_path / "out"))
    out = capsys.readouterr().out

    assert "imported" in out and "exported" in out
    assert (
        (tmp_path / "out" / "memory" / "identity_map.yaml").read_text(encoding="utf-8").startswith("persons:\n  leo:\n")
    )
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "memory").mkdir()
    (tmp_path / "bad" / "memory" / "history.jsonl").write_text("{oops\n", encoding="utf-8")
    with pytest.raises(CommandError, match=r"memory/history\.jsonl:1: invalid JSON"):
        call_command("import_workspace", str(tmp_path / "bad"))


_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=60)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(contents=st.lists(_TEXT.filter(lambda text: text.strip()), min_size=1, max_size=4), name=_TEXT)
def test_round_trip_holds_for_arbitrary_text(tmp_path_factory, contents, name):
    _empty_database()
    person = PersonFactory(slug="p", display_name=name)
    for content in contents:
        memory_remember(content=content, person=person)
    HistoryEntryFactory(person=person, content=contents[0], channel=name[:64])
    first, second = tmp_path_factory.mktemp("a"), tmp_path_factory.mktemp("b")
    workspace_export(root=first)
    _empty_database()

    workspace_import(root=first)
    workspace_export(root=second)

    assert _files(second) == _files(first)


# --- What a round trip must keep (hostile content) ------------------------------------------------


def _round_trip(tmp_path: Path) -> tuple[dict[str, bytes], dict[str, bytes]]:
    workspace_export(root=tmp_path / "first")
    first = _files(tmp_path / "first")
    _empty_database()
    workspace_import(root=tmp_path / "first")
    workspace_export(root=tmp_path / "second")
    return first, _files(tmp_path / "second")


def test_a_memory_that_starts_like_a_pin_marker_comes_back_unpinned(tmp_path):
    memory_create(content="[pinned] is how the console marks pins", memory_type=MemoryType.WORLD)
    memory_create(content="\\ a backslash first", memory_type=MemoryType.WORLD, pinned=True)

    first, second = _round_trip(tmp_path)

    assert second == first
    assert set(SemanticMemory.objects.values_list("content", "pinned")) == {
        ("[pinned] is how the console marks pins", False),
        ("\\ a backslash first", True),
    }


def test_memories_that_differ_only_in_case_and_spacing_both_come_back(tmp_path):
    for content in ("Leo likes tea", "LEO LIKES  TEA", "Leo likes tea"):
        memory_create(content=content, memory_type=MemoryType.PREFERENCE)

    first, second = _round_trip(tmp_path)

    assert second == first
    assert sorted(SemanticMemory.objects.values_list("content", flat=True)) == [
        "LEO LIKES  TEA",
        "Leo likes tea",
        "Leo likes tea",
    ]


def test_a_self_layer_block_holding_a_block_heading_line_round_trips(tmp_path):
    SelfLayerBlockFactory(key=SelfBlock.SELF_MODEL, content="I plan ahead.\n## direction\nnot a block\n\\ and a slash")

    first, second = _round_trip(tmp_path)

    assert second == first
    assert SelfLayerBlock.objects.get(key=SelfBlock.SELF_MODEL).content == (
        "I plan ahead.\n## direction\nnot a block\n\\ and a slash"
    )
    assert not SelfLayerBlock.objects.filter(key=SelfBlock.DIRECTION).exclude(content="").exists()


def test_a_chat_id_too_long_for_a_file_name_is_exported_and_imported(tmp_path):
    leo = PersonFactory(slug="leo", display_name="Leo")
    chat_id = "群" * 100  # 900 bytes once percent-encoded
    IdentityFactory(person=leo, channel="wechat", external_id=chat_id)
    memory_remember(content="在这个群里说粤语", person=leo, source_channel="wechat", source_id=chat_id)

    first, second = _round_trip(tmp_path)

    assert second == first
    (name,) = [name for name in first if "/sources/" in name]
    assert len(Path(name).name.encode()) <= 200
    memory = SemanticMemory.objects.get(content="在这个群里说粤语")
    assert (memory.source_channel, memory.body["source_id"]) == ("wechat", chat_id)


def test_a_failed_export_leaves_the_target_as_it_was(tmp_path, monkeypatch):
    _populate()
    workspace_export(root=tmp_path / "ws")
    before = _files(tmp_path / "ws")
    memory_remember(content="a new fact the failed export never wrote")
    written = []
    real_write = Path.write_bytes

    def write_until_the_disk_is_full(path: Path, data: bytes) -> int:
        if len(written) == 4:
            raise OSError(28, "No space left on device")
        written.append(path)
        return real_write(path, data)

    monkeypatch.setattr(Path, "write_bytes", write_until_the_disk_is_full)
    with pytest.raises(OSError, match="No space left"):
        workspace_export(root=tmp_path / "ws")

    assert _files(tmp_path / "ws") == before
    assert [path.name for path in tmp_path.iterdir()] == ["ws"]  # no staging directory left behind


def test_an_export_over_an_older_one_drops_persons_no_longer_there_and_keeps_other_files(tmp_path):
    _populate()
    workspace_export(root=tmp_path / "ws")
    (tmp_path / "ws" / "AGENTS.md").write_text("an agent's own file\n", encoding="utf-8")
    PersonFactory(slug="gone")
    workspace_export(root=tmp_path / "ws")
    Person.objects.filter(slug="gone").delete()

    workspace_export(root=tmp_path / "ws")

    assert not (tmp_path / "ws" / "memory" / "persons" / "gone").exists()
    assert (tmp_path / "ws" / "AGENTS.md").read_text(encoding="utf-8") == "an agent's own file\n"


_ANY_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
_TRICKY = st.sampled_from(
    [
        "[pinned] ",
        "\\",
        "## direction",
        "## world",
        "# title",
        "- item",
        "  ",
        "\n",
        "\r",
        "\u2028",
        "LEO  ",
        "%3A",
        ":",
    ]
)
_CONTENT = st.lists(_ANY_TEXT | _TRICKY, min_size=1, max_size=4).map("".join).filter(lambda text: text.strip())
_CHANNEL = st.sampled_from(["telegram", "wechat_work", "a:b", "%", "cli"]) | _ANY_TEXT.filter(bool).map(
    lambda t: t[:12]
)
_CHAT_ID = st.sampled_from(["12345678", "群" * 100, "a/b c", "-100123:topic:4"]) | _ANY_TEXT.filter(bool)


@st.composite
def _worlds(draw):
    persons = draw(st.lists(st.sampled_from(["leo", "maya", "p-1"]), unique=True, max_size=3))
    return {
        "persons": {
            slug: {
                "name": draw(_ANY_TEXT.filter(bool)),
                "ids": draw(st.lists(st.tuples(_CHANNEL, _CHAT_ID), max_size=2, unique=True)),
            }
            for slug in persons
        },
        "memories": draw(
            st.lists(
                st.tuples(
                    _CONTENT,
                    st.sampled_from(MemoryType.values),
                    st.sampled_from([None, *persons]),
                    st.booleans(),
                    st.none() | st.tuples(_CHANNEL, _CHAT_ID),
                ),
                max_size=6,
            )
        ),
        "blocks": draw(st.dictionaries(st.sampled_from(SelfBlock.values), _CONTENT, max_size=3)),
        "history": draw(
            st.lists(
                st.tuples(
                    _CONTENT,
                    st.sampled_from([None, *persons]),
                    _CHANNEL | st.just(""),
                    st.datetimes(min_value=dt.datetime(1900, 1, 2), max_value=dt.datetime(2199, 12, 30)),
                ),
                max_size=4,
            )
        ),
    }


def _build(world: dict) -> None:
    persons = {}
    taken: set[tuple[str, str]] = set()
    for slug, spec in world["persons"].items():
        persons[slug] = PersonFactory(slug=slug, display_name=spec["name"])
        for channel, chat_id in spec["ids"]:
            if (channel, chat_id) not in taken:
                taken.add((channel, chat_id))
                IdentityFactory(person=persons[slug], channel=channel, external_id=chat_id)
    for content, memory_type, owner, pinned, source in world["memories"]:
        person = persons.get(owner)
        source = source if person else None
        body = {"source_id": source[1]} if source else {}
        memory_create(
            content=content,
            memory_type=memory_type,
            person=person,
            pinned=pinned,
            source_channel=source[0] if source else "",
            body=body,
        )
    for key, content in world["blocks"].items():
        SelfLayerBlockFactory(key=key, content=content)
    for content, owner, channel, moment in world["history"]:
        HistoryEntryFactory(
            person=persons.get(owner), channel=channel, content=content, timestamp=moment.replace(tzinfo=dt.UTC)
        )


def _snapshot() -> dict:
    return {
        "memories": sorted(
            (
                m.content,
                m.memory_type,
                m.person.slug if m.person else "",
                m.pinned,
                m.source_channel,
                str(m.body.get("source_id", "")),
            )
            for m in SemanticMemory.objects.select_related("person")
        ),
        "blocks": {b.key: b.content.strip("\n") for b in SelfLayerBlock.objects.all() if b.content.strip()},
        "identities": sorted(Identity.objects.values_list("channel", "external_id", "person__slug")),
        "history": sorted(
            (h.content, h.person.slug if h.person else "", h.channel)
            for h in HistoryEntry.objects.select_related("person")
        ),
    }


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(world=_worlds())
def test_any_workspace_round_trips_byte_for_byte_and_keeps_what_it_says(tmp_path_factory, world):
    _empty_database()
    _build(world)
    expected = _snapshot()
    first, second = tmp_path_factory.mktemp("a") / "ws", tmp_path_factory.mktemp("b") / "ws"
    workspace_export(root=first)
    _empty_database()

    result = workspace_import(root=first)
    workspace_export(root=second)

    assert _files(second) == _files(first)
    assert result.warnings == []
    assert _snapshot() == expected
    assert sum(workspace_import(root=first).counts.values()) == 0  # importing again writes nothing


# --- Warnings: what Anima skips, it says, and the import goes on -------------------------------------


def test_what_anima_does_not_understand_is_a_warning_with_its_line_and_the_rest_imports(tmp_path):
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "SOUL.md").write_text("# Soul\n\nI am nanobot.\n\n## self_model\n\nI listen.\n", encoding="utf-8")
    (root / "memory" / "MEMORY.md").write_text(
        "# Long-term Memory\n\nThis file stores facts.\n\n## User Information\n\n- Leo lives in Berlin\n-\n\n"
        "## Preferences\n\n* Leo prefers tea\n\n---\n",
        encoding="utf-8",
    )
    (root / "memory" / "history.jsonl").write_text(
        '{"cursor": 1, "timestamp": "2026-10-01 10:00", "content": "moved", "mood": "happy", "tokens": 3}\n'
        '{"cursor": 2, "timestamp": "2026-10-01 10:05", "content": ""}\n',
        encoding="utf-8",
    )
    err = io.StringIO()

    call_command("import_workspace", str(root), stdout=io.StringIO(), stderr=err)  # exit status 0

    assert err.getvalue().splitlines() == [
        "warning: SOUL.md:3: text outside a self-layer block (## <existence_anchor|self_model|personality_baseline|"
        "direction|metacognition|autobiography_summary>) is kept as written and exported again; it is not part of "
        "the self layer",
        "warning: memory/MEMORY.md:3: not a list item ('- <memory>') or its indented continuation; not imported",
        "warning: memory/MEMORY.md:5: 'User Information' is not a memory type; its items are imported as world",
        "warning: memory/MEMORY.md:14: not a list item ('- <memory>') or its indented continuation; not imported",
        "warning: memory/MEMORY.md:8: empty list item; not imported",
        "warning: memory/history.jsonl:1: unknown field(s) mood, tokens not imported",
        "warning: memory/history.jsonl:2: empty content; not imported",
    ]
    assert set(SemanticMemory.objects.values_list("content", "memory_type")) == {
        ("Leo lives in Berlin", MemoryType.WORLD),
        ("Leo prefers tea", MemoryType.PREFERENCE),
    }
    assert list(HistoryEntry.objects.values_list("content", flat=True)) == ["moved"]
    assert SelfLayerBlock.objects.get(key=SelfBlock.SELF_MODEL).content == "I listen."


def test_links_leading_out_of_the_workspace_are_refused_with_a_warning_naming_them(tmp_path):
    outside = tmp_path / "elsewhere"
    (outside / "maya").mkdir(parents=True)
    (outside / "secret.md").write_text("- the neighbour's door code is 4711\n", encoding="utf-8")
    (outside / "maya" / "MEMORY.md").write_text("- Maya's locker code is 2046\n", encoding="utf-8")
    root = tmp_path / "ws"
    leo = root / "memory" / "persons" / "leo"
    (leo / "sources").mkdir(parents=True)
    (root / "notes").mkdir()
    (root / "notes" / "user.md").write_text("- Short answers please\n", encoding="utf-8")
    (root / "USER.md").symlink_to(Path("notes") / "user.md")  # a link within the workspace is followed
    (leo / "MEMORY.md").symlink_to(outside / "secret.md")
    (leo / "sources" / "telegram_1.md").symlink_to(Path("../../../../../elsewhere/secret.md"))
    (leo / "history.jsonl").write_text(
        '{"cursor": 1, "timestamp": "2026-10-01 10:00", "content": "Leo moved to Berlin"}\n', encoding="utf-8"
    )
    (root / "memory" / "persons" / "maya").symlink_to(outside / "maya", target_is_directory=True)
    err = io.StringIO()

    call_command("import_workspace", str(root), stdout=io.StringIO(), stderr=err)  # exit status 0

    secret, maya = (outside / "secret.md").resolve(), (outside / "maya").resolve()
    assert err.getvalue().splitlines() == [
        f"warning: memory/persons/leo/MEMORY.md:1: a link to {secret}, outside the workspace; not imported",
        f"warning: memory/persons/leo/sources/telegram_1.md:1: a link to {secret}, outside the workspace; not imported",
        f"warning: memory/persons/maya:1: a link to {maya}, outside the workspace; not imported",
    ]
    # The rest imported: the linked-in file from within, Leo's own history.
    assert list(SemanticMemory.objects.values_list("content", "person")) == [("Short answers please", None)]
    assert list(HistoryEntry.objects.values_list("content", "person__slug")) == [("Leo moved to Berlin", "leo")]
    assert not Person.objects.filter(slug="maya").exists()


# --- nanobot: workspaces its MemoryStore wrote import; exports are ones it reads ---------------------

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
    _populate()
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
    _empty_database()
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
    _empty_database()
    workspace_import(root=tmp_path / "out")
    workspace_export(root=tmp_path / "again")
    assert _files(tmp_path / "again") == _files(tmp_path / "out")


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
    _TEXT,
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
    _empty_database()
    root = tmp_path_factory.mktemp("ws")
    NanobotWorkspace(root / "nb").write_soul(soul)

    workspace_import(root=root / "nb")
    workspace_export(root=root / "out")

    assert (root / "out" / "SOUL.md").read_bytes() == soul.encode()
