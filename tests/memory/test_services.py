from __future__ import annotations

import json

from anima.core.models import BlockTag, Entity
from memory.models import ContentBlock, DiaryEntry, SemanticMemory
from memory.services import memories_import


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
