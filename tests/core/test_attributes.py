from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anima.core.attributes import NOTHING_ASKED, attributes_asked

# Every attribute a question can name: the slot grammar's.
_SLOT_ATTRIBUTES = {
    "job", "workplace", "residence", "origin", "age", "birthday", "email", "phone", "allergy", "diet", "likes",
    "favourite", "activity", "learning", "plan", "event", "marital", "name",
}  # fmt: skip


@pytest.mark.parametrize(
    ("text", "attributes", "of_self"),
    [
        ("What do I do for a living?", {"job", "workplace"}, True),
        ("what's my job", {"job", "workplace"}, True),
        ("Do you remember where I live?", {"residence"}, True),
        ("Which city am I based in?", {"residence"}, True),
        ("how old am I?", {"age"}, True),
        ("When's my birthday?", {"birthday"}, True),
        ("where am I from?", {"origin"}, True),
        ("remind me of my email", {"email"}, True),
        ("What am I allergic to?", {"allergy"}, True),
        ("what's my favourite film?", {"likes", "favourite"}, True),
        ("Do you know what I\u2019m allergic to", {"allergy"}, True),  # a phone's apostrophe
        ("Remind me which foods I can\u2019t eat", {"diet"}, True),
        ("我做什么工作？", {"job", "workplace"}, True),
        ("你还记得我是干什么的吗？", {"job", "workplace"}, True),
        ("你还记得我住哪吗", {"residence"}, True),
        ("我對什麼過敏來著？", {"allergy"}, True),  # traditional characters
        ("我的信箱是什麼？", {"email"}, True),  # Taiwan's word for an e-mail address
        ("我多大了？", {"age"}, True),
        ("我对什么过敏来着？", {"allergy"}, True),
        ("我老家是哪的？", {"origin"}, True),
        # Asked of someone else: the attribute, not the asker's.
        ("what's your job?", {"job", "workplace"}, False),
        ("where does she live?", {"residence"}, False),
        ("你住哪？", {"residence"}, False),
        ("Do you like me?", {"likes", "favourite"}, False),
        ("我女儿几岁了？", {"age"}, True),  # whose age, the relation word says (recall reads it first)
    ],
)
def test_a_question_names_the_attributes_it_asks_and_whose(text, attributes, of_self):
    asked = attributes_asked(text)
    assert (set(asked.attributes), asked.of_self) == (attributes, of_self)


@pytest.mark.parametrize(
    "text",
    [
        "I live in Leeds now.",
        "Work was exhausting today.",
        "我住在成都。",
        "今天工作好累",
        "记住我的邮箱",  # 「记住」 is no residence, and this is no question
        "Hi, how are you?",
        "你好呀，吃了吗？",
    ],
)
def test_news_and_small_talk_ask_no_attribute(text):
    assert attributes_asked(text) == NOTHING_ASKED


def test_a_favourite_of_any_kind_answers_a_question_about_favourites():
    asked = attributes_asked("What's my favourite thing to cook?")
    assert asked.covers("favourite:food") and asked.covers("likes")
    assert not asked.covers("job") and not asked.covers("")


@given(st.text(max_size=80))
def test_any_text_asks_only_slot_attributes_and_of_self_only_with_one(text):
    asked = attributes_asked(text)
    assert set(asked.attributes) <= _SLOT_ATTRIBUTES
    assert asked.attributes or not asked.of_self
