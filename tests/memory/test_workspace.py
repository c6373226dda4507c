"""Workspace interop: export → import into an empty database → export is byte-identical; hand-written import."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pgtrigger
import pytest
from django.core.management import CommandError, call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anima.core.models import Entity, MemoryStatus, MemoryType
from conversations.models import HistoryEntry, Identity, Person
from memory.models import SelfBlock, SelfLayerBlock, SemanticMemory
from memory.services import memory_remember
from memory.workspace import WorkspaceError, workspace_export, workspace_import
from tests.factories import HistoryEntryFactory, IdentityFactory, PersonFactory, SelfLayerBlockFactory

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
    first = workspace_import(root=FIXTURE)
    counts = (SemanticMemory.objects.count(), HistoryEntry.objects.count(), Identity.objects.count())

    again = workspace_import(root=FIXTURE)

    assert first["memories"] > 0 and first["history"] > 0 and first["identities"] > 0
    assert sum(again.values()) == 0
    assert (SemanticMemory.objects.count(), HistoryEntry.objects.count(), Identity.objects.count()) == counts


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
            '{"timestamp": "2026-10-01T10:00:00Z", "content": "x", "mood": 1}\n',
            "memory/history.jsonl:1: unknown key(s) mood",
        ),
        ("memory/MEMORY.md", "# MEMORY\n\n## feelings\n- sad\n", "memory/MEMORY.md:3: unknown memory type 'feelings'"),
        ("memory/MEMORY.md", "# MEMORY\n\njust a paragraph\n", "memory/MEMORY.md:3: expected"),
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
        ("SOUL.md", "# SOUL\n\nstray text\n## self_model\nx\n", "SOUL.md:3: text before the first block heading"),
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
    (tmp_path / "bad" / "USER.md").write_text("## nope\n", encoding="utf-8")
    with pytest.raises(CommandError, match=r"USER\.md:1: unknown memory type"):
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
