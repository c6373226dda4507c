"""Deep sleep against a hostile model: schema-valid answers that would wreck memory are refused, with reasons."""

from __future__ import annotations

import datetime as dt

import pytest

from anima.core.models import MemoryStatus
from memory.embedding import embed_backfill_run
from memory.models import SemanticMemory
from memory.selectors import SEMANTIC, SESSION, memory_recall
from sleep.context import StepContext
from sleep.steps import deep_sleep
from sleep.steps.deep_prompts import (
    CONTRADICTION_INSTRUCTIONS,
    MERGE_INSTRUCTIONS,
    PINS_INSTRUCTIONS,
    SPLIT_INSTRUCTIONS,
)
from tests.factories import ConversationFactory, MessageFactory, RuntimeConfigFactory, SemanticMemoryFactory
from tests.sleep.stages import stages_script

DAY = dt.date(2026, 11, 26)


def _ctx() -> StepContext:
    return StepContext(run_id=0, day=DAY, mode="full", force=False, run_key="test", token_budget=None)


def _memory(person, content, *, day: int = 1, body: dict | None = None, **kwargs):
    return SemanticMemoryFactory(
        person=person,
        content=content,
        source_day=dt.date(2026, 11, day),
        body={"observed_at": f"2026-11-{day:02d}T10:00:00+08:00", **(body or {})},
        **kwargs,
    )


def _status(memory) -> str:
    memory.refresh_from_db()
    return memory.status


def _refused(output: dict) -> list[dict]:
    return [refusal for entry in output["rounds"] for refusal in entry.get("refused", [])]


def _everywhere(*items):
    """An answer naming every id of ``items`` that the group shown holds (a model retiring what it can reach)."""

    def answer(payload: dict) -> dict:
        return {"expire": [item for item in items if f'"id":{item["id"]},' in payload["group"]]}

    return answer


def test_one_nights_schema_valid_malice_changes_nothing_and_says_why(llm_stub, leo, maya):
    hangzhou = _memory(leo, "Leo lives in Hangzhou")
    bank = _memory(leo, "Leo works at a bank in Hangzhou", day=20)
    zodiac = _memory(leo, "Leo 的女儿小雨属虎")
    age = _memory(leo, "Leo 的女儿小雨今年四岁", day=20)
    nurse = _memory(maya, "Maya is a nurse")
    shoes = _memory(maya, "Maya bought new nurse shoes", day=20)
    allergy = _memory(maya, "Maya is allergic to peanuts", pinned=True)
    lisbon = _memory(maya, "Maya works nights at the children's hospital. Maya lives in Lisbon with her cat Miso.")
    jazz = _memory(maya, "Maya went to a jazz concert in Porto")
    jazz_again = _memory(maya, "Maya saw a jazz concert in Porto", day=20)
    retire = [
        {"id": hangzhou.pk, "superseded_by": bank.pk, "kind": "contradiction", "reason": "outdated"},
        {"id": zodiac.pk, "superseded_by": age.pk, "kind": "contradiction", "reason": "outdated"},
        {"id": nurse.pk, "superseded_by": shoes.pk, "kind": "change", "reason": "outdated"},
    ]
    injected = [{"memory_type": "world", "content": "INJECTED a"}, {"memory_type": "world", "content": "INJECTED b"}]
    cite = f"Maya went to a jazz concert in Porto [[anima:{hangzhou.pk}]]"
    stages_script(
        llm_stub,
        {
            CONTRADICTION_INSTRUCTIONS: [_everywhere(*retire)] * 10,
            SPLIT_INSTRUCTIONS: [{"splits": [{"id": lisbon.pk, "parts": injected}]}],
            MERGE_INSTRUCTIONS: [
                {"merges": [{"ids": [jazz.pk, jazz_again.pk], "memory_type": "preference", "content": cite}]}
            ],
            PINS_INSTRUCTIONS: [{"unpin": [{"id": allergy.pk, "reason": "trivial"}], "pin": []}],
        },
    )

    output = deep_sleep(_ctx())

    for memory in (hangzhou, zodiac, nurse, lisbon, jazz, jazz_again, allergy):
        assert _status(memory) == MemoryStatus.ACTIVE, memory.content
    allergy.refresh_from_db()
    assert allergy.pinned
    assert not SemanticMemory.objects.filter(content__startswith="INJECTED").exists()
    assert not SemanticMemory.objects.filter(content__contains="[[anima:").exists()
    reasons = {(r["action"], r["ids"][0]): r["reason"] for r in _refused(output)}
    assert reasons[("expire", hangzhou.pk)].startswith("not justified")
    assert reasons[("expire", zodiac.pk)].startswith("not justified")
    assert reasons[("expire", nurse.pk)].startswith("not justified")
    assert reasons[("split", lisbon.pk)] == f"part 'INJECTED a' says what #{lisbon.pk} does not"
    assert reasons[("merge", jazz.pk)] == f"cites another person's memories: #{hangzhou.pk}"
    assert reasons[("unpin", allergy.pk)] == f"#{allergy.pk} is pinned"
    assert all(not entry["changes"] for entry in output["rounds"])


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("Maya is allergic to cats", "Maya is not allergic to cats after all"),
        ("Leo 喜欢喝咖啡", "Leo 不再喜欢喝咖啡了"),
        ("Maya works at the bakery", "Maya no longer works at the bakery"),
    ],
)
def test_a_retire_the_texts_justify_goes_through(llm_stub, maya, older, newer):
    old = _memory(maya, older)
    new = _memory(maya, newer, day=20)
    stages_script(
        llm_stub,
        {
            CONTRADICTION_INSTRUCTIONS: [
                _everywhere({"id": old.pk, "superseded_by": new.pk, "kind": "contradiction", "reason": "denied"})
            ]
        },
    )

    output = deep_sleep(_ctx())

    old.refresh_from_db()
    assert (old.status, old.superseded_by_id) == (MemoryStatus.EXPIRED, new.pk)
    assert _refused(output) == []


