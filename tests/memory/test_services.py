from __future__ import annotations

import datetime as dt
import importlib
import io
import json

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anima.core.models import BlockTag, Entity, MemoryStatus
from conversations.models import Person
from memory.imports import memories_import
from memory.models import ContentBlock, DiaryEntry, SemanticMemory
from memory.selectors import semantic_memories_held
from memory.services import (
    MemoryPart,
    diary_block_create,
    memory_correct,
    memory_create,
    memory_deprecate,
    memory_expire,
    memory_merge,
    memory_remember,
    memory_restore,
    memory_sources_add,
    memory_split,
    memory_update,
)
from tests.factories import ConversationFactory, DiaryEntryFactory, PersonFactory, SemanticMemoryFactory


def _line(external_id: str, memory_type: str, content: str, **extra) -> str:
    row = {
        "external_id": external_id,
        "memory_type": memory_type,
        "content": content,
        "person": "leo",
        "created_at": "2026-11-20T23:30:00+08:00",
        "tags": ["family"],
        "pinned": False,
        **extra,
    }
    return json.dumps(row, ensure_ascii=False)


def test_semantic_types_become_semantic_memories_and_the_rest_diary_blocks():
    report = memories_import(
        lines=[
            _line("m1", "world", "Leo 住在杭州", pinned=True),
            _line("m2", "limbic", "我感到一种安静的欣慰"),
            _line("m3", "narrative", "那一周我学会了耐心"),
            _line("m4", "dream", "我梦见一座漂浮的图书馆"),
        ]
    )
    assert report.ok and report.created == {"semantic": 1, "limbic": 1, "narrative": 1, "dream": 1}
    memory = SemanticMemory.objects.get(external_id="m1")
    assert (memory.memory_type, memory.status, memory.pinned, memory.person.slug) == ("world", "active", True, "leo")
    assert memory.body["tags"] == ["family"]
    # 23:30 in Shanghai is still the 20th there, whatever UTC says.
    diary = DiaryEntry.objects.get()
    assert str(diary.source_day) == "2026-11-20"
    assert set(ContentBlock.objects.filter(parent=diary).values_list("tag", flat=True)) == set(BlockTag.values)
    assert "杭州" in memory.fts_segmented.split()


def test_memory_import_is_idempotent():
    lines = [_line("m1", "preference", "Leo 喜欢徒步"), _line("m2", "limbic", "我感到担心")]
    memories_import(lines=lines)
    again = memories_import(lines=lines)
    assert again.ok and again.created == {}
    assert Entity.objects.exclude(primary_component="diary_entry").count() == 2


def test_bad_memory_lines_are_reported_and_good_ones_kept():
    report = memories_import(
        lines=[
            _line("ok", "world", "fine"),
            _line("bad-type", "gossip", "x"),
            _line("bad-tags", "world", "x", tags="family"),
            _line("bad-pin", "world", "x", pinned="yes"),
            json.dumps({"external_id": "no-content", "memory_type": "world"}),
            _line("d1", "dream", "first dream"),
            _line("d2", "dream", "second dream the same day"),
        ]
    )
    errors = dict(report.errors)
    assert sorted(errors) == [2, 3, 4, 5, 7]
    assert "memory_type" in errors[2] and "tags" in errors[3] and "pinned" in errors[4]
    assert "content is required" in errors[5]
    assert "dream for 2026-11-20 is already stored" in errors[7]
    assert set(Entity.objects.exclude(primary_component="diary_entry").values_list("external_id", flat=True)) == {
        "ok",
        "d1",
    }


def test_a_known_external_id_with_other_content_is_a_conflict_and_creates_nothing():
    memories_import(lines=[_line("m1", "world", "Leo 住在杭州")])

    report = memories_import(
        lines=[
            _line("m1", "world", "Leo 住在杭州"),  # the same memory again: idempotent
            _line("m1", "world", "Leo 住在上海", person="maya"),
            _line("m2", "world", "Maya 喜欢茶", person="maya"),
            _line("m2", "opinion", "Maya 喜欢茶", person="maya"),
        ]
    )

    assert [number for number, _ in report.errors] == [2, 4]
    assert "conflict: external_id 'm1' is already stored with another person, content" in report.errors[0][1]
    assert "another memory_type" in report.errors[1][1]
    assert report.created == {"semantic": 1} and report.imported == 2
    assert list(SemanticMemory.objects.order_by("id").values_list("external_id", "content")) == [
        ("m1", "Leo 住在杭州"),
        ("m2", "Maya 喜欢茶"),
    ]


