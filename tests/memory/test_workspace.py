"""Workspace interop: export → import into an empty database → export is byte-identical; hand-written import."""

from __future__ import annotations

import datetime as dt
import io
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anima.core.models import MemoryType
from conversations.models import HistoryEntry, Identity, Person
from memory.models import SelfBlock, SelfLayerBlock, SemanticMemory
from memory.services import memory_create, memory_remember
from memory.workspace import WorkspaceError, workspace_export, workspace_import
from tests.factories import HistoryEntryFactory, IdentityFactory, PersonFactory, SelfLayerBlockFactory
from tests.memory.workspaces import ANY_TEXT, database_empty, workspace_files, workspace_populate

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "workspace"


def test_export_import_export_is_byte_identical(tmp_path):
    workspace_populate()
    workspace_export(root=tmp_path / "first")
    exported = workspace_files(tmp_path / "first")
    database_empty()

    workspace_import(root=tmp_path / "first")
    workspace_export(root=tmp_path / "second")

    assert workspace_files(tmp_path / "second") == exported
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


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(contents=st.lists(ANY_TEXT.filter(lambda text: text.strip()), min_size=1, max_size=4), name=ANY_TEXT)
def test_round_trip_holds_for_arbitrary_text(tmp_path_factory, contents, name):
    database_empty()
    person = PersonFactory(slug="p", display_name=name)
    for content in contents:
        memory_remember(content=content, person=person)
    HistoryEntryFactory(person=person, content=contents[0], channel=name[:64])
    first, second = tmp_path_factory.mktemp("a"), tmp_path_factory.mktemp("b")
    workspace_export(root=first)
    database_empty()

    workspace_import(root=first)
    workspace_export(root=second)

    assert workspace_files(second) == workspace_files(first)


# --- What a round trip must keep (hostile content) ------------------------------------------------


def _round_trip(tmp_path: Path) -> tuple[dict[str, bytes], dict[str, bytes]]:
    workspace_export(root=tmp_path / "first")
    first = workspace_files(tmp_path / "first")
    database_empty()
    workspace_import(root=tmp_path / "first")
    workspace_export(root=tmp_path / "second")
    return first, workspace_files(tmp_path / "second")


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
    workspace_populate()
    workspace_export(root=tmp_path / "ws")
    before = workspace_files(tmp_path / "ws")
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

    assert workspace_files(tmp_path / "ws") == before
    assert [path.name for path in tmp_path.iterdir()] == ["ws"]  # no staging directory left behind


def test_an_export_over_an_older_one_drops_persons_no_longer_there_and_keeps_other_files(tmp_path):
    workspace_populate()
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
    database_empty()
    _build(world)
    expected = _snapshot()
    first, second = tmp_path_factory.mktemp("a") / "ws", tmp_path_factory.mktemp("b") / "ws"
    workspace_export(root=first)
    database_empty()

    result = workspace_import(root=first)
    workspace_export(root=second)

    assert workspace_files(second) == workspace_files(first)
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
