"""A query of several lines is judged by what its first hits share (memory.search._feedback)."""

from __future__ import annotations

import pytest
from django.db import DEFAULT_DB_ALIAS

from anima.core.embeddings import embedding_model
from memory.embedding import embed_backfill_run
from memory.search import entity_source, hybrid_search, search_query_build
from memory.search._feedback import FEEDBACK_POOL, feedback_apply
from memory.search._fusion import Hit, _calibrated, hit_order, query_fit
from tests.factories import PersonFactory, SemanticMemoryFactory

pytestmark = pytest.mark.django_db


def _source(person):
    return entity_source(name="semantic", where_sql="TRUE", person_id=person.pk, since=None, until=None)


def test_a_hit_near_the_first_ones_rises_one_far_from_them_falls_and_the_best_keeps_its_score(concept_embeddings):
    person = PersonFactory()
    texts = ("The surgeon operated", "Hospital after the operation", "An operation in May", "She adopted a terrier")
    first_a, first_b, first_c, dog = (SemanticMemoryFactory(person=person, content=text) for text in texts)
    knee = SemanticMemoryFactory(person=person, content="Her knee surgery")
    unembedded = SemanticMemoryFactory(person=person, content="The surgeon again")
    embed_backfill_run()
    unembedded.content = "The surgeon, edited"  # an edited row has no vector until the next backfill
    unembedded.save()
    scores = {first_a.pk: 0.7, first_b.pk: 0.6, first_c.pk: 0.55, dog.pk: 0.3, knee.pk: 0.25, unembedded.pk: 0.2}
    hits = [Hit(source="semantic", id=pk, score=score) for pk, score in scores.items()]

    changed = feedback_apply(
        hits=hits, sources=[_source(person)], model=embedding_model(), using=DEFAULT_DB_ALIAS, top=len(hits)
    )

    after = {hit.id: hit.score for hit in hits}
    assert changed
    assert after[knee.pk] > after[dog.pk]  # the same theme as the first hits, no word of theirs
    assert after[dog.pk] < 0.3
    # The best hit is the anchor: it keeps its score, and what is offered beside it is measured against it.
    assert after[first_a.pk] == pytest.approx(0.7)
    # A hit without a vector yet (remembered a minute ago): its meaning is not known, and its score stands.
    assert after[unembedded.pk] == pytest.approx(0.2)


def test_one_clear_hit_is_not_blurred_by_two_weak_ones_beside_it(concept_embeddings):
    person = PersonFactory()
    texts = ("The surgeon operated", "A terrier", "A puppy", "Hospital after the operation", "The dog and the pet")
    clear, weak_a, weak_b, surgery, dog = (SemanticMemoryFactory(person=person, content=text) for text in texts)
    embed_backfill_run()
    scores = {clear.pk: 0.6, weak_a.pk: 0.03, weak_b.pk: 0.02, surgery.pk: 0.01, dog.pk: 0.01}
    hits = [Hit(source="semantic", id=pk, score=score) for pk, score in scores.items()]

    feedback_apply(hits=hits, sources=[_source(person)], model=embedding_model(), using=DEFAULT_DB_ALIAS, top=10)

    after = {hit.id: hit.score for hit in hits}
    assert after[surgery.pk] > after[dog.pk]  # the clear hit's theme, though two of the first three are dogs


def test_hits_past_the_pool_keep_their_order_below_it(concept_embeddings):
    person = PersonFactory()
    # Three themes in turn, the first three hits all of the first: hits of the others in the pool fall.
    themes = ("the operation", "a trip", "a puppy")
    memories = [
        SemanticMemoryFactory(person=person, content=f"{themes[(i // 3) % 3]} {i}") for i in range(FEEDBACK_POOL + 5)
    ]
    embed_backfill_run()
    hits = [
        Hit(source="semantic", id=memory.pk, score=0.9 - 0.01 * i, ranks={"dense": i + 1})
        for i, memory in enumerate(memories)
    ]

    assert feedback_apply(hits=hits, sources=[_source(person)], model=embedding_model(), using=DEFAULT_DB_ALIAS, top=10)

    pooled, past = hits[:FEEDBACK_POOL], hits[FEEDBACK_POOL:]
    assert min(hit.score for hit in pooled) >= max(hit.score for hit in past)
    assert [hit.id for hit in sorted(past, key=hit_order)] == [hit.id for hit in past]


