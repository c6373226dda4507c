"""A chat line is judged with the turns beside it (memory.search._context)."""

from __future__ import annotations

import datetime as dt
import math
import random

import pytest
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from conversations.models import Role
from memory.search import _context, message_source
from memory.search._context import ASKING_SHIFT, NEIGHBOUR_PULL, lines_judged
from memory.search._fusion import MAX_QUERY_LINES, PULL_MARGIN, Hit, _lines_combined, hit_order, query_lines
from memory.selectors import RECALL_LIMIT, memory_recall
from tests.factories import ConversationFactory, MessageFactory, PersonFactory

pytestmark = pytest.mark.django_db


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


def _lines(conversation, *texts: str):
    start = timezone.now() - dt.timedelta(hours=1)
    roles = (Role.USER, Role.ASSISTANT)
    return [
        MessageFactory(
            conversation=conversation, role=roles[i % 2], content=text, created_at=start + dt.timedelta(minutes=i)
        )
        for i, text in enumerate(texts)
    ]


def test_a_line_is_pulled_halfway_toward_its_better_neighbour_and_never_pushed_down():
    person = PersonFactory()
    told, detail, later = _lines(
        ConversationFactory(person=person),
        "For my birthday I got a bike.",
        "A red one, with a bell!",
        "Anyway, dinner.",
    )
    (elsewhere,) = _lines(ConversationFactory(person=person), "Just a line.")
    scores = {told.pk: 0.8, detail.pk: 0.1, later.pk: 0.05, elsewhere.pk: 0.1}
    hits = [Hit(source="session", id=pk, score=score) for pk, score in scores.items()]
    source = message_source(name="session", person_id=person.pk, since=None, until=None, channel=None)

    assert lines_judged(hits=hits, sources=[source], using=DEFAULT_DB_ALIAS, top=len(hits))

    after = {hit.id: hit.score for hit in hits}
    assert after[told.pk] == 0.8  # its neighbour is weaker: it keeps its score
    expected = _logit(0.1) + NEIGHBOUR_PULL * (_logit(0.8) - _logit(0.1))
    assert _logit(after[detail.pk]) == pytest.approx(expected)
    assert after[later.pk] > 0.05 and after[later.pk] < after[detail.pk]  # pulled toward the detail, less far
    assert after[elsewhere.pk] == 0.1  # another conversation's line is nobody's neighbour


# Greeted first, the question still only asks: a greeting and a pleasantry name nothing.
@pytest.mark.parametrize(
    "question", ["How was Thanksgiving?", "Hi Hal! So good to hear from you. How was Thanksgiving?"]
)
def test_a_line_that_only_asks_pulls_its_answer_up_and_is_lowered_itself(question):
    person = PersonFactory()
    asked, answer = _lines(ConversationFactory(person=person), question, "Luis and Rosa had me over, twenty people!")
    hits = [Hit(source="session", id=asked.pk, score=0.6), Hit(source="session", id=answer.pk, score=0.2)]
    source = message_source(name="session", person_id=person.pk, since=None, until=None, channel=None)

    assert lines_judged(hits=hits, sources=[source], using=DEFAULT_DB_ALIAS, top=len(hits))

    after = {hit.id: hit.score for hit in hits}
    # The answer is pulled toward what the question scored before it was lowered.
    assert _logit(after[answer.pk]) == pytest.approx(_logit(0.2) + NEIGHBOUR_PULL * (_logit(0.6) - _logit(0.2)))
    assert _logit(after[asked.pk]) == pytest.approx(_logit(0.6) + ASKING_SHIFT)
    assert after[answer.pk] > after[asked.pk]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_recall_finds_what_was_said_above_the_question_that_asked_about_it(language, monkeypatch):
    person = PersonFactory()
    lines = {
        "en": (
            "How was Thanksgiving dinner with your neighbours?",
            "Thanksgiving was at Luis and Rosa's, like twenty people.",
        ),
        "zh": ("你们端午节去哪玩了？", "端午节我们一家去了千岛湖，住了两晚。"),
    }[language]
    _lines(ConversationFactory(person=person), "Morning!", "Good morning!", *lines, "Anyway, gotta run.", "Bye!")
    query = {"en": "Where did I spend Thanksgiving?", "zh": "我端午节去哪了？"}[language]

    def first() -> str:
        return memory_recall(query=query, person=person, memory_types=["session"])[0]["snippet"]

    assert first() == lines[1]
    monkeypatch.setattr(_context, "ASKING_SHIFT", 0.0)
    assert first() == lines[0]  # without the shift, the question ranked first


