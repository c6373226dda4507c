from __future__ import annotations

import datetime as dt
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import given, settings
from hypothesis import strategies as st

from anima.core.llm.testing import scripted
from anima.core.models import MemoryStatus, MemoryType
from conversations.models import Role
from memory.embedding import embed_backfill_run
from memory.models import SemanticMemory
from sleep.context import StepContext
from sleep.offline.deep import merge_answer
from sleep.steps import deep_sleep, light_sleep
from sleep.steps.deep import CHANGE_REASON
from sleep.steps.deep_groups import memory_owner, merge_candidates, similar_pairs, subject_groups, subject_keywords
from tests.factories import ConversationFactory, MessageFactory, PersonFactory, SemanticMemoryFactory

DAY = dt.date(2026, 11, 26)


def _ctx(mode: str = "full") -> StepContext:
    return StepContext(run_id=0, day=DAY, mode=mode, force=False, run_key="test", token_budget=None)


def _memory(person, content, *, observed: str, **kwargs):
    return SemanticMemoryFactory(person=person, content=content, body={"observed_at": observed}, **kwargs)


def _status(memory) -> str:
    memory.refresh_from_db()
    return memory.status


def test_contradiction_expires_only_the_older_claim_about_the_same_subject_and_person(leo, maya):
    old = _memory(leo, "Leo 的女儿小雨属羊", observed="2026-10-01T10:00:00+08:00")
    new = _memory(leo, "Leo 的女儿小雨属虎，今年四岁", observed="2026-11-26T08:50:00+08:00")
    distractors = [
        _memory(maya, "Maya 的女儿属虎", observed="2026-11-27T10:00:00+08:00"),  # other person
        _memory(leo, "Leo 的儿子小山属猴", observed="2026-11-27T10:00:00+08:00"),  # other subject
        _memory(leo, "Leo 喜欢苹果", observed="2026-10-01T10:00:00+08:00"),  # coexisting likes
        _memory(leo, "Leo 喜欢樱桃", observed="2026-11-27T10:00:00+08:00"),
        _memory(leo, "Leo 住在杭州", observed="2026-10-01T10:00:00+08:00"),
    ]

    output = deep_sleep(_ctx())

    old.refresh_from_db()
    assert old.status == MemoryStatus.EXPIRED
    assert old.superseded_by_id == new.pk
    assert old.expired_reason.startswith("contradiction")
    assert _status(new) == MemoryStatus.ACTIVE
    assert all(_status(d) == MemoryStatus.ACTIVE for d in distractors)
    round_one = output["rounds"][0]
    assert round_one["round"] == "contradiction_expiry"
    assert round_one["changes"] == [
        {
            "action": "expire",
            "before": old.content,
            "after": new.content,
            "ids": [old.pk, new.pk],
            "kind": "contradiction",
            "reason": old.expired_reason,
        }
    ]


def _all_quiet(**overrides):
    answers = {
        "deep-sleep.contradiction": [{"expire": []}] * 20,
        "deep-sleep.split": [{"splits": []}] * 5,
        "deep-sleep.merge": [{"merges": []}] * 5,
        "deep-sleep.pins": [{"unpin": [], "pin": []}],
    }
    answers.update(overrides)
    return answers


def test_the_model_may_only_retire_ids_of_the_group_it_was_shown(leo, maya):
    # Two claims no slot decides (the zodiac pair above is settled before any model is asked).
    a = _memory(leo, "Leo 很喜欢爬山", observed="2026-10-01")
    b = _memory(leo, "Leo 最近膝盖疼，爬山很吃力", observed="2026-11-26")
    bystander = _memory(maya, "Maya is allergic to peanuts", observed="2026-10-05")
    greedy = {"expire": [{"id": bystander.pk, "superseded_by": b.pk, "kind": "contradiction", "reason": "x"}]}
    with scripted(_all_quiet(**{"deep-sleep.contradiction": [greedy] + [{"expire": []}] * 5})) as provider:
        output = deep_sleep(_ctx())

    groups = [call.payload["group"] for call in provider.calls if call.purpose == "deep-sleep.contradiction"]
    assert len(groups) == 1
    assert str(a.pk) in groups[0] and str(b.pk) in groups[0] and "Maya" not in groups[0]
    assert _status(bystander) == MemoryStatus.ACTIVE
    assert output["rounds"][0]["refused"] == [
        {"action": "expire", "ids": [bystander.pk, b.pk], "reason": "not an active memory it was shown"}
    ]