def test_a_retire_without_a_successor_is_refused(llm_stub, maya):
    lisbon = _memory(maya, "Maya lives in Lisbon")
    _memory(maya, "Maya walks along the river in Lisbon", day=20)
    stages_script(
        llm_stub,
        {CONTRADICTION_INSTRUCTIONS: [_everywhere({"id": lisbon.pk, "kind": "contradiction", "reason": "old"})]},
    )

    output = deep_sleep(_ctx())

    assert _status(lisbon) == MemoryStatus.ACTIVE
    assert [r["reason"] for r in _refused(output)] == [
        "no successor named: a retire needs the newer or the contradicting fact"
    ]


def test_an_operator_edited_memory_is_left_alone_even_by_the_slot_rules(maya):
    edited = _memory(maya, "Maya lives in Berlin", body={"edited_by": "console:admin"})
    newer = _memory(maya, "Maya moved to Munich", day=20)

    output = deep_sleep(_ctx())

    assert _status(edited) == _status(newer) == MemoryStatus.ACTIVE
    assert {
        "action": "expire",
        "ids": [edited.pk, newer.pk],
        "reason": f"#{edited.pk} was edited by console:admin",
    } in (_refused(output))


def test_a_pinned_duplicate_stays_and_the_copy_retires_into_it(maya):
    pinned = _memory(maya, "Maya is allergic to peanuts", pinned=True)
    copy = _memory(maya, "Maya is allergic to peanuts", day=20)

    deep_sleep(_ctx())

    copy.refresh_from_db()
    assert _status(pinned) == MemoryStatus.ACTIVE and pinned.pinned
    assert (copy.status, copy.superseded_by_id) == (MemoryStatus.EXPIRED, pinned.pk)


@pytest.mark.local_embeddings
def test_the_pinned_fact_takes_over_where_its_copy_was_said_and_recall_ranks_it_above_those_lines(maya):
    # Told once by hand (pinned, from no conversation), then said in a chat: the night's copy retires into the
    # pinned fact, which now knows the chat it was said in, so it comes before that chat's lines.
    pinned = _memory(maya, "Maya is allergic to peanuts", pinned=True)
    edited_at = pinned.updated_at
    chat = ConversationFactory(person=maya)
    line = MessageFactory(conversation=chat, role="assistant", content="Good call, with a peanut allergy never risk it")
    _memory(
        maya, "Maya is allergic to peanuts", day=20, source_conversation=chat, body={"source_conversations": [chat.pk]}
    )
    embed_backfill_run()
    assert "source_conversations" not in pinned.body  # told by hand: it knows no chat yet

    deep_sleep(_ctx())

    pinned.refresh_from_db()
    assert pinned.body["source_conversations"] == [chat.pk]
    assert (pinned.content, pinned.updated_at, pinned.pinned) == ("Maya is allergic to peanuts", edited_at, True)
    assert [(hit["memory_type"], hit["id"]) for hit in memory_recall(query="peanut allergy", person=maya)[:2]] == [
        (SEMANTIC, pinned.pk),
        (SESSION, line.pk),
    ]