def test_a_conflicting_line_alone_creates_no_person(tmp_path):
    memories_import(lines=[_line("m1", "world", "Leo 住在杭州")])
    path = tmp_path / "memories.jsonl"
    path.write_text(_line("m1", "world", "something else", person="maya") + "\n", encoding="utf-8")

    with pytest.raises(CommandError) as caught:
        call_command("import_memories", str(path), stdout=io.StringIO(), stderr=io.StringIO())

    assert caught.value.returncode == 1
    assert not Person.objects.filter(slug="maya").exists()


def test_memory_merge_writes_the_successor_and_expires_every_source_with_the_link():
    leo = PersonFactory(slug="leo")
    older = SemanticMemoryFactory(
        person=leo, content="Leo 住在杭州", pinned=True, body={"observed_at": "2026-10-01", "tags": ["home"]}
    )
    newer = SemanticMemoryFactory(person=leo, content="Leo 现在住在杭州", body={"observed_at": "2026-11-01"})

    merged = memory_merge(sources=[older, newer], content=" Leo 住在杭州 ", memory_type="world", external_id="m:1")

    assert (merged.content, merged.pinned, merged.person, merged.status) == ("Leo 住在杭州", True, leo, "active")
    assert merged.body["observed_at"] == "2026-10-01" and merged.body["tags"] == ["home"]
    assert merged.body["merged_from"] == [older.pk, newer.pk]
    for source in (older, newer):
        source.refresh_from_db()
        assert (source.status, source.superseded_by_id) == (MemoryStatus.EXPIRED, merged.pk)
        assert source.expired_reason == f"merged into #{merged.pk}"


def test_a_merge_and_a_fact_kept_over_its_restatements_both_keep_every_conversation_their_sources_were_said_in():
    leo = PersonFactory(slug="leo")
    first, second, third = (ConversationFactory(person=leo) for _ in range(3))
    one = SemanticMemoryFactory(person=leo, content="Leo 住在杭州", source_conversation=first)
    two = SemanticMemoryFactory(
        person=leo, content="Leo 现在住在杭州", source_conversation=second, body={"source_conversations": [third.pk]}
    )
    merged = memory_merge(sources=[one, two], content="Leo 住在杭州", memory_type="world", external_id="m:1")
    assert merged.body["source_conversations"] == sorted([first.pk, second.pk, third.pk])

    kept = SemanticMemoryFactory(
        person=leo, content="Leo 是后端负责人", source_conversation=first, body={"tags": ["x"]}
    )
    edited_at = kept.updated_at
    copy = SemanticMemoryFactory(person=leo, content=kept.content, body={"source_conversations": [first.pk, second.pk]})
    for _ in range(2):  # the second time adds nothing
        kept = memory_sources_add(memory=kept, sources=[copy])
    kept.refresh_from_db()
    # Its own source conversation is not listed again; what it said and when it was edited stay.
    assert kept.body == {"tags": ["x"], "source_conversations": [second.pk]}
    assert (kept.content, kept.updated_at) == ("Leo 是后端负责人", edited_at)


def test_memory_split_expires_the_memory_superseded_by_its_first_part():
    memory = SemanticMemoryFactory(content="Leo 住在杭州。Leo 喜欢徒步。")

    parts = memory_split(
        memory=memory,
        parts=[
            MemoryPart(memory_type="world", content="Leo 住在杭州", external_id="s:1"),
            MemoryPart(memory_type="preference", content="Leo 喜欢徒步", external_id="s:2"),
        ],
    )

    memory.refresh_from_db()
    assert [p.memory_type for p in parts] == ["world", "preference"]
    assert (memory.status, memory.superseded_by_id) == (MemoryStatus.EXPIRED, parts[0].pk)
    assert memory.expired_reason == f"split into #{parts[0].pk}, #{parts[1].pk}"


@pytest.mark.parametrize(
    "write",
    [
        lambda m: memory_expire(memory=m, reason="again"),
        lambda m: memory_split(memory=m, parts=[MemoryPart(memory_type="world", content="x", external_id="s")]),
        lambda m: memory_merge(sources=[m, SemanticMemoryFactory()], content="x", memory_type="world", external_id="m"),
    ],
)
def test_only_an_active_memory_can_be_retired(write):
    memory = SemanticMemoryFactory(status=MemoryStatus.EXPIRED)

    with pytest.raises(ValidationError, match="not active"):
        write(memory)

    assert not SemanticMemory.objects.filter(external_id__in=["s", "m"]).exists()
    memory.refresh_from_db()
    assert (memory.status, memory.expired_reason) == (MemoryStatus.EXPIRED, "")