@pytest.mark.parametrize("seed", range(5))
def test_the_first_hits_come_out_as_a_pull_of_every_hit_would_order_them(seed):
    # Only the first ``top`` lines' neighbours are looked up; a line further down still rises beside one of them.
    rng = random.Random(seed)
    person = PersonFactory()
    lines = [line for _ in range(3) for line in _lines(ConversationFactory(person=person), *["a line"] * 12)]
    scores = {line.pk: rng.random() for line in lines}
    source = message_source(name="session", person_id=person.pk, since=None, until=None, channel=None)

    def pulled(top: int) -> list[tuple[int, float]]:
        hits = [Hit(source="session", id=pk, score=score, ranks={"fts": 1}) for pk, score in scores.items()]
        hits.sort(key=hit_order)
        lines_judged(hits=hits, sources=[source], using=DEFAULT_DB_ALIAS, top=top)
        return [(hit.id, hit.score) for hit in sorted(hits, key=hit_order)]

    assert pulled(top=8)[:8] == pulled(top=len(lines))[:8]


def test_recall_reads_no_further_than_the_hits_the_pull_orders_exactly():
    # memory_recall reads limit + RECALL_LIMIT hits (facts first); the pull orders limit + PULL_MARGIN exactly.
    assert RECALL_LIMIT <= PULL_MARGIN


def test_other_sources_are_left_as_they_are():
    hits = [Hit(source="semantic", id=1, score=0.3), Hit(source="semantic", id=2, score=0.9)]
    source = message_source(name="session", person_id=None, since=None, until=None, channel=None)
    assert not lines_judged(hits=hits, sources=[source], using=DEFAULT_DB_ALIAS, top=len(hits))
    assert [hit.score for hit in hits] == [0.3, 0.9]


def test_recall_returns_lines_in_the_order_of_their_pulled_scores():
    person = PersonFactory()
    _lines(
        ConversationFactory(person=person),
        "Which city did you move to in spring?",
        "Lisbon, near the river, and the city is lovely in spring.",
        "Spring cleaning is done.",
    )
    found = memory_recall(query="city spring", person=person, memory_types=["session"])
    scores = [hit["score"] for hit in found]
    assert len(found) >= 2 and scores == sorted(scores, reverse=True)


def test_a_query_of_several_lines_is_also_matched_by_its_last_lines():
    assert query_lines("what is my cat called?") == []
    lines = [f"line {n}" for n in range(12)]
    assert query_lines("\n".join(["", *lines, "  "])) == lines[-MAX_QUERY_LINES:]


def test_a_rows_similarity_is_the_mean_of_the_whole_querys_and_its_nearest_lines():
    whole = [("semantic", 1, 0.5), ("semantic", 2, 0.8), ("semantic", 9, None)]
    by_line = [[("semantic", 1, 0.9), ("semantic", 3, 0.7)], [("semantic", 1, 0.6), ("semantic", 2, 0.4)]]

    combined = {(source, row_id): sim for source, row_id, sim in _lines_combined(whole=whole, by_line=by_line)}

    assert combined[("semantic", 1)] == pytest.approx((0.5 + 0.9) / 2)  # its nearest line counts
    # Not returned by a search: that search's lowest similarity (0.7 for the first line, 0.5 for the whole).
    assert combined[("semantic", 2)] == pytest.approx((0.8 + 0.7) / 2)
    assert combined[("semantic", 3)] == pytest.approx((0.5 + 0.7) / 2)
    assert combined[("semantic", 9)] is None  # no vector yet: left for the keyword branches