def test_a_change_over_time_expires_the_older_preference_as_a_change(leo):
    python = _memory(leo, "Leo 喜欢 Python", observed="2026-09-15T21:30:00+08:00", memory_type=MemoryType.PREFERENCE)
    hiking = _memory(leo, "Leo 周末喜欢去山里徒步", observed="2026-10-12T20:15:00+08:00")
    conversation = ConversationFactory(person=leo)
    for minute, text in enumerate(["以前我很喜欢 Python，写脚本特别快。", "但我现在更喜欢 TypeScript 了。"]):
        MessageFactory(
            conversation=conversation,
            role=Role.USER,
            content=text,
            created_at=timezone.make_aware(dt.datetime(2026, 11, 26, 21, minute)),
        )

    light_sleep(_ctx())
    output = deep_sleep(_ctx())

    newer = SemanticMemory.objects.get(content__contains="TypeScript")
    python.refresh_from_db()
    assert python.status == MemoryStatus.EXPIRED
    assert python.expired_reason == CHANGE_REASON
    assert python.superseded_by_id == newer.pk
    assert newer.status == MemoryStatus.ACTIVE
    assert _status(hiking) == MemoryStatus.ACTIVE
    assert [c["kind"] for c in output["rounds"][0]["changes"]] == ["change"]


@pytest.mark.parametrize(
    ("before", "said", "gone"),
    [
        ("Leo 今年三十二岁", "我现在三十三了。", "三十二"),
        ("Leo loves sushi more than anything", "I'm not into sushi anymore, weirdly.", "loves sushi"),
        ("Leo is training for the marathon", "I'm no longer training for the marathon.", "is training"),
    ],
)
def test_a_change_told_in_chat_retires_the_older_fact_offline(leo, before, said, gone):
    # The fact light sleep writes must read back to its slot: deep sleep retires by what a fact's own text says.
    old = _memory(leo, before, observed="2026-10-01T10:00:00+08:00", source_day=dt.date(2026, 10, 1))
    conversation = ConversationFactory(person=leo)
    MessageFactory(
        conversation=conversation,
        role=Role.USER,
        content=said,
        created_at=timezone.make_aware(dt.datetime(2026, 11, 26, 21, 0)),
    )

    light_sleep(_ctx())
    deep_sleep(_ctx())

    assert _status(old) == MemoryStatus.EXPIRED
    active = SemanticMemory.objects.filter(person=leo, status=MemoryStatus.ACTIVE).values_list("content", flat=True)
    assert active and not any(gone in content for content in active)


def test_merge_keeps_every_source_restorable_and_unions_provenance(leo, maya):
    first = _memory(maya, "Maya is allergic to peanuts", observed="2026-10-05T18:24:00+08:00")
    second = SemanticMemoryFactory(
        person=maya,
        content="Maya is allergic to peanuts",
        body={"observed_at": "2026-11-27T23:37:00+08:00", "source_conversations": [77]},
    )
    other_person = _memory(leo, "Maya is allergic to peanuts", observed="2026-11-01")

    output = deep_sleep(_ctx())

    merged = SemanticMemory.objects.get(status=MemoryStatus.ACTIVE, person=maya)
    assert merged.content == "Maya is allergic to peanuts"
    assert merged.body["observed_at"] == "2026-10-05T18:24:00+08:00"
    assert 77 in merged.body["source_conversations"]
    for source in (first, second):
        source.refresh_from_db()
        assert source.status == MemoryStatus.EXPIRED and source.superseded_by_id == merged.pk
        assert source.expired_reason == f"merged into #{merged.pk}"
        assert not source.pinned  # pin review unpins what merging retired
    assert _status(other_person) == MemoryStatus.ACTIVE
    merge_round = next(r for r in output["rounds"] if r["round"] == "merge")
    assert merge_round["changes"][0]["ids"] == [first.pk, second.pk, merged.pk]


def test_merge_of_different_people_is_refused(leo, maya):
    a = _memory(leo, "likes tea", observed="2026-10-01")
    b = _memory(maya, "likes tea", observed="2026-10-02")
    cross = {"merges": [{"ids": [a.pk, b.pk], "memory_type": "preference", "content": "likes tea"}]}
    with scripted(_all_quiet(**{"deep-sleep.merge": [cross]})):
        deep_sleep(_ctx())
    assert _status(a) == MemoryStatus.ACTIVE and _status(b) == MemoryStatus.ACTIVE
    assert SemanticMemory.objects.count() == 2


