from __future__ import annotations

import importlib
import logging
import os
import re
import subprocess
import sys
from datetime import timedelta

import jieba
import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.utils import timezone
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from anima.core import segmentation
from anima.core.models import BlockTag, Entity
from anima.core.segmentation import (
    segment_text,
    segmented_rows_progress,
    segmented_rows_refresh,
    text_in_script_of,
    text_simplified,
    text_traditional_forms,
)
from anima.core.text import CHAT_PHRASES, CHAT_WORDS, CJK_IDEOGRAPH, FUNCTION_WORDS
from conversations.models import Message
from memory.embedding import embed_backfill_run
from memory.selectors import memory_semantic_search
from tests.factories import ContentBlockFactory, ConversationFactory, MessageFactory, SemanticMemoryFactory


def test_chinese_is_split_into_words_and_english_passes_through():
    assert segment_text("我的邮箱是 leo@example.com").split()[:5] == ["我", "的", "邮箱", "是", "leo@example.com"]
    assert segment_text("I moved to Lisbon in 2019") == "I moved to Lisbon in 2019"


def test_the_characters_inside_chinese_words_follow_the_words_once_each():
    text = "我们养了一只橘猫，猫粮是进口的"
    words = [token.strip() for token in jieba.cut_for_search(text) if token.strip()]
    tokens = segment_text(text).split()
    # After every word, so that a quoted phrase still finds its words next to each other.
    assert tokens[: len(words)] == words
    characters = tokens[len(words) :]
    assert len(characters) == len(set(characters))
    # Not a word of the text again, nor a function character (们 of 我们): every query drops those.
    inside = {character for word in words if len(word) > 1 for character in word if character.isalpha()}
    assert set(characters) == inside - set(words) - FUNCTION_WORDS
    assert {"橘", "进", "口"} <= set(characters)


def test_a_one_character_word_finds_the_memory_whose_word_holds_it():
    cat = SemanticMemoryFactory(content="我养了一只橘猫，叫年糕")
    SemanticMemoryFactory(content="我开的是一辆新车", person=cat.person)
    assert [hit["id"] for hit in memory_semantic_search(query="猫", person=cat.person)] == [cat.pk]


def test_a_word_of_a_script_jieba_does_not_segment_is_one_word():
    # jieba cuts such a word at every letter outside ASCII: touch + é, п + р + и + в + е + т.
    assert segment_text("touché") == "touché"
    assert segment_text("I met José at the café") == "I met José at the café"
    assert segment_text("привет мир") == "привет мир"
    tokens = segment_text("我喜欢Pokémon和咖啡").split()
    assert "Pokémon" in tokens
    assert {"喜欢", "咖啡"} <= set(tokens)


def test_an_accented_or_cyrillic_word_finds_its_memory_and_not_one_sharing_a_letter_with_it():
    cafe = SemanticMemoryFactory(content="Maya's favourite café is on Rua Augusta")
    person = cafe.person
    SemanticMemoryFactory(content="Maya met José at the museum", person=person)
    kazan = SemanticMemoryFactory(content="Бабушка Маши живёт в Казани", person=person)
    SemanticMemoryFactory(content="Маша любит рисовать акварелью", person=person)

    assert [hit["id"] for hit in memory_semantic_search(query="café", person=person)] == [cafe.pk]
    assert [hit["id"] for hit in memory_semantic_search(query="Казани", person=person)] == [kazan.pk]


def test_either_spelling_finds_the_other():
    """Full-width Latin letters and digits are searched as the ASCII ones, traditional Chinese as simplified, whichever
    of them a fact and a question are written in."""
    assert text_simplified("我的貓叫什麼名字？") == "我的猫叫什么名字？"
    assert segment_text("我的貓最近不愛吃飯") == segment_text("我的猫最近不爱吃饭")
    phone, qq, cat, hike = texts = (
        "Maya 换了新手机，是ｉＰｈｏｎｅ １５",
        "Maya 的 QQ 号是 12345",
        "Maya 的猫叫年糕",
        "Maya 週末去爬山了",
    )
    person = SemanticMemoryFactory(content="Maya 喜欢画画").person
    ids = {text: SemanticMemoryFactory(content=text, person=person).pk for text in texts}
    asked = {"iPhone": phone, "ＱＱ": qq, "貓": cat, "周末": hike, "週末爬山": hike}

    found = {query: [hit["id"] for hit in memory_semantic_search(query=query, person=person)] for query in asked}

    assert found == {query: [ids[text]] for query, text in asked.items()}