def test_memory_writes_refuse_what_cannot_be_stored():
    memory = SemanticMemoryFactory()

    with pytest.raises(ValidationError, match="content must not be empty"):
        memory_create(content="  ", memory_type="world")
    with pytest.raises(ValidationError, match="memory_type must be one of"):
        memory_update(memory=memory, changes={"memory_type": "gossip"})
    with pytest.raises(ValidationError, match="cannot supersede itself"):
        memory_expire(memory=memory, reason="x", superseded_by=memory)
    with pytest.raises(ValidationError, match="two or more"):
        memory_merge(sources=[memory, memory], content="x", memory_type="world", external_id="m")


def test_memory_update_changes_only_what_it_is_given():
    memory = SemanticMemoryFactory(content="Leo 喜欢 Go", memory_type="preference", body={"occurred_at": "2026-11-01"})

    memory_update(memory=memory, changes={"occurred_at": None})
    memory.refresh_from_db()

    assert (memory.content, memory.memory_type, memory.body) == ("Leo 喜欢 Go", "preference", {"occurred_at": None})


def test_diary_blocks_hang_under_their_day_and_take_its_day():
    diary = DiaryEntryFactory(source_day=dt.date(2026, 11, 20))

    block = diary_block_create(diary=diary, tag=BlockTag.DREAM, title=" 梦 ", content="我梦见一座漂浮的图书馆")

    assert (block.parent_id, block.source_day, block.title, block.tag) == (diary.pk, diary.source_day, "梦", "dream")
    with pytest.raises(ValidationError, match="not a diary entry"):
        diary_block_create(diary=block, tag=BlockTag.DREAM, content="x")
    with pytest.raises(IntegrityError):  # the database keeps one dream a day
        diary_block_create(diary=diary, tag=BlockTag.DREAM, content="又一个梦")


def test_every_retirement_ends_the_belief_and_a_restore_reopens_it():
    memory = memory_create(content="Leo lives in Hangzhou", memory_type="world", body={"occurred_at": "2025-03-01"})
    assert timezone.localtime(memory.valid_from).isoformat() == "2025-03-01T00:00:00+08:00"
    memory_deprecate(memory=memory, reason="wrong")
    assert memory.valid_to is not None and memory.expired_reason == "wrong"
    memory_restore(memory=memory)
    assert (memory.valid_to, memory.expired_reason) == (None, "")
    fuzzy = memory_create(content="Leo moved in spring", memory_type="world", body={"occurred_at": "spring 2019"})
    assert fuzzy.valid_from == fuzzy.created_at  # a fuzzy date is no moment: the first sighting stands in


def test_the_migration_backfills_belief_history_from_the_body():
    backfill = importlib.import_module("anima.migrations.0007_belief_history").belief_history_backfill
    dated = SemanticMemoryFactory(body={"occurred_at": "2025-03-01"})
    seen = SemanticMemoryFactory(body={"observed_at": "2026-01-02T03:04:05+00:00", "occurred_at": "spring"})
    retired = SemanticMemoryFactory(status=MemoryStatus.EXPIRED)
    Entity.objects.update(valid_from=None, valid_to=None)
    with connection.schema_editor() as editor:
        backfill(apps, editor)
    dated, seen, retired = (Entity.objects.get(pk=m.pk) for m in (dated, seen, retired))
    assert timezone.localtime(dated.valid_from).isoformat() == "2025-03-01T00:00:00+08:00"
    assert seen.valid_from.isoformat() == "2026-01-02T03:04:05+00:00"
    assert (retired.valid_from, retired.valid_to) == (retired.created_at, retired.updated_at)
    assert dated.valid_to is None


def test_a_supersede_ends_the_old_belief_when_the_new_one_began():
    old = memory_create(content="Leo lives in Hangzhou", memory_type="world", body={"occurred_at": "2026-03-01"})
    new = memory_create(content="Leo lives in Suzhou", memory_type="world", body={"occurred_at": "2026-11-20"})
    memory_expire(memory=old, reason="moved", superseded_by=new)
    assert old.valid_to == new.valid_from
    # A successor dated before the old belief began ends it at once, never before it began.
    older = memory_create(content="Leo's sign is Leo", memory_type="world", body={"occurred_at": "2026-05-01"})
    backdated = memory_create(content="Leo's sign is Virgo", memory_type="world", body={"occurred_at": "2016-09-01"})
    memory_expire(memory=older, reason="corrected", superseded_by=backdated)
    assert older.valid_to == older.valid_from