def test_split_replaces_a_multi_fact_memory_with_single_facts(maya):
    multi = _memory(maya, "Maya works as a nurse in Lisbon. Maya has a cat named Miso.", observed="2026-10-05")

    deep_sleep(_ctx())

    multi.refresh_from_db()
    parts = SemanticMemory.objects.filter(status=MemoryStatus.ACTIVE).order_by("id")
    assert [p.content for p in parts] == ["Maya works as a nurse in Lisbon.", "Maya has a cat named Miso."]
    assert all(p.person == maya for p in parts)
    assert multi.status == MemoryStatus.EXPIRED and multi.superseded_by_id == parts[0].pk


@pytest.mark.parametrize(
    "content",
    [
        "Leo的女儿小雨属虎，在杭州上幼儿园。她今年四岁，最喜欢画画和唱歌。",
        "Leo的女兒小雨屬虎，在杭州上幼兒園。這孩子今年四歲，最喜歡畫畫和唱歌。",
        "Maya works as a nurse in Lisbon. She has a cat named Miso and a dog.",
    ],
)
def test_split_leaves_a_memory_whole_when_a_part_leans_on_the_one_before(leo, content):
    whole = _memory(leo, content, observed="2026-10-05")

    deep_sleep(_ctx())

    assert _status(whole) == MemoryStatus.ACTIVE and SemanticMemory.objects.count() == 1


def test_incremental_mode_skips_rounds_one_and_three_when_nothing_changed(leo):
    _memory(leo, "Leo 的女儿小雨属羊", observed="2026-10-01")
    _memory(leo, "Leo 的女儿小雨属虎", observed="2026-11-26")
    SemanticMemory.objects.update(updated_at=timezone.now() - dt.timedelta(days=2))

    output = deep_sleep(_ctx(mode="incremental"))

    rounds = {r["round"]: r for r in output["rounds"]}
    assert output["mode"] == "incremental"
    assert rounds["contradiction_expiry"]["summary"].startswith("skipped")
    assert rounds["merge"]["summary"].startswith("skipped")
    assert rounds["split"]["summary"] == "no split candidates"
    assert rounds["pin_maintenance"]["summary"].endswith("changed")
    assert SemanticMemory.objects.filter(status=MemoryStatus.ACTIVE).count() == 2


def test_pin_review_unpins_retired_memories_and_caps_new_pins(leo):
    retired = SemanticMemoryFactory(person=leo, pinned=True, status=MemoryStatus.EXPIRED)
    keeper = SemanticMemoryFactory(person=leo, pinned=True)

    output = deep_sleep(_ctx())

    retired.refresh_from_db()
    keeper.refresh_from_db()
    assert not retired.pinned and keeper.pinned
    assert output["rounds"][3]["changes"][0]["action"] == "unpin"


_WORDS = ["女儿", "小雨", "属虎", "属羊", "杭州", "Python", "peanuts", "Lisbon", "喜欢", "the", "猫"]


@settings(max_examples=50, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["leo", "maya", None]), st.lists(st.sampled_from(_WORDS), max_size=4))))
def test_contradiction_groups_never_mix_people(rows):
    persons = {slug: PersonFactory(slug=slug) for slug in ("leo", "maya")}
    memories = [
        SemanticMemory(pk=index + 1, content=" ".join(words), person=persons.get(slug) if slug else None)
        for index, (slug, words) in enumerate(rows)
    ]
    for group in subject_groups(memories):
        assert len(group) >= 2
        assert len({memory_owner(m) for m in group}) == 1


def test_facts_of_two_unknown_humans_are_never_compared():
    first, second = ConversationFactory(person=None), ConversationFactory(person=None)
    memories = [
        SemanticMemory(pk=1, content="用户的女儿属虎", source_conversation=first),
        SemanticMemory(pk=2, content="用户的女儿属羊", source_conversation=second),
    ]
    assert subject_groups(memories) == []
    memories[1].source_conversation = first
    assert [[m.pk for m in group] for group in subject_groups(memories)] == [[1, 2]]