# Chinese characters, the CJK blocks and the supplementary planes (a rare character may simplify to one there).
_CHINESE = re.compile(CJK_IDEOGRAPH[:-1] + "\U00020000-\U0003ffff]")


_HAN = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)


@given(st.text() | st.text(alphabet=_HAN | st.sampled_from(" ，a1")))
@settings(suppress_health_check=[HealthCheck.too_slow])
@example("leo@example.com 的貓，見 https://example.com/貓?q=1")
def test_simplifying_changes_only_chinese_characters_and_twice_is_once(text):
    simplified = text_simplified(text)

    assert _CHINESE.sub("", simplified) == _CHINESE.sub("", text)
    assert text_simplified(simplified) == simplified


def test_a_name_is_written_in_each_regions_traditional_forms():
    assert text_traditional_forms("为民住在这里") == {"爲民住在這裏", "為民住在這裡", "為民住在這裏"}
    assert text_traditional_forms("Leo") == {"Leo"}


@given(st.text() | st.text(alphabet=_HAN | st.sampled_from(" ，a1")))
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_a_texts_traditional_forms_change_only_its_chinese_characters(text):
    for form in text_traditional_forms(text):
        assert _CHINESE.sub("", form) == _CHINESE.sub("", text)


def test_the_particle_taiwan_writes_as_著_reads_as_着_and_a_word_of_著_stays():
    assert text_simplified("我現在在北京漂著，看著辦吧") == "我现在在北京漂着，看着办吧"
    assert text_simplified("他是著名的作家，成績顯著") == "他是著名的作家，成绩显著"
    # The Taiwan table's other readings are not taken: 么 is simplified, not Taiwan's 幺.
    assert text_simplified("你喜欢这件衣服么？") == "你喜欢这件衣服么？"


@pytest.mark.parametrize(
    ("told", "like", "expected"),
    [
        ("Leo的女儿今年八岁", "我女兒今年八歲了", "Leo的女兒今年八歲"),
        # Each written as the person writes it (裡, not the tables' 裏); a character they write two ways by its phrase.
        ("Leo家里有只猫", "我家裡有隻貓", "Leo家裡有隻貓"),
        ("Leo剪了头发，发了朋友圈", "我剪了頭髮，發了朋友圈", "Leo剪了頭髮，發了朋友圈"),
        # Said in simplified characters, or in none: told as it is.
        ("Leo的女儿今年八岁", "我女儿今年八岁了", "Leo的女儿今年八岁"),
        ("Leo lives in Lisbon", "I live in Lisbon", "Leo lives in Lisbon"),
    ],
)
def test_what_is_read_from_a_text_is_told_in_its_script(told, like, expected):
    assert text_in_script_of(told, like=like) == expected


@pytest.mark.parametrize(
    ("told", "like", "name", "expected"),
    [
        # No table converts a name: the surname 于 is not 於, in traditional characters or simplified.
        ("于小明的女儿今年八岁", "我女兒今年八歲了", "于小明", "于小明的女兒今年八歲"),
        ("陈明的邮箱是chen@example.com", "我的邮箱是chen@example.com", "陳明", "陳明的邮箱是chen@example.com"),
        ("Leo家里有只猫", "我家裡有隻貓", "Leo", "Leo家裡有隻貓"),
    ],
)
def test_a_name_is_told_as_written_whatever_the_script(told, like, name, expected):
    assert text_in_script_of(told, like=like, name=name) == expected


@given(like=st.text(alphabet=_HAN | st.sampled_from(" ，a1"), max_size=30), more=st.text(alphabet=_HAN, max_size=10))
def test_told_in_traditional_characters_a_text_reads_as_the_simplified_one_it_was_told_from(like, more):
    told = text_simplified(like) + text_simplified(more)
    assert text_simplified(text_in_script_of(told, like=like)) == told


def test_every_chat_and_function_word_is_written_in_simplified_characters():
    # Text is simplified before these lists are read: an entry in traditional characters would never match.
    traditional = [word for word in (*CHAT_WORDS, *CHAT_PHRASES, *FUNCTION_WORDS) if text_simplified(word) != word]
    assert traditional == []