def test_a_night_changes_at_most_its_share_of_the_inventory(llm_stub, maya):
    RuntimeConfigFactory(section="sleep", values={"deep_sleep_change_share": 0.25, "deep_sleep_min_changes": 1})
    pairs = [
        (_memory(maya, f"Maya likes {thing}"), _memory(maya, f"Maya does not like {thing} any more", day=20))
        for thing in ("tea", "opera", "rain", "chess")
    ]
    stages_script(
        llm_stub,
        {
            CONTRADICTION_INSTRUCTIONS: [
                _everywhere(*({"id": a.pk, "superseded_by": b.pk, "kind": "change", "reason": "x"} for a, b in pairs))
            ]
            * 4
        },
    )

    output = deep_sleep(_ctx())

    # 8 memories, a quarter of them: 2 changes, and the slot rules already take what the texts state.
    assert SemanticMemory.objects.filter(status=MemoryStatus.EXPIRED).count() == 2
    assert output["changes_allowed"] == {f"person:{maya.pk}": 2}
    limit = [r for r in _refused(output) if r["reason"].startswith("the night's change limit")]
    assert len(limit) == 2
    assert limit[0]["reason"] == "the night's change limit for these memories' owner is reached (2 of 8)"


def test_the_change_limit_is_each_persons_own(llm_stub, maya, leo):
    RuntimeConfigFactory(section="sleep", values={"deep_sleep_change_share": 0.25, "deep_sleep_min_changes": 1})
    changes = []
    for person, things in ((maya, ("tea", "opera", "rain", "chess")), (leo, ("jazz",))):
        name = person.display_name
        for thing in things:
            old = _memory(person, f"{name} likes {thing}")
            changes.append(
                {
                    "id": old.pk,
                    "superseded_by": _memory(person, f"{name} does not like {thing} any more", day=20).pk,
                    "kind": "change",
                    "reason": "x",
                }
            )
    _memory(leo, "Leo lives in Hangzhou")
    stages_script(llm_stub, {CONTRADICTION_INSTRUCTIONS: [_everywhere(*changes)] * 10})

    output = deep_sleep(_ctx())

    # Maya's many changes use up her own share, not Leo's: his one change still goes through.
    assert output["changes_allowed"] == {f"person:{maya.pk}": 2, f"person:{leo.pk}": 1}
    expired = SemanticMemory.objects.filter(status=MemoryStatus.EXPIRED)
    assert expired.filter(person=maya).count() == 2
    assert list(expired.filter(person=leo).values_list("content", flat=True)) == ["Leo likes jazz"]


def test_the_pin_review_takes_back_its_own_pins_only(llm_stub, maya):
    operators = _memory(maya, "Maya is allergic to peanuts", pinned=True)
    chosen = _memory(maya, "Maya carries an epinephrine pen")
    stages_script(
        llm_stub,
        {
            PINS_INSTRUCTIONS: [
                {"unpin": [], "pin": [{"id": chosen.pk, "reason": "safety"}]},
                {"unpin": [{"id": chosen.pk, "reason": "x"}, {"id": operators.pk, "reason": "x"}], "pin": []},
            ]
        },
    )

    deep_sleep(_ctx())
    chosen.refresh_from_db()
    assert chosen.pinned and chosen.body["pinned_by"] == "deep-sleep"
    output = deep_sleep(_ctx())

    chosen.refresh_from_db()
    operators.refresh_from_db()
    assert not chosen.pinned and operators.pinned
    assert _refused(output) == [{"action": "unpin", "ids": [operators.pk], "reason": f"#{operators.pk} is pinned"}]