def test_without_two_vectors_there_is_nothing_to_compare(concept_embeddings):
    person = PersonFactory()
    only = SemanticMemoryFactory(person=person, content="The surgeon operated")
    embed_backfill_run()
    hits = [Hit(source="semantic", id=only.pk, score=0.4), Hit(source="semantic", id=only.pk + 1000, score=0.3)]

    assert not feedback_apply(
        hits=hits, sources=[_source(person)], model=embedding_model(), using=DEFAULT_DB_ALIAS, top=10
    )
    assert [hit.score for hit in hits] == [0.4, 0.3]


_EVERYDAY = (
    "Bought groceries on Tuesday",
    "Painted the kitchen blue",
    "Likes green tea in the morning",
    "Reads detective novels",
    "Moved to a new flat in spring",
    "Plays chess with a neighbour",
    "Learning to bake sourdough",
    "Her brother lives in Porto",
    "Forgot the umbrella again",
    "Started running on Sundays",
    "Watches old films at night",
    "Planted tomatoes on the balcony",
)


def test_a_dialogues_theme_lifts_a_memory_sharing_no_word_with_it_a_question_or_meaning_alone_is_left_alone(
    concept_embeddings,
):
    person = PersonFactory()
    # The hospital is a theme of this person's memories, not most of them: in a store of five, a word three of them
    # hold would be a common one.
    for text in _EVERYDAY:
        SemanticMemoryFactory(person=person, content=text)
    for text in ("The hospital called about the operation", "Hospital visit, operation day", "The hospital again"):
        SemanticMemoryFactory(person=person, content=text)
    surgeon = SemanticMemoryFactory(person=person, content="The surgeon was kind")
    trip = SemanticMemoryFactory(person=person, content="A weekend trip with the puppy, a long day")
    embed_backfill_run()
    dialogue = "How was the hospital?\nLong. I still think about the trip, the weekend"

    found = {
        hit.id: hit
        for hit in hybrid_search(
            query=search_query_build(text=dialogue), sources=[_source(person)], limit=10, text=dialogue
        )
    }
    fit = query_fit(dialogue)
    fused = {
        key: _calibrated(keyword_z=hit.keyword_z, dense_z=hit.dense_z, dense=True, fit=fit)
        for key, hit in found.items()
    }
    # The surgeon shares no word with the dialogue, the trip three: the first hits' theme (the hospital) brings the
    # surgeon closer to the trip than their words and meaning alone put it.
    assert found[surgeon.pk].score - found[trip.pk].score > fused[surgeon.pk] - fused[trip.pk]

    def rescored(query: str, branches: tuple[str, ...] = ("fts", "trigram", "dense")) -> bool:
        """Whether any hit's score is other than its branches' calibrated one (memories are pulled by nothing)."""
        found = hybrid_search(
            query=search_query_build(text=query), sources=[_source(person)], limit=10, text=query, branches=branches
        )
        fit = query_fit(query)
        calibrated = (_calibrated(keyword_z=hit.keyword_z, dense_z=hit.dense_z, dense=True, fit=fit) for hit in found)
        return any(hit.score != pytest.approx(score) for hit, score in zip(found, calibrated, strict=True))

    assert rescored(dialogue)
    assert not rescored(dialogue.replace("\n", " "))  # the same words as one question are left as fused
    assert not rescored(dialogue, branches=("dense",))  # meaning alone: feedback would only repeat it