@pytest.mark.parametrize(
    ("first", "again"),
    [
        ("Maya's cat is called Pixel", "Maya’s cat is called Pixel."),
        ("Leo 的猫叫豆豆", "Leo的猫叫豆豆。"),
        ("Leo 喜欢 Python", "Ｌｅｏ喜欢 Ｐｙｔｈｏｎ！"),
        ("田中さんは 東京に住んでいる", "田中さんは東京に住んでいる。"),
    ],
)
def test_remember_finds_the_fact_written_with_other_quotes_spacing_width_or_a_full_stop(first, again):
    person = PersonFactory()

    stored, created = memory_remember(content=first, person=person)
    found, created_again = memory_remember(content=again, person=person)

    assert (found.pk, found.content, created, created_again) == (stored.pk, first, True, False)


@pytest.mark.parametrize(
    ("first", "other"),
    [
        ("Leo 的猫叫豆豆", "Leo 的狗叫豆豆"),
        ("Leo is 30", "Leo is 31"),
        ("...", "!!!"),
        ("Leo likes tea", "Leo likes tea, not coffee"),
    ],
)
def test_remember_keeps_facts_that_differ_apart(first, other):
    person = PersonFactory()

    assert memory_remember(content=first, person=person)[0].pk != memory_remember(content=other, person=person)[0].pk


def test_remember_tells_long_facts_apart_by_their_ends_and_finds_each_again():
    person = PersonFactory()
    # One unspaced stretch each, the same for their first 5,000 characters: what a search key reads.
    first, other = "哈" * 5000 + "嘿", "哈" * 5000 + "呵"

    stored = memory_remember(content=first, person=person)[0]
    apart = memory_remember(content=other, person=person)[0]

    assert stored.pk != apart.pk
    assert memory_remember(content=f" {other}。", person=person) == (apart, False)
    assert memory_remember(content=first, person=person) == (stored, False)


_WORDS = st.lists(
    st.one_of(
        st.text(st.characters(min_codepoint=ord("a"), max_codepoint=ord("z")), min_size=1, max_size=8),
        st.text(st.characters(min_codepoint=0x4E00, max_codepoint=0x4E80), min_size=1, max_size=4),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=_WORDS, closing=st.sampled_from(["", ".", "。", "!", "！", " "]), upper=st.booleans())
def test_a_fact_is_one_memory_however_it_is_spaced_cased_or_closed(words, closing, upper):
    person = PersonFactory()
    spaced = " ".join(words)
    # Latin words keep a space between them; unspaced script may or may not have one beside it.
    tight = "".join(
        word if index == 0 or not (word.isascii() and words[index - 1].isascii()) else f" {word}"
        for index, word in enumerate(words)
    )

    first, _ = memory_remember(content=spaced, person=person)
    again, created = memory_remember(content=(tight.upper() if upper else tight) + closing, person=person)

    assert (again.pk, created) == (first.pk, False)


def test_a_correction_replaces_what_was_held_since_the_fact_was_dated_and_keeps_the_old_text_as_a_version():
    leo = PersonFactory(slug="leo")
    wrong = memory_create(
        content="Leo's daughter's zodiac sign is Leo",
        memory_type="world",
        person=leo,
        body={"occurred_at": "2026-11-10"},
        created_at=timezone.make_aware(dt.datetime(2026, 11, 10, 9)),
    )

    corrected = memory_correct(memory=wrong, content="Leo's daughter's zodiac sign is Virgo", reason="misheard")

    wrong.refresh_from_db()
    assert (wrong.status, wrong.superseded_by_id, wrong.content) == (
        "expired",
        corrected.pk,
        "Leo's daughter's zodiac sign is Leo",
    )
    assert wrong.expired_reason == f"corrected to #{corrected.pk}: misheard"
    # A correction fixes what was wrong, not a change in the world: as of any day since, the corrected text.
    held = semantic_memories_held(as_of=dt.date(2026, 11, 20)).filter(person=leo)
    assert [m.content for m in held] == ["Leo's daughter's zodiac sign is Virgo"]
    assert corrected.body["occurred_at"] == "2026-11-10" and corrected.person == leo
    with pytest.raises(ValidationError, match="status"):
        memory_correct(memory=wrong, content="again")
