"""Calibrated scores: the relevance gate of passive recall, ``min_score``, and facts above the lines they came from."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from anima.api.testing import operator_client
from memory.benchmarks._common import smalltalk_lines
from memory.embedding import embed_backfill_run
from memory.models import SemanticMemory
from memory.passive import passive_chosen, passive_context, passive_recall
from memory.search import entity_source, hybrid_search, query_fit, score_fuse, search_query_build
from memory.search._fusion import _calibrated
from memory.selectors import AUTOBIOGRAPHICAL, SEMANTIC, SESSION, _facts_first, memory_recall
from tests.factories import (
    ContentBlockFactory,
    ConversationFactory,
    DiaryEntryFactory,
    MessageFactory,
    PersonFactory,
    RuntimeConfigFactory,
    SemanticMemoryFactory,
)

# A person's memories, several sharing an everyday word with small talk (thanks, cool, tomorrow, 吃). A memory
# holding a small-talk word itself (笑得哈哈哈 for 哈哈哈, 明天要去 for 明天见, 笑 for 笑死我了) may still be
# offered for it: a known limit.
MEMORIES = (
    "Maya has a cat named Miso",
    "Maya is allergic to peanuts",
    "Maya works as a nurse in a hospital in Lisbon",
    "Thanks to her sister, Maya found a flat near the river",
    "Maya thinks the new cinema downtown is cool",
    "Maya flies to Porto tomorrow for her cousin's wedding",
    "Refactor a tool in three steps: pin the behaviour with a test, change the structure, clean up names",
    "Maya 下周要去医院复查",
    "Maya 喜欢吃辣的川菜",
    "Maya 周末去看了一场脱口秀",
    "Maya is learning Portuguese for her citizenship exam",
    "Maya's brother Tiago plays the cello",
)


@pytest.fixture
def maya_conversation():
    person = PersonFactory(slug="maya")
    for content in MEMORIES:
        SemanticMemoryFactory(person=person, content=content)
    embed_backfill_run()
    return ConversationFactory(person=person)


def _offered(conversation, message: str) -> list[str]:
    return [hit["snippet"] for hit in passive_recall(conversation=conversation, user_message=message).hits]


def _holding(conversation, *turns: tuple[str, str]):
    """``conversation`` after ``turns`` (role, text), a minute apart, the latest a minute ago."""
    now = timezone.now()
    for index, (role, text) in enumerate(turns):
        MessageFactory(
            conversation=conversation, role=role, content=text, created_at=now - timedelta(minutes=len(turns) - index)
        )
    return conversation


# A topical exchange small talk may follow: it must not drag the memories it is about into the turn.
TOPICAL = (
    ("user", "My cat Miso has been sneezing all week, I'm worried about her"),
    ("assistant", "Poor Miso! Is she still eating? If the sneezing goes on, a vet should see her."),
)
# Memories holding the everyday words of small talk themselves.
CHATTY = ("Maya said thanks a lot to the nurses who looked after her", "Maya 笑得哈哈哈，说那部电影太好笑了")


@pytest.mark.local_embeddings
def test_passive_recall_offers_nothing_for_small_talk(maya_conversation):
    lines = smalltalk_lines(lang="en") + smalltalk_lines(lang="zh")
    assert len(lines) >= 60

    offered = {line: _offered(maya_conversation, line) for line in lines}

    assert {line: hits for line, hits in offered.items() if hits} == {}


@pytest.mark.local_embeddings
def test_small_talk_after_a_topical_turn_offers_nothing_even_where_a_memory_holds_its_words(maya_conversation):
    for content in CHATTY:
        SemanticMemoryFactory(person=maya_conversation.person, content=content)
    embed_backfill_run()
    conversation = _holding(maya_conversation, *TOPICAL)

    lines = ("thanks a lot", "ok, thanks!", "哈哈哈", "嗯嗯，好的谢谢")

    assert {line: _offered(conversation, line) for line in lines} == {line: [] for line in lines}
    assert _offered(conversation, "Does Miso still sneeze?")[:1] == ["Maya has a cat named Miso"]


@pytest.mark.local_embeddings
def test_a_short_reaction_after_a_topical_turn_is_not_offered_that_turns_memories(maya_conversation):
    conversation = _holding(maya_conversation, *TOPICAL)

    # A word said twice is one word: "nite nite" reacts as "nite" would.
    lines = ("love that", "that's insane", "deal", "稳", "安排", "nite nite", "yikes yikes")

    assert {line: _offered(conversation, line) for line in lines} == {line: [] for line in lines}
    # A question as short still reads on from the exchange it follows.
    assert _offered(conversation, "Still sneezing?")[:1] == ["Maya has a cat named Miso"]


@pytest.mark.local_embeddings
def test_a_follow_up_finds_the_memory_of_the_turn_it_answers(maya_conversation):
    person = maya_conversation.person
    for content in ("Maya's grandmother Rosa had knee surgery in March", "Maya 的外婆上个月做了膝盖手术"):
        SemanticMemoryFactory(person=person, content=content)
    embed_backfill_run()
    asked = {
        "How is Rosa's knee since the surgery?": "Much better, she walks on her own again!",
        "你外婆的膝盖手术恢复得怎么样？": "好多了，已经能自己走路了！",
    }

    for question, answer in asked.items():
        conversation = _holding(ConversationFactory(person=person), ("assistant", question))
        alone = _offered(ConversationFactory(person=person), answer)
        after = _offered(conversation, answer)

        # Alone, the answer says nothing of a knee; after the question it answers, it is about one.
        assert not any("knee" in line or "膝盖" in line for line in alone)
        assert any("knee" in line or "膝盖" in line for line in after), (question, after)


@pytest.mark.local_embeddings
def test_the_message_and_the_exchange_it_ends_each_offer_their_likeliest_memory(maya_conversation):
    person = maya_conversation.person
    SemanticMemoryFactory(person=person, content="Maya's grandmother Rosa had knee surgery in March")
    embed_backfill_run()
    answer = "Much better! She even walked with me to the new cinema downtown"
    conversation = _holding(ConversationFactory(person=person), ("assistant", "How is Rosa's knee since the surgery?"))

    # The message speaks of the cinema; the exchange it ends, of Rosa's knee.
    assert _offered(ConversationFactory(person=person), answer) == ["Maya thinks the new cinema downtown is cool"]
    assert sorted(_offered(conversation, answer)) == [
        "Maya thinks the new cinema downtown is cool",
        "Maya's grandmother Rosa had knee surgery in March",
    ]


@pytest.mark.local_embeddings
def test_a_question_offers_its_fact_whatever_was_talked_about_before(maya_conversation):
    conversation = _holding(maya_conversation, *TOPICAL)

    assert _offered(conversation, "Can I eat a satay sandwich with my peanut allergy?")[:1] == [
        "Maya is allergic to peanuts"
    ]


@pytest.mark.local_embeddings
def test_in_traditional_characters_small_talk_offers_nothing_and_a_question_offers_its_simplified_fact(
    maya_conversation,
):
    conversation = _holding(
        maya_conversation, ("user", "我週末去看了脫口秀，笑死我了"), ("assistant", "哈哈，講了什麼？")
    )

    # Each names words in traditional characters unless they are read as the simplified chat words they are.
    lines = ("謝謝你喔", "晚安囉，明天見", "沒事啦", "哈囉哈囉", "真的假的")

    assert {line: _offered(conversation, line) for line in lines} == {line: [] for line in lines}
    assert _offered(maya_conversation, "我下週去醫院複查要帶什麼？")[:1] == ["Maya 下周要去医院复查"]


def test_the_context_is_the_turns_before_the_message_not_a_stored_copy_of_it():
    conversation = _holding(
        ConversationFactory(), ("user", "one"), ("assistant", "two"), ("user", "three"), ("assistant", "four")
    )
    assert passive_context(conversation=conversation, user_message="five", count=2) == ["three", "four"]
    # A tool round resends its user message, stored already.
    _holding(conversation, ("user", "five"))
    assert passive_context(conversation=conversation, user_message="five", count=2) == ["three", "four"]
    assert passive_context(conversation=conversation, user_message="five", count=0) == []


@pytest.mark.local_embeddings
def test_passive_recall_offers_the_fact_a_question_asks_about_and_not_what_only_shares_a_word(maya_conversation):
    assert _offered(maya_conversation, "What's my cat's name?") == ["Maya has a cat named Miso"]
    assert _offered(maya_conversation, "Can I eat a satay sandwich with my peanut allergy?") == [
        "Maya is allergic to peanuts"
    ]


@pytest.mark.local_embeddings
def test_scores_are_chances_comparable_across_queries(maya_conversation):
    person = maya_conversation.person
    asked = memory_recall(query="What's my cat's name?", person=person, memory_types=[SEMANTIC])
    chatted = memory_recall(query="haha ok", person=person, memory_types=[SEMANTIC])

    assert all(0.0 < hit["score"] < 1.0 for hit in asked + chatted)
    assert asked[0]["snippet"] == "Maya has a cat named Miso"
    # The best hit of a real question is likelier relevant than the best one small talk finds.
    assert asked[0]["score"] > 0.3 > max(hit["score"] for hit in chatted)
    assert [hit["score"] for hit in asked] == sorted((hit["score"] for hit in asked), reverse=True)


@pytest.mark.local_embeddings
def test_min_score_leaves_out_hits_less_likely_than_it(maya_conversation):
    person = maya_conversation.person
    every = memory_recall(query="Where does Maya work?", person=person, memory_types=[SEMANTIC])
    cut = (every[0]["score"] + every[-1]["score"]) / 2
    kept = memory_recall(query="Where does Maya work?", person=person, memory_types=[SEMANTIC], min_score=cut)

    assert every[0]["snippet"] == "Maya works as a nurse in a hospital in Lisbon"
    assert 0 < len(kept) < len(every)
    assert kept == [hit for hit in every if hit["score"] >= cut]
    with pytest.raises(ValueError, match="min_score"):
        memory_recall(query="Miso", person=person, min_score=1.5)


def test_the_api_takes_min_score_and_names_it_when_it_is_out_of_range():
    client = operator_client()
    SemanticMemoryFactory(content="Miso the cat sleeps on the sofa")

    response = client.get(reverse("api-recall"), {"q": "Miso", "min_score": "2"})
    assert response.status_code == 400 and "min_score" in response.json()

    assert client.get(reverse("api-recall"), {"q": "Miso", "min_score": "0.99"}).json()["results"] == []
    assert len(client.get(reverse("api-recall"), {"q": "Miso", "min_score": "0"}).json()["results"]) == 1


def test_a_fact_ranks_above_the_chat_line_it_was_made_from():
    person = PersonFactory()
    conversation = ConversationFactory(person=person)
    line = MessageFactory(
        conversation=conversation, role="assistant", content="Good call, with a peanut allergy never risk it"
    )
    fact = SemanticMemoryFactory(person=person, content="Maya is allergic to peanuts", source_conversation=conversation)

    results = memory_recall(query="peanut allergy", person=person)

    assert [(hit["memory_type"], hit["id"]) for hit in results[:2]] == [(SEMANTIC, fact.pk), (SESSION, line.pk)]
    assert results[0]["score"] >= results[1]["score"]


def test_a_fact_from_another_conversation_is_not_raised_above_a_line():
    person = PersonFactory()
    line = MessageFactory(
        conversation=ConversationFactory(person=person),
        role="user",
        content="My peanut allergy flared up again, the peanut sauce had peanuts",
    )
    other = SemanticMemoryFactory(
        person=person, content="Maya is allergic to peanuts", source_conversation=ConversationFactory(person=person)
    )

    results = memory_recall(query="peanut allergy", person=person)
    scores = {hit["id"]: hit["score"] for hit in results}

    assert scores[other.pk] <= scores[line.pk]


def test_in_a_chinese_query_a_shared_word_weighs_less_beside_meaning_than_in_an_english_one():
    # Row 1 holds the query's one word (no other row of 100 does) and is fairly near in meaning; row 2 holds no word
    # of it and is the nearest in meaning.
    dense = [("semantic", "dense", 2, 1, 0.86), ("semantic", "dense", 1, 2, 0.80)]
    dense += [("semantic", "dense", 10 + n, 3 + n, 0.78 - 0.0005 * n) for n in range(98)]
    rows = [("semantic", "fts", 1, 1, 0.5), *dense]

    english = score_fuse(rows=rows)
    chinese = score_fuse(rows=rows, fit="dense-zh")

    assert [hit.id for hit in english[:2]] == [1, 2]
    assert [hit.id for hit in chinese[:2]] == [2, 1]
    # Dense-only recall has no word to weigh: its order is the same in both.
    assert [hit.id for hit in score_fuse(rows=dense)] == [hit.id for hit in score_fuse(rows=dense, fit="dense-zh")]


def test_in_a_query_of_several_lines_a_shared_word_weighs_less_beside_meaning_than_in_a_one_line_english_one():
    # As above: row 1 holds one word of the query, row 2 is the nearest in meaning. A dialogue's words are many, and a
    # row sharing one of them says less than a row sharing the one word of a question.
    dense = [("semantic", "dense", 2, 1, 0.86), ("semantic", "dense", 1, 2, 0.80)]
    dense += [("semantic", "dense", 10 + n, 3 + n, 0.78 - 0.0005 * n) for n in range(98)]
    rows = [("semantic", "fts", 1, 1, 0.5), *dense]

    for several_lines in ("How was work?\nWhere does she work now?", "工作怎么样？\n她现在在哪工作？"):
        assert [hit.id for hit in score_fuse(rows=rows, fit=query_fit(several_lines))[:2]] == [2, 1]
    assert [hit.id for hit in score_fuse(rows=rows, fit=query_fit("Where does she work now?"))[:2]] == [1, 2]


# A reading's candidates: memory ids (shared between readings) with a calibrated score, found with vectors.
READING = st.dictionaries(st.integers(1, 12), st.floats(0.0, 1.0), max_size=8).map(
    lambda scores: sorted(
        ({"id": pk, "score": score, "scores": {"fts": 1.0, "dense": 0.5}} for pk, score in scores.items()),
        key=lambda hit: -hit["score"],
    )
)


@given(found=st.lists(READING, max_size=2), min_score=st.floats(0.0, 1.0), share=st.floats(0.0, 1.0))
def test_the_gate_offers_each_readings_likeliest_memory_that_clears_the_cut_off_and_nothing_below_it(
    found, min_score, share
):
    chosen = passive_chosen(found=found, min_score=min_score, min_share_of_best=share, min_relative_score=0.55)

    ids = [hit["id"] for hit in chosen]
    assert len(ids) == len(set(ids))
    # Each reading's best is offered when likely enough, at the better of its readings' scores, likeliest first.
    assert {reading[0]["id"] for reading in found if reading and reading[0]["score"] >= min_score} <= set(ids)
    best = {hit["id"]: max(h["score"] for r in found for h in r if h["id"] == hit["id"]) for hit in chosen}
    assert [hit["score"] for hit in chosen] == [best[pk] for pk in ids] == sorted(best.values(), reverse=True)
    # Nothing is offered that no reading scores at min_score and at share of that reading's best.
    assert all(
        any(h["id"] == pk and h["score"] >= max(min_score, r[0]["score"] * share) for r in found for h in r)
        for pk in ids
    )


# Each row found by some of the branches, with a score in each: BM25 and word similarity are never negative, a cosine
# may be.
BRANCH_SCORES = {
    "fts": st.floats(0.0, 20.0),
    "trigram": st.floats(0.0, 1.0),
    "dense": st.floats(-0.2, 1.0),
}
FOUND = st.lists(
    st.tuples(
        st.sampled_from(["semantic", "session"]),
        st.integers(1, 25),
        st.fixed_dictionaries({}, optional=BRANCH_SCORES),
    ),
    min_size=1,
    max_size=40,
    unique_by=lambda found: found[:2],
)


@given(found=FOUND, fit=st.sampled_from(["dense", "dense-zh"]))
def test_a_score_is_a_chance_that_never_falls_as_the_evidence_for_a_hit_grows(found, fit):
    rows = [(source, branch, row_id, 1, score) for source, row_id, scores in found for branch, score in scores.items()]

    hits = score_fuse(rows=rows, fit=fit)

    assert all(0.0 < hit.score < 1.0 for hit in hits)
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
    # A row found by every branch another row of its source was found by, scoring at least as well in each, is at
    # least as likely relevant, whichever calibration scores it.
    for a in hits:
        for b in hits:
            if a.source == b.source and all(a.scores.get(branch, -1.0) >= score for branch, score in b.scores.items()):
                assert a.score >= b.score


def _calibrated_by(hits, fit: str) -> list[float]:
    """The scores ``hits`` would have by calibration ``fit``."""
    return [_calibrated(keyword_z=hit.keyword_z, dense_z=hit.dense_z, dense=True, fit=fit) for hit in hits]


@pytest.mark.local_embeddings
def test_recall_scores_a_chinese_query_by_the_chinese_calibration_and_an_english_one_by_the_other(maya_conversation):
    person = maya_conversation.person
    source = entity_source(name="semantic", where_sql="TRUE", person_id=person.pk, since=None, until=None)

    for text, first, fit, other in (
        ("Maya 什么时候去医院复查？", "Maya 下周要去医院复查", "dense-zh", "dense"),
        ("Where does Maya work?", "Maya works as a nurse in a hospital in Lisbon", "dense", "dense-zh"),
    ):
        hits = hybrid_search(query=search_query_build(text=text), sources=[source], limit=10, text=text)

        assert SemanticMemory.objects.get(pk=hits[0].id).content == first
        assert [hit.score for hit in hits] == pytest.approx(_calibrated_by(hits, fit))
        assert [hit.score for hit in hits] != pytest.approx(_calibrated_by(hits, other))


@pytest.mark.local_embeddings
def test_recall_scores_a_query_of_several_lines_by_the_chinese_calibration_in_either_language(maya_conversation):
    person = maya_conversation.person
    source = entity_source(name="semantic", where_sql="TRUE", person_id=person.pk, since=None, until=None)

    for text, fit, other in (
        ("Maya's been so busy lately.\nWhere does she work these days?", "dense-zh", "dense"),
        ("Maya 最近好忙。\n她什么时候去医院复查？", "dense-zh", "dense"),
        ("Where does Maya work?", "dense", "dense-zh"),
    ):
        # The dense branch alone: the scores are the calibration's alone (no feedback from the first hits).
        hits = hybrid_search(
            query=search_query_build(text=text), sources=[source], limit=10, text=text, branches=["dense"]
        )

        assert hits
        assert [hit.score for hit in hits] == pytest.approx(_calibrated_by(hits, fit))
        assert [hit.score for hit in hits] != pytest.approx(_calibrated_by(hits, other))


def test_a_branch_found_by_few_rows_is_judged_as_among_many():
    # Filling a short pool with what its missing rows would score: the same single match of a rare word scores the
    # same in a source of two rows as in one of a hundred.
    alone = score_fuse(rows=[("semantic", "fts", 1, 1, 0.5), ("semantic", "fts", 2, 2, 0.1)])
    among = score_fuse(
        rows=[("semantic", "fts", 1, 1, 0.5), ("semantic", "fts", 2, 2, 0.1)]
        + [("semantic", "fts", 100 + n, 3 + n, 0.0) for n in range(98)]
    )

    assert alone[0].score == pytest.approx(among[0].score)
    assert alone[0].score > alone[1].score


def test_a_word_most_of_a_small_sources_rows_hold_does_not_stand_out_and_a_rare_one_still_does():
    # A new person's ten facts, nine of them naming the person: the name is a common word here, however few rows
    # there were to search; a word one of the ten holds is as strong as it would be among a hundred.
    named = [("semantic", "fts", n, n, 0.12) for n in range(1, 10)]
    common = score_fuse(rows=named, sizes={"semantic": 10})
    rare = score_fuse(rows=named[:1], sizes={"semantic": 10})

    assert common[0].score < score_fuse(rows=named)[0].score / 2
    assert rare[0].score == pytest.approx(score_fuse(rows=named[:1])[0].score)
    assert common[0].score < rare[0].score / 2


def test_a_word_every_row_of_a_small_source_holds_tells_them_apart_no_more_than_among_a_hundred_holding_it():
    # A person's five diary blocks, each naming her: BM25 tells them apart by their lengths only.
    scores = (0.050, 0.046, 0.044, 0.042, 0.040)
    five = score_fuse(rows=[("narrative", "fts", n, n, s) for n, s in enumerate(scores, 1)], sizes={"narrative": 5})
    hundred = score_fuse(
        rows=[("narrative", "fts", 5 * k + n, 5 * k + n, s) for k in range(20) for n, s in enumerate(scores, 1)],
        sizes={"narrative": 100},
    )
    rare = score_fuse(rows=[("narrative", "fts", 1, 1, 0.050)], sizes={"narrative": 5})

    assert five[0].score == pytest.approx(hundred[0].score)
    assert five[0].score < rare[0].score / 2


def test_her_name_in_each_of_her_diary_blocks_does_not_lift_them_to_the_one_fact_naming_her():
    maya = PersonFactory(slug="maya", display_name="Maya")
    blocks = (
        "Maya came to talk today. I learned that she is a nurse.",
        "Maya and I talked about her exam, which she passed, and about how relieved she felt afterwards.",
        "Maya was tired.",
        "I worried for Maya: her night shifts were long and the week ahead looked hard for both of us.",
        "Maya laughed at my joke.",
    )
    for day, text in enumerate(blocks, 1):
        ContentBlockFactory(person=maya, content=text, parent=DiaryEntryFactory(source_day=date(2026, 11, day)))
    SemanticMemoryFactory(person=maya, content="Maya's flat is near the river")
    for thing in ("has a cat named Miso", "is allergic to peanuts", "plays the cello", "likes jazz", "runs on Sundays"):
        SemanticMemoryFactory(person=maya, content=f"She {thing}")

    results = memory_recall(query="Maya", person=maya, branches=("fts", "trigram"))

    # Among her facts the name is a rare word, among her diary blocks a word every one holds.
    assert results[0]["snippet"] == "Maya's flat is near the river"
    blocks_found = [hit["score"] for hit in results if hit["memory_type"] == AUTOBIOGRAPHICAL]
    assert len(blocks_found) == 5 and max(blocks_found) < results[0]["score"] / 2


def test_in_a_new_persons_few_facts_a_word_most_of_them_hold_is_a_common_word():
    maya = PersonFactory(slug="maya", display_name="Maya")
    for thing in ("green tea", "the violin", "Lisbon", "hiking", "jazz", "sourdough", "chess", "tomatoes", "films"):
        SemanticMemoryFactory(person=maya, content=f"Her cat Miso likes {thing}")
    conversation = ConversationFactory(person=maya)
    for text in ("Long day at work.", "My boss praised the whole team today!", "Dinner was nice."):
        MessageFactory(conversation=conversation, role="user", content=text)

    results = memory_recall(query="Miso boss", person=maya, branches=("fts", "trigram"))

    # Every fact holds the cat's name, one line the word asked about: a fact that only names the cat is far weaker.
    assert "boss" in results[0]["snippet"]
    named = [hit["score"] for hit in results if hit["memory_type"] == SEMANTIC]
    assert len(named) == 9 and max(named) < results[0]["score"] / 4


def test_a_question_naming_the_person_finds_what_it_asks_not_every_row_naming_them():
    maya = PersonFactory(slug="maya", display_name="Maya Silva")
    SemanticMemoryFactory(person=maya, content="Maya is allergic to peanuts")
    SemanticMemoryFactory(person=maya, content="Maya has a cat named Miso")
    conversation = ConversationFactory(person=maya)
    for text in ("Good morning, Maya!", "Sleep well, Maya.", "A colleague offered me a satay sandwich with peanuts."):
        MessageFactory(conversation=conversation, role="assistant", content=text)

    def found(query: str) -> set[str]:
        return {hit["snippet"] for hit in memory_recall(query=query, person=maya, branches=("fts", "trigram"))}

    # Every row in her scope is hers: her name tells none apart, the word asked about does.
    asked = {"Maya is allergic to peanuts", "A colleague offered me a satay sandwich with peanuts."}
    assert found("Is Maya's peanut allergy serious?") == asked
    assert found("maya peanuts") == asked
    # Her name alone still finds the rows naming her, and a quoted query is searched as written.
    assert found("Maya") == {
        "Maya is allergic to peanuts",
        "Maya has a cat named Miso",
        "Good morning, Maya!",
        "Sleep well, Maya.",
    }
    assert "Good morning, Maya!" in found('"Maya" peanuts')
    # Someone else's name is a word like any other.
    other = PersonFactory(slug="leo", display_name="Leo")
    SemanticMemoryFactory(person=other, content="Leo met Maya at the hospital")
    assert found("Maya peanuts") == asked
    assert {hit["snippet"] for hit in memory_recall(query="Maya", person=other, branches=("fts",))} == {
        "Leo met Maya at the hospital"
    }


def test_rows_meaning_hardly_tells_apart_stay_close_and_a_clear_difference_still_counts():
    # A fact and the chat line it came from, as near the query as each other (a fresh install's two rows).
    close = score_fuse(rows=[("session", "dense", 1, 1, 0.863), ("semantic", "dense", 2, 2, 0.860)])
    apart = score_fuse(rows=[("session", "dense", 1, 1, 0.88), ("semantic", "dense", 2, 2, 0.80)])

    assert close[0].score / close[1].score < 2
    assert apart[0].score / apart[1].score > 10


def test_only_the_fact_that_answers_best_rises_above_the_lines_of_its_conversation():
    # Scores as recall found them for "Leo 的邮箱是什么" after demo: the e-mail line, then the conversation's facts.
    results = [
        {"memory_type": SESSION, "id": 11, "score": 0.209},
        {"memory_type": SESSION, "id": 12, "score": 0.176},
        {"memory_type": SEMANTIC, "id": 27, "score": 0.150},  # Leo 的邮箱是 leo@example.com
        {"memory_type": SEMANTIC, "id": 23, "score": 0.109},  # Leo 是后端负责人
        {"memory_type": SEMANTIC, "id": 50, "score": 0.300},  # made elsewhere
    ]
    sources = {0: {1}, 1: {1}, 2: {1}, 3: {1}, 4: {2}}

    ranked = _facts_first(results, sources=sources)

    assert [(hit["id"], hit["score"]) for hit in ranked] == [
        (50, 0.3),
        (27, 0.209),
        (11, 0.209),
        (12, 0.176),
        (23, 0.109),
    ]


@pytest.mark.local_embeddings
def test_passive_recall_offers_the_likeliest_memory_alone_not_a_nearly_as_likely_one_beside_it(maya_conversation):
    person = maya_conversation.person
    for content in (
        "Tiago, the brother of Maya, plays the cello",
        "Maya's brother Tiago lives in Porto with his wife",
        "Maya's cat Miso sleeps on the sofa all day",
        "Maya is allergic to peanuts and to shellfish",
        "Maya goes swimming every Saturday morning",
        "Maya swims at the public pool on weekends",
    ):
        SemanticMemoryFactory(person=person, content=content)
    embed_backfill_run()
    question = "What does Miso do all day?"
    scores = {
        hit["snippet"]: hit["score"]
        for hit in memory_recall(
            query=question, person=person, memory_types=[SEMANTIC], keyword_gate=True, global_only=True
        )
        if "Miso" in hit["snippet"]
    }
    best, other = sorted(scores.values(), reverse=True)
    assert best > other >= 0.9 * best  # the cat's two memories, nearly as likely

    # Which of the two is a little likelier is the model's call (it differs in the last digits between processors):
    # the gate offers that one alone.
    assert _offered(maya_conversation, question) == [max(scores, key=scores.get)]
    # At a share of 0.9 of the best (the default before), the gate offered both.
    RuntimeConfigFactory(section="memory.passive_recall", values={"min_share_of_best": 0.9})
    assert sorted(_offered(maya_conversation, question)) == sorted(scores)
