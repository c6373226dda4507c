"""Which passages quote a forgotten fact, and what redaction leaves of a text or a JSON value."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from anima.core.redaction import Fact, Lexemes, Passages, Redactor


def _redactor(*facts: str, ids: tuple[int, ...] = (), names: tuple[str, ...] = ()) -> Redactor:
    lexemes = Lexemes()
    found = tuple(Fact.of(fact, lexemes=lexemes, names=names) for fact in facts)
    return Redactor(facts=found, ids=frozenset(ids), lexemes=lexemes)


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


def test_a_prompts_json_payload_is_redacted_inside_and_a_record_about_the_fact_goes_whole():
    redactor = _redactor("Maya is allergic to quinoa flakes and sesame seeds", names=("Maya",))
    record = {"content": "Maya is allergic to quinoa flakes and sesame seeds", "slot": {"key": "quinoa flakes"}}
    kept = {"content": "Leo repainted the shed", "slot": {"key": "shed"}}
    payload = {
        "memories": [record, kept],
        "dialogue": [{"role": "user", "content": "Hi. I'm allergic to quinoa flakes, sesame seeds."}],
    }
    inventory = "\n".join(json.dumps(item, separators=(",", ":")) for item in (record, kept))

    redacted = redactor.value([{"role": "user", "content": json.dumps(payload)}, {"inventory": inventory}])

    assert json.loads(redacted[0]["content"]) == {"memories": [kept], "dialogue": [{"role": "user", "content": "Hi."}]}
    assert [json.loads(line) for line in redacted[1]["inventory"].splitlines()] == [kept]
    assert "quinoa" not in json.dumps(redacted)


def test_a_persons_passages_go_verbatim_or_quoted_and_a_cut_message_is_still_theirs():
    passages = Passages.of(["The lighthouse keeper taught me knots on Tuesday.", "ok"])

    assert passages.held("The lighthouse keeper taught")  # a prompt cut the message here
    assert not passages.held("ok") and not passages.held("I repainted the shed.")
    assert passages.text("Talked about lighthouse, keeper, taught, knots. Leo painted.") == "Leo painted."
    assert passages.fragments() == ["The lighthouse keeper taught me knots on"]


def test_words_meet_by_the_english_stems_of_recalls_full_text_branch_not_by_their_first_letters():
    lives = _redactor("Ada lives in Reykjavik", names=("Ada",))
    assert lives.text("I live in Reykjavik. Nice.") == "Nice."
    assert lives.text("Living in Reykjavik, finally!") == ""
    # Five shared letters are no shared word: "underground" is not "understands".
    understands = _redactor("Leo understands Icelandic", names=("Leo",))
    said = "Leo took the underground to his Icelandic class."
    assert understands.text(said) == said
    assert understands.text("Understanding Icelandic, he smiled.") == ""
