"""What makes two facts contradict explicitly, and what a split or merge may say, in both languages."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from anima.core.segmentation import text_simplified
from anima.core.text import FUNCTION_WORDS
from conversations.models import Person
from sleep.checks import fact_refusal, negates, split_refusal, text_units
from tests.factories import SemanticMemoryFactory

DENIALS = [
    ("Maya is allergic to peanuts", "Maya is not allergic to peanuts"),
    ("Maya works at the bakery", "Maya no longer works at the bakery"),
    ("Maya likes coffee", "Maya prefers green tea (used to like coffee)"),
    ("Leo 喜欢猫", "Leo 不再喜欢猫了"),
    ("Leo 住在杭州", "Leo 已经不住在杭州了"),
    ("Leo 喜欢 Python", "Leo 现在更喜欢 TypeScript（以前喜欢 Python）"),
    ("Leo 会开车", "Leo 不会开车"),
]
UNRELATED = [
    ("Leo lives in Hangzhou", "Leo works at a bank in Hangzhou"),
    ("Maya is a nurse", "Maya bought new nurse shoes"),
    ("Maya likes tea", "Maya does not like opera"),
    ("Leo 特别喜欢猫", "Leo 喜欢猫"),
    ("Leo 的女儿小雨属虎", "Leo 的女儿小雨今年四岁"),
    ("Leo 觉得这家店不错", "Leo 觉得这家店很贵"),
    ("Maya is not a morning person", "Maya is not allergic to peanuts"),
]


@pytest.mark.parametrize(("a", "b"), DENIALS)
def test_one_text_denying_the_other_is_an_explicit_contradiction_either_way(a, b):
    assert negates(a, b, names=["Maya", "Leo"]) and negates(b, a, names=["Maya", "Leo"])


@pytest.mark.parametrize(("a", "b"), UNRELATED)
def test_texts_sharing_words_without_denying_each_other_do_not_contradict(a, b):
    assert not negates(a, b, names=["Maya", "Leo"])


@given(st.text(max_size=200))
def test_no_text_contradicts_itself(text):
    assert not negates(text, text)


@given(st.from_regex(r"[a-z]{4,12}", fullmatch=True))
def test_a_negated_statement_denies_it_whatever_it_is_about(thing):
    assume(thing not in FUNCTION_WORDS and text_units(thing))
    assert negates(f"Maya collects {thing}", f"Maya does not collect {thing} any more", names=["Maya"])


@pytest.mark.parametrize(("a", "b"), [("Leo有養貓", "Leo沒有養貓"), ("Leo 會開車", "Leo 不會開車")])
def test_a_denial_in_traditional_characters_is_one_and_across_scripts_too(a, b):
    assert negates(a, b, names=["Leo"])
    assert negates(text_simplified(a), b, names=["Leo"]) and negates(a, text_simplified(b), names=["Leo"])


def test_a_fact_a_model_writes_in_simplified_characters_is_what_a_person_said_in_traditional_ones():
    maya = Person(slug="maya", display_name="Maya")
    for said, fact in (("我對花生過敏", "Maya对花生过敏"), ("我女兒在學鋼琴", "Maya的女儿在学钢琴")):
        dialogue = [{"role": "user", "content": said}]
        assert fact_refusal(fact, person=maya, others=[], dialogue=dialogue) == "", (said, fact)


def test_a_denial_typed_with_a_phones_apostrophe_is_one():
    assert negates("Maya is allergic to cats", "Maya isn\u2019t allergic to cats", names=["Maya"])


def test_only_a_name_in_common_is_no_contradiction():
    assert not negates("Maya", "Maya is not here", names=["Maya"])


SOURCE_ZH = "Leo 住在杭州，在阿里巴巴工作，女儿小雨属虎。"
SOURCE_EN = "Maya works nights at the children's hospital. She lives in Lisbon with her cat Miso."


@pytest.mark.parametrize(
    ("source", "parts"),
    [
        (SOURCE_ZH, ["Leo 住在杭州", "Leo 在阿里巴巴上班", "Leo 的女儿叫小雨，属虎"]),
        (SOURCE_EN, ["Maya works nights at the children's hospital", "Maya lives in Lisbon with her cat Miso"]),
    ],
)
def test_a_split_into_its_own_facts_reworded_a_little_is_a_split(source, parts):
    memory = SemanticMemoryFactory(content=source)
    assert split_refusal(memory, [{"content": part} for part in parts]) == ""


@pytest.mark.parametrize(
    ("source", "parts", "reason"),
    [
        (SOURCE_EN, ["INJECTED a", "INJECTED b"], "part 'INJECTED a' says what #{pk} does not"),
        (SOURCE_EN, ["Maya is a night-shift nurse", "Maya has a cat"], "part 'Maya is a night-shift nurse' says what"),
        (SOURCE_ZH, ["Leo 住在杭州", "Leo 住在杭州"], "a split needs two different parts"),
        (SOURCE_ZH, ["Leo 住在杭州", "Leo 的女儿"], "the parts leave out most of #{pk}"),
    ],
)
def test_a_split_saying_something_else_or_dropping_most_is_refused(source, parts, reason):
    memory = SemanticMemoryFactory(content=source)
    assert split_refusal(memory, [{"content": part} for part in parts]).startswith(reason.format(pk=memory.pk))


_WORDS = st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=4, max_size=9), min_size=2, max_size=8)
_HANZI = st.text(alphabet="天地人山水花草猫狗书画茶饭车船家国学工", min_size=3, max_size=16)


@given(words=_WORDS, hanzi=_HANZI)
def test_a_fact_in_the_persons_own_words_is_never_refused_as_made_up(words, hanzi):
    maya = Person(slug="maya", display_name="Maya")
    for said, fact in ((" ".join(words), "Maya " + " ".join(words)), (hanzi, "Maya " + hanzi)):
        assume(text_units(fact) - text_units("Maya"))
        dialogue = [{"role": "user", "content": said}]
        assert fact_refusal(fact, person=maya, others=[], dialogue=dialogue) == ""


@given(words=_WORDS, other=_WORDS)
def test_a_fact_sharing_no_word_with_what_the_person_said_is_refused(words, other):
    maya = Person(slug="maya", display_name="Maya")
    fact = "Maya " + " ".join(other)
    assume(text_units(fact) - text_units("Maya") and not text_units(fact) & text_units(" ".join(words)))
    dialogue = [{"role": "user", "content": " ".join(words)}]
    assert fact_refusal(fact, person=maya, others=[], dialogue=dialogue).startswith("not what the person said")