def _vectors() -> set[tuple[str, int]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT kind, row_id FROM vectors")
        return set(cursor.fetchall())


def _simplified_migrations_run() -> None:
    for app, migration in (("anima", "0020_segmented_simplified"), ("conversations", "0016_segmented_simplified")):
        with connection.schema_editor() as schema_editor:
            importlib.import_module(f"{app}.migrations.{migration}").resegment(django_apps, schema_editor)


@pytest.mark.local_embeddings
def test_the_migration_re_segments_rows_indexed_before_traditional_chinese_was_simplified_and_embeds_them_again():
    hike = SemanticMemoryFactory(content="Maya 週末去爬山了")
    drawing = SemanticMemoryFactory(content="Maya 喜欢画画", person=hike.person)
    english = SemanticMemoryFactory(content="Maya went hiking", person=hike.person)
    conversation = ConversationFactory(person=hike.person)
    now = timezone.now()
    turns = (("user", "我週末去爬山了", 3), ("assistant", "好玩吗？", 2), ("user", "今天吃了火锅", 1))
    said, answer, later = (
        MessageFactory(conversation=conversation, role=role, content=text, created_at=now - timedelta(minutes=ago))
        for role, text, ago in turns
    )
    embed_backfill_run()
    # As the code before segmented them.
    Entity.objects.filter(pk=hike.pk).update(fts_segmented=" ".join(jieba.cut_for_search("Maya 週末去爬山了")))
    Message.objects.filter(pk=said.pk).update(fts_segmented=" ".join(jieba.cut_for_search("我週末去爬山了")))
    embedded = _vectors()

    _simplified_migrations_run()

    hike.refresh_from_db()
    assert hike.fts_segmented == segment_text("Maya 周末去爬山了")
    assert [hit["id"] for hit in memory_semantic_search(query="周末", person=hike.person)][:1] == [hike.pk]
    english.refresh_from_db()
    assert english.fts_segmented == "Maya went hiking"
    said.refresh_from_db()
    assert said.fts_segmented == segment_text("我周末去爬山了")
    # The rows re-segmented are embedded as simplified now: their vectors go, and the answer's (embedded with them).
    assert embedded - _vectors() == {("entity", hike.pk), ("message", said.pk), ("message", answer.pk)}
    assert {("entity", drawing.pk), ("entity", english.pk), ("message", later.pk)} <= _vectors()
    embed_backfill_run()
    assert _vectors() == embedded
    _simplified_migrations_run()  # nothing left to do
    assert _vectors() == embedded


def test_rows_holding_a_word_of_another_script_are_re_segmented_whole():
    cafe = SemanticMemoryFactory(content="Maya's favourite café is on Rua Augusta")
    phone = SemanticMemoryFactory(content="Maya 的手机是ｉＰｈｏｎｅ", person=cafe.person)
    chinese = SemanticMemoryFactory(content="我养了一只橘猫", person=cafe.person)
    Entity.objects.filter(pk=cafe.pk).update(fts_segmented="Maya's favourite caf é is on Rua Augusta")
    Entity.objects.filter(pk=phone.pk).update(fts_segmented="Maya 的 手机 是 ｉ Ｐ ｈ ｏ ｎ ｅ")
    entities = Entity.objects.all()

    refreshed = segmented_rows_refresh(
        queryset=entities, text_of=lambda entity: entity.content, holding=segmentation.OTHER_SCRIPT_LETTER
    )

    assert refreshed == 2
    cafe.refresh_from_db()
    assert cafe.fts_segmented == "Maya's favourite café is on Rua Augusta"
    assert [hit["id"] for hit in memory_semantic_search(query="café", person=cafe.person)] == [cafe.pk]
    assert [hit["id"] for hit in memory_semantic_search(query="iPhone", person=cafe.person)] == [phone.pk]
    chinese.refresh_from_db()
    assert chinese.fts_segmented == segment_text("我养了一只橘猫")


def test_rows_segmented_before_are_re_segmented_once_and_append_only_ones_are_left():
    memory = SemanticMemoryFactory(content="我养了一只橘猫")
    english = SemanticMemoryFactory(content="Leo adopted a cat")
    limbic = ContentBlockFactory(tag=BlockTag.LIMBIC, content="想念橘猫")
    words_only = " ".join(jieba.cut_for_search("我养了一只橘猫"))
    Entity.objects.filter(pk=memory.pk).update(fts_segmented=words_only)
    entities = Entity.objects.exclude(primary_component="content_block", tag="limbic")

    assert segmented_rows_refresh(queryset=entities, text_of=lambda entity: entity.content, batch_size=1) == 1
    memory.refresh_from_db()
    assert memory.fts_segmented == segment_text("我养了一只橘猫")
    assert [hit["id"] for hit in memory_semantic_search(query="猫", person=memory.person)] == [memory.pk]
    assert segmented_rows_refresh(queryset=entities, text_of=lambda entity: entity.content) == 0  # already done
    english.refresh_from_db()
    assert english.fts_segmented == "Leo adopted a cat"
    limbic.refresh_from_db()
    assert limbic.fts_segmented == segment_text("想念橘猫")


def test_re_segmenting_reports_its_progress_every_so_many_rows(capsys):
    for text in ("橘猫", "新车", "小狗", "徒步", "火锅"):
        SemanticMemoryFactory(content=text)
    Entity.objects.update(fts_segmented="")
    progress = segmented_rows_progress("entities", every=2)
    segmented_rows_refresh(
        queryset=Entity.objects.all(), text_of=lambda row: row.content, batch_size=1, progress=progress
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.strip() for line in lines] == [
        "entities: 2 rows with Chinese read, 2 re-segmented",
        "entities: 4 rows with Chinese read, 4 re-segmented",
    ]
    assert "TypeScript" in segment_text("我现在更喜欢TypeScript了").split()


def test_loading_with_tags_leaves_nothing_for_a_first_request_to_load():
    # A fresh interpreter: this one has loaded jieba's tables already.
    probe = (
        "import sys, jieba; from anima.core.segmentation import segmentation_load; segmentation_load(tags=True); "
        "print(jieba.dt.initialized, 'jieba.posseg' in sys.modules, 'jieba.analyse' in sys.modules)"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.split() == ["True", "True", "True"]


@pytest.mark.parametrize(
    "first_use",
    [
        "from sleep.checks import text_units; text_units('小雨喜欢徒步')",
        "from sleep.offline.limbic import _zh_negated; _zh_negated('我不太')",
        "from anima.core.text import text_keywords; text_keywords('小雨喜欢徒步和爬山', count=2)",
        "from anima.core.segmentation import segment_text; segment_text('小雨喜欢徒步')",
    ],
)
def test_whichever_code_segments_first_loads_jieba_without_printing(first_use):
    # A fresh interpreter, as a command is: jieba logs its dictionary loading to stderr at DEBUG unless quieted.
    probe = f"import django; django.setup(); {first_use}"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "anima.settings"}
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env)
    assert "dict" not in ran.stderr and "jieba" not in ran.stderr, ran.stderr


