"""Which passages quote a forgotten fact, and what redaction leaves of a text or a JSON value."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from anima.core.redaction import Fact, Redactor


def _redactor(*facts: str, ids: tuple[int, ...] = (), names: tuple[str, ...] = ()) -> Redactor:
    return Redactor(facts=tuple(Fact.of(fact, names=names) for fact in facts), ids=frozenset(ids))


def test_a_quoting_sentence_goes_whole_and_the_rest_stays_as_written():
    redactor = _redactor("Maya is allergic to peanuts and sesame", names=("Maya",))
    text = "We met at noon. She said she's allergic to peanuts, and to sesame! Then we cooked."
    assert redactor.text(text) == "We met at noon. Then we cooked."
    # Word forms meet by their first letters; the person's name alone is not the fact.
    assert redactor.text("Themes: allergy, peanut, sesame.") == ""
    assert redactor.text("Maya went swimming.") == "Maya went swimming."


def test_short_facts_need_every_word_and_numbers_tell_facts_apart():
    redactor = _redactor("Leo's locker code is 1234", names=("Leo",))
    assert redactor.text("Maya's locker code is 9876.") == "Maya's locker code is 9876."
    assert redactor.text("The locker code: 1234.") == ""


def test_chinese_facts_by_character_bigrams():
    redactor = _redactor("女儿属虎，今年四岁")
    assert redactor.text("今天聊到：她女儿属虎，今年四岁了。我们还聊了天气。") == "我们还聊了天气。"


def test_markers_and_citing_id_lists_of_forgotten_ids_go():
    redactor = _redactor("unrelated words entirely", ids=(7,))
    assert redactor.text("Noted [[anima:7]] and [[anima:8]].") == "Noted and [[anima:8]]."
    body = {"source_facts": [7, 8], "semantic_memory_ids": [7], "scores": [7, 1], "note": "kept"}
    assert redactor.value(body) == {"source_facts": [8], "semantic_memory_ids": [], "scores": [7, 1], "note": "kept"}


@given(st.lists(st.sampled_from(["Leo keeps bees.", "Bees sting.", "It rained.", "我养蜜蜂。", "\n", " "]), max_size=8))
def test_redaction_is_idempotent_and_leaves_no_quote(parts):
    redactor = _redactor("Leo keeps bees", names=("Leo",))
    once = redactor.text("".join(parts))
    assert redactor.text(once) == once
    assert "keeps bees" not in once