def test_two_memories_naming_each_other_as_successor_retire_only_one(leo):
    tiger = _memory(leo, "Leo 的女儿小雨属虎", observed="2026-11-01T08:00:00+08:00")
    goat = _memory(leo, "Leo 的女儿小雨属羊", observed="2026-11-02T08:00:00+08:00")
    answer = {
        "expire": [
            {"id": tiger.pk, "superseded_by": goat.pk, "kind": "contradiction", "reason": "zodiac"},
            {"id": goat.pk, "superseded_by": tiger.pk, "kind": "contradiction", "reason": "zodiac"},
        ]
    }
    quiet = {
        "deep-sleep.split": [{"splits": []}] * 3,
        "deep-sleep.merge": [{"merges": []}] * 3,
        "deep-sleep.pins": [{"unpin": [], "pin": []}] * 3,
    }
    with scripted({"deep-sleep.contradiction": [answer], **quiet}):
        deep_sleep(_ctx())
    assert sorted([_status(tiger), _status(goat)]) == [MemoryStatus.ACTIVE, MemoryStatus.EXPIRED]


def test_an_english_change_of_taste_is_a_change_not_a_contradiction(maya):
    coffee = _memory(maya, "Maya likes coffee", observed="2026-10-01T08:00:00+08:00")
    tea = _memory(maya, "Maya prefers green tea (used to like coffee)", observed="2026-11-26T08:00:00+08:00")

    deep_sleep(_ctx())

    coffee.refresh_from_db()
    assert (coffee.status, coffee.expired_reason, coffee.superseded_by_id) == (
        MemoryStatus.EXPIRED,
        CHANGE_REASON,
        tea.pk,
    )
    assert _status(tea) == MemoryStatus.ACTIVE


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("Maya lives in Berlin", "Maya moved to Munich"),
        ("Maya's daughter Lily is 7", "Lily just turned 8"),
        ("Maya doesn't like coffee", "Maya actually likes coffee now"),
        ("Leo 住在杭州", "Leo 搬到深圳了"),
        ("Leo 最喜欢的电影是《海上钢琴师》", "Leo 现在最喜欢的电影是《奥本海默》"),
        ("Leo 的儿子小宝三岁", "小宝满四岁了"),
    ],
)
def test_a_newer_fact_in_the_same_slot_supersedes_the_older_even_when_the_model_says_nothing(leo, maya, older, newer):
    person = leo if "Leo" in older else maya
    old = _memory(person, older, observed="2026-10-01T10:00:00+08:00")
    new = _memory(person, newer, observed="2026-11-26T10:00:00+08:00")
    keeps = _memory(person, "Maya is a nurse" if person == maya else "Leo 对花生过敏", observed="2026-10-01")

    with scripted(_all_quiet()):
        deep_sleep(_ctx())

    old.refresh_from_db()
    assert (old.status, old.expired_reason, old.superseded_by_id) == (MemoryStatus.EXPIRED, CHANGE_REASON, new.pk)
    assert _status(new) == MemoryStatus.ACTIVE and _status(keeps) == MemoryStatus.ACTIVE


def test_a_fact_restated_in_another_conversation_leaves_one_active_memory(maya):
    first = _memory(maya, "Maya is vegetarian", observed="2026-10-01", source_conversation=ConversationFactory())
    again = _memory(maya, "Maya is still vegetarian", observed="2026-11-26", source_conversation=ConversationFactory())

    with scripted(_all_quiet()):
        deep_sleep(_ctx())

    active = SemanticMemory.objects.filter(person=maya, status=MemoryStatus.ACTIVE)
    assert active.count() == 1
    assert set(active.get().body["source_conversations"]) >= {
        first.source_conversation_id,
        again.source_conversation_id,
    }


def test_the_contradiction_round_groups_one_slot_without_a_shared_word(maya):
    # As a model may write them: no word in common, each with the slot it was asked to give.
    job = {"subject": "self", "attribute": "job"}
    memories = [
        SemanticMemoryFactory(person=maya, content="Maya cares for patients", body={"slot": {**job, "value": "nurse"}}),
        SemanticMemoryFactory(person=maya, content="Paramedic since May", body={"slot": {**job, "value": "medic"}}),
    ]
    assert [sorted(m.pk for m in group) for group in subject_groups(memories)] == [sorted(m.pk for m in memories)]


def test_offline_merge_takes_a_fact_nearly_contained_in_another_but_not_another_number(leo, maya):
    short = _memory(leo, "Leo 是一名软件工程师", observed="2026-11-26")
    long = _memory(leo, "Leo 在杭州工作，是一名后端软件工程师", observed="2026-10-01")
    seven = _memory(maya, "Maya ran 7 km along the river on Sunday", observed="2026-10-01")
    seventeen = _memory(maya, "Maya ran 17 km along the river on Sunday", observed="2026-10-01")

    deep_sleep(_ctx())

    merged = SemanticMemory.objects.get(person=leo, status=MemoryStatus.ACTIVE)
    assert merged.content == long.content and {_status(short), _status(long)} == {MemoryStatus.EXPIRED}
    assert _status(seven) == _status(seventeen) == MemoryStatus.ACTIVE


