from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sleep.offline.subjects import subject_profile


def _lines(facts: list[str], *, person: str, names: list[str], kind: str = "person") -> list[str]:
    payload = {
        "person": person,
        "subject": {"kind": kind, "names": names},
        "facts": [{"id": n, "content": text} for n, text in enumerate(facts)],
    }
    return [line["text"] for line in subject_profile(payload)["lines"]]


@pytest.mark.parametrize(
    ("fact", "line"),
    [
        ("Leo 的女儿小雨属虎", "属虎"),
        ("Leo的女儿小雨今年四岁，在上幼儿园。", "今年四岁，在上幼儿园"),
        ("Leo 打算带小雨去爬山", "Leo 打算带小雨去爬山"),  # Leo's plan: kept whole
        ("小雨在上幼儿园", "在上幼儿园"),
        ("Leo 的女儿的名字叫小雨", "名字叫小雨"),
    ],
)
def test_a_chinese_fact_loses_the_subject_it_opens_with(fact, line):
    assert _lines([fact], person="Leo", names=["小雨", "女儿"]) == [line]


@pytest.mark.parametrize(
    ("fact", "line"),
    [
        ("Maya's daughter Lily is four", "is four"),
        ("Lily, Maya's daughter", "Maya's daughter"),
        ("My daughter Lily goes to kindergarten.", "goes to kindergarten"),
        ("Annabel likes tea", "Annabel likes tea"),  # "Ann" is not the front of "Annabel"
        ("Maya's daughter's name is Lily", "name is Lily"),  # not "'s name is Lily"
    ],
)
def test_an_english_fact_loses_the_subject_it_opens_with(fact, line):
    assert _lines([fact], person="Maya", names=["Lily", "Ann", "daughter"]) == [line]


def test_the_persons_own_facts_lose_their_name():
    facts = ["Maya is allergic to peanuts", "Leo 的邮箱是 leo@example.com", "10 月中旬 Leo 带团队完成了迁移"]
    assert _lines(facts[:1], person="Maya", names=["Maya"], kind="self") == ["is allergic to peanuts"]
    assert _lines(facts[1:], person="Leo", names=["Leo"], kind="self") == [
        "邮箱是 leo@example.com",
        "10 月中旬 Leo 带团队完成了迁移",
    ]


@given(fact=st.text(min_size=1, max_size=80), name=st.sampled_from(["Lily", "小雨", "Miso"]))
def test_a_line_is_always_the_facts_own_words(fact, name):
    (line,) = _lines([fact], person="Maya", names=[name, "daughter", "女儿"])
    assert line in fact.strip() or not line