def test_long_words_also_index_their_parts():
    tokens = segment_text("中华人民共和国").split()
    assert {"中华", "人民", "共和国", "中华人民共和国"} <= set(tokens)


def test_edits_re_segment_on_save():
    memory = SemanticMemoryFactory(content="小雨属虎")
    memory.content = "小雨喜欢徒步"
    memory.save(update_fields=["content"])
    memory.refresh_from_db()
    assert "徒步" in memory.fts_segmented.split()


def test_a_segmentation_failure_stores_null_logs_and_still_writes_the_row(monkeypatch, caplog):
    def broken(text):
        raise RuntimeError("dictionary corrupted")

    monkeypatch.setattr(jieba, "cut_for_search", broken)
    with caplog.at_level(logging.WARNING, logger="anima.core.segmentation"):
        message = MessageFactory(content="这条消息仍然要保存")
    stored = Message.objects.get(pk=message.pk)
    assert stored.content == "这条消息仍然要保存"
    assert stored.fts_segmented is None
    assert "segmentation failed" in caplog.text


def test_the_dictionary_loads_once_per_process(monkeypatch):
    calls = []
    monkeypatch.setattr(segmentation, "_initialized", False)
    monkeypatch.setattr(jieba, "initialize", lambda *a, **k: calls.append(1))
    for _ in range(3):
        segment_text("你好")
    assert calls == [1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300))
@example("ＱＱ号 ｉＰｈｏｎｅ １５ touché привет")
def test_any_text_segments_to_tokens_that_keep_every_non_space_character(text):
    segmented = segment_text(text)
    assert segmented is not None
    # Full-width Latin letters and digits are searched as the ASCII ones, traditional Chinese as simplified.
    expected = text_simplified(text).translate(segmentation._HALF_WIDTH)
    assert {ch for ch in segmented if not ch.isspace()} == {ch for ch in expected if not ch.isspace()}


@pytest.mark.parametrize("text", ["", "   ", "\n"])
def test_blank_text_segments_to_empty(text):
    assert segment_text(text) == ""


@pytest.mark.parametrize(
    ("word", "tag", "parts"),
    [
        ("面试", "v", {("面试", "v")}),
        ("面试官", "n", {("面试官", "n"), ("面试", "v")}),
        ("空档期", "n", {("空档", "b"), ("档期", "n")}),  # a guessed word: its dictionary parts only
    ],
)
def test_word_parts_are_the_dictionary_words_search_segmentation_finds_inside(word, tag, parts):
    assert set(segmentation.word_parts(word, tag)) == parts
