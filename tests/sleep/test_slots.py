from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sleep.offline.light import facts_read
from sleep.slots import Slot, restates, slot_read, supersedes


@settings(max_examples=80, deadline=None)
@given(text=st.text(max_size=200), name=st.sampled_from(["Leo", "小雨", ""]))
def test_reading_a_slot_never_fails(text, name):
    slot = slot_read(text, name=name)
    assert slot is None or slot.attribute


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        ("My name is Sam.", []),  # the person's own name is no fact ("Sam's name is Sam")
        ("Call me Sammy, everyone does.", ["Sam also goes by Sammy"]),
        ("Honestly I can't stand olives.", ["Sam can't stand olives"]),
        ("We've got a beagle called Rufus.", ["Sam's family has got a beagle called Rufus"]),
        ("My grandson Jamie had his birthday, he's 11 now.", ["Sam's grandson Jamie is 11 now"]),
        ("She's 11 now.", []),  # nobody to point at: the pronoun is not left dangling
        ("我叫小雨。", []),
        ("我养了一只布偶，叫雪球。", ["小雨养了一只布偶，叫雪球"]),
        ("她今年五岁了。", []),
        ("我女儿叫朵朵，她今年五岁了。", ["小雨的女儿叫朵朵", "小雨的女儿朵朵今年五岁"]),
    ],
)
def test_disclosures_name_the_person_and_resolve_or_drop_pronouns(said, expected):
    name = "小雨" if any("\u4e00" <= ch <= "\u9fff" for ch in said) else "Sam"
    assert [content for _, content, _ in facts_read(said, name=name)] == expected


def test_numbers_and_negations_decide_a_slot():
    seven = slot_read("Maya's daughter is 7", name="Maya")
    eight = slot_read("Maya's daughter just turned 8", name="Maya")
    assert supersedes(eight, seven) and not restates(eight, seven)
    likes, dislikes = slot_read("Raj likes coffee", name="Raj"), slot_read("Raj hates coffee", name="Raj")
    assert supersedes(likes, dislikes)
    assert not supersedes(slot_read("Raj likes tea", name="Raj"), likes)  # likes coexist
    assert restates(slot_read("Leo 住在杭州", name="Leo"), slot_read("Leo 现在住在杭州", name="Leo"))
    assert Slot.from_body({"slot": {"attribute": "job", "value": "Nurse "}}) == Slot("self", "", "job", "", "nurse")