def test_offline_merge_reads_a_negation_in_traditional_characters_as_one(leo):
    # 沒 is 没: a fact and its denial are two facts, never merged into the older's words.
    without = _memory(leo, "Leo的女兒小雨沒有養一隻貓", observed="2026-10-01")
    with_cat = _memory(leo, "Leo的女兒小雨有養一隻貓", observed="2026-11-26")

    deep_sleep(_ctx())

    assert _status(with_cat) == MemoryStatus.ACTIVE
    assert _status(without) == MemoryStatus.ACTIVE and SemanticMemory.objects.filter(person=leo).count() == 2


def test_a_night_compares_the_stored_vectors_and_embeds_only_what_has_none(leo, maya, concept_embeddings):
    memories = [
        _memory(maya, "Maya has a peanut allergy", observed="2026-10-01"),
        _memory(maya, "Maya is allergic to peanuts", observed="2026-10-02"),
        _memory(maya, "Maya took a flight to Lisbon", observed="2026-10-03"),
        _memory(leo, "Leo is allergic to peanuts", observed="2026-10-04"),  # alone of his owner: never embedded
    ]
    fresh = similar_pairs(memories, threshold=0.9)
    assert sum(len(r["input"]) for r in concept_embeddings.requests) == 3  # Maya's three; Leo has no pair to make
    embed_backfill_run()
    concept_embeddings.requests.clear()

    stored = similar_pairs(memories, threshold=0.9)
    newer = _memory(maya, "Maya's terrier is called Rex", observed="2026-10-05")
    with_newer = similar_pairs([*memories, newer], threshold=0.9)

    assert [(a, b) for a, b, _ in stored] == [(a, b) for a, b, _ in fresh] == [(memories[0].pk, memories[1].pk)]
    assert stored[0][2] == pytest.approx(fresh[0][2], abs=1e-3)  # stored vectors are half floats
    assert [r["input"] for r in concept_embeddings.requests] == [[newer.content]]
    assert with_newer == stored
    concept_embeddings.requests.clear()
    with CaptureQueriesContext(connection) as next_night:
        similar_pairs([*memories, newer], threshold=0.9)
    assert concept_embeddings.requests == []  # the newer one was stored, as the backfill would have
    assert len(next_night.captured_queries) == 1  # the stored vectors; nothing left to read and embed
    assert embed_backfill_run().embedded == 0  # nor does the backfill embed it again


@pytest.mark.local_embeddings
def test_close_embeddings_offer_merge_candidates_within_one_person_only(leo, maya):
    same = [
        _memory(maya, "Maya 的女儿七岁", observed="2026-10-01"),
        _memory(maya, "Maya 的女儿今年七岁了", observed="2026-11-26"),
    ]
    other = _memory(leo, "Maya 的女儿七岁", observed="2026-11-26")
    memories = [*same, other]

    assert {(a, b) for a, b, _ in similar_pairs(memories, threshold=0.0) if other.pk in (a, b)} == set()
    assert merge_candidates(memories) == [sorted(m.pk for m in same)]


@pytest.mark.parametrize("apostrophe", ["'", "\u2019"])
def test_the_offline_merge_reads_a_phones_apostrophe_as_a_straight_one(apostrophe):
    memories = [
        {"id": 1, "person": 7, "type": "preference", "content": "Maya likes coffee with oat milk"},
        {"id": 2, "person": 7, "type": "preference", "content": f"Maya doesn{apostrophe}t like coffee with oat milk"},
    ]
    payload = {"memories": "\n".join(json.dumps(memory) for memory in memories), "candidates": [[1, 2]]}

    # A fact and its denial are never merged as near-duplicates.
    assert merge_answer(payload) == {"merges": []}


def test_a_facts_subject_words_are_the_same_in_either_script(leo):
    # 喜歡 is the relation word 喜欢, not a subject every "likes" fact would be grouped under.
    traditional = SemanticMemoryFactory(person=leo, content="Leo 喜歡咖啡，經常去那家店")
    simplified = SemanticMemoryFactory(person=leo, content="Leo 喜欢咖啡，经常去那家店")
    assert subject_keywords(traditional) == subject_keywords(simplified) == {"咖啡", "那家店"}
