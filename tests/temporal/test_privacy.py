"""Topic lines: a few general themes of a closed vocabulary, never a word of what was said."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anima.core.segmentation import text_traditional, text_traditional_forms
from temporal.privacy import section_for, topic_line, topic_shown
from temporal.themes import THEMES, themes_of, vocabulary_names

# Every way a line has been seen to carry a contact detail or a secret past a validator.
LEAKS = [
    "ａｄａ．ｌｏｖｅｌａｃｅ＠ｇｍａｉｌ．ｃｏｍ",  # a fullwidth e-mail
    "ada dot lovelace at gmail dot com",
    "ada (at) gmail (dot) com",
    "nine one two three four five six seven",
    "一三八零零一三八零零零",
    "①③⑧⓪⓪①③⑧⓪⓪⓪",
    "+86 138 0013 8000",
    "https://t.me/ada_lovelace",
    "@ada_lovelace on telegram",
    "passport, number, email, zebracanary",
    "locker, code, hospital, lemurcanary",
    "「顺便记一下，我的邮箱是」",
    "Maya's PIN is four four two one",
]
_WORD = re.compile(r"[\w'’.@＠]+")


def parts(line: str) -> list[str]:
    return [part for part in re.split(r", |、", line) if part]


def words(text: str) -> set[str]:
    return {word.casefold() for word in _WORD.findall(text)}


def assert_vocabulary(line: str, *, chinese: bool, script: str = "") -> None:
    assert line and set(parts(line)) <= vocabulary_names(chinese=chinese, script=script), line


@pytest.mark.parametrize("leak", LEAKS)
def test_no_way_of_writing_a_contact_detail_survives_as_a_topic(leak):
    said = f"Maya: my details are {leak}. 顺便记一下：{leak}"

    from_model = topic_line(leak, source=said)
    from_rules = topic_line("", source=said)

    for line in (from_model, from_rules):
        assert_vocabulary(line, chinese=False)
        assert_vocabulary(topic_shown(line, fallback=said, chinese=True), chinese=True)
        # Nothing of the leak is copied: any word the line shares with it is a theme's own name.
        assert words(line) & words(leak) <= vocabulary_names(chinese=False)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    candidate=st.text(max_size=200),
    source=st.text(max_size=400),
    chinese=st.booleans(),
    script=st.sampled_from(["", "我的貓", "週末去山裡"]),
)
def test_for_any_text_the_topic_line_holds_only_vocabulary_words(candidate, source, chinese, script):
    stored = topic_line(candidate, source=source)

    assert_vocabulary(stored, chinese=False)
    shown = topic_shown(stored, fallback=source, chinese=chinese, script=script)
    assert_vocabulary(shown, chinese=chinese, script=script)
    # A stored line from before the vocabulary (a line of keywords) is shown as themes too.
    before = topic_shown(candidate, fallback=source, chinese=chinese, script=script)
    assert_vocabulary(before, chinese=chinese, script=script)


@pytest.mark.parametrize(
    ("said", "english", "chinese"),
    [
        ("We studied for the exams all week, then my mother called.", "study, family", "学习、家庭"),
        ("I moved into a new apartment; the boiler is broken again.", "home", "家"),
        ("Running the marathon hurt, so I saw a doctor about my knees.", "sport, health", "运动、健康"),
        ("我下周要去杭州出差，帮我记得提醒我带伞。", "plans, travel", "计划、旅行"),
        ("我的葡萄牙语考试在下周三，有点紧张。", "study, feelings, plans", "学习、心情、计划"),
        ("Zebracanary.", "everyday", "日常"),
    ],
)
def test_themes_are_chosen_by_keyword_rules_in_both_languages_and_shown_in_the_viewers(said, english, chinese):
    stored = topic_line("", source=said)

    assert stored == english
    assert topic_shown(stored, fallback=said, chinese=True) == chinese
    assert topic_shown(stored, fallback=said, chinese=False) == english
    # Written in traditional characters, the same themes; shown to a conversation held in them, in them.
    assert topic_line("", source=text_traditional(said)) == english
    assert topic_shown(stored, fallback=said, chinese=True, script="我的貓") == text_traditional(chinese)


def test_every_chinese_theme_word_is_found_as_each_traditional_standard_writes_it():
    for theme in THEMES:
        for word in theme.chinese:
            for written in text_traditional_forms(word):
                assert theme.key in themes_of(f"我們{written}了"), (theme.key, written)


def test_a_models_topic_in_traditional_characters_names_the_same_themes():
    assert topic_line("學習、健康", source="") == topic_line("学习、健康", source="") == "study, health"


@pytest.mark.parametrize(
    ("candidate", "stored"),
    [
        ("Family, 健康, zebracanary", "family, health"),  # vocabulary names count, anything else is dropped
        ("her marathon training and a sore knee", "sport"),  # no name: mapped by the same rules
        ("Leo's contact details: leo@example.com", "travel"),  # nothing to map: the source's themes
    ],
)
def test_a_models_topic_is_mapped_onto_the_vocabulary(candidate, stored):
    assert topic_line(candidate, source="Leo booked a flight to Lisbon.") == stored


def test_another_persons_section_is_shown_as_themes_in_the_viewers_language_even_if_stored_as_keywords():
    section = {
        "person_id": 7,
        "who": "Maya",
        "topic": "passport, number, email, zebracanary",  # written before the vocabulary
        "text": "Maya renewed her passport for the flight; her number is 912 345 678.",
    }

    seen_in_chinese = section_for(section, viewer_ids=frozenset({8}), mode="topics", chinese=True)
    seen_in_english = section_for(section, viewer_ids=frozenset({8}), mode="topics", chinese=False)

    assert seen_in_chinese == {"who": "Maya", "topic": "旅行"}
    assert seen_in_english == {"who": "Maya", "topic": "travel"}
    assert section_for(section, viewer_ids=frozenset({7}), mode="topics", chinese=True) == section
