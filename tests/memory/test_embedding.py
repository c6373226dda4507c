from __future__ import annotations

import json
import math
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from anima.core.embeddings import embedding_model
from conversations.models import Message
from memory.embedding import embed_backfill_run, embed_pending_count
from memory.forgetting import memory_forget
from tests.embeddings_server import CONCEPT_DIM, concept_vector
from tests.factories import (
    ContentBlockFactory,
    ConversationFactory,
    MessageFactory,
    PersonFactory,
    SemanticMemoryFactory,
    TemporalSummaryFactory,
)


def _stored() -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT kind, row_id, model, dim, person_id, conversation_id FROM vectors ORDER BY kind, row_id")
        return cursor.fetchall()


def test_backfill_embeds_every_source_once_and_then_has_nothing_pending(concept_embeddings):
    memory = SemanticMemoryFactory(content="Maya had surgery in May")
    block = ContentBlockFactory(content="We talked about her puppy")
    summary = TemporalSummaryFactory(content="A day about travel plans")
    message = MessageFactory(content="my flight leaves tomorrow")
    MessageFactory(conversation=ConversationFactory(platform="cron"), content="scheduled reminder")

    first = embed_backfill_run(batch=2)

    assert first.as_dict() | {"seconds": 0} == {
        "model": "concept-stub",
        "available": True,
        "embedded": 4,
        "pending": 0,
        "unusable": 0,
        "seconds": 0,
    }
    assert {(kind, row_id) for kind, row_id, *_ in _stored()} == {
        ("entity", memory.pk),
        ("entity", block.pk),
        ("entity", summary.pk),
        ("message", message.pk),
    }
    conversation = message.conversation
    assert ("message", message.pk, "concept-stub", 5, conversation.person_id, conversation.pk) in _stored()
    assert ("entity", memory.pk, "concept-stub", 5, memory.person_id, None) in _stored()
    assert embed_backfill_run().embedded == 0


def test_a_backfill_that_outgrows_the_planners_statistics_refreshes_them(concept_embeddings):
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE vectors")  # what the planner knew before: no vectors at all
    MessageFactory.create_batch(80, conversation=ConversationFactory(), content="a trip to Rome")

    embed_backfill_run(batch=40)

    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'vectors'")
        assert cursor.fetchone()[0] == 80


def test_backfill_resumes_where_a_limit_stopped_it(concept_embeddings):
    MessageFactory.create_batch(5, content="a trip to Rome")

    stopped = embed_backfill_run(batch=2, limit=3)
    resumed = embed_backfill_run(batch=2)

    assert (stopped.embedded, stopped.pending) == (3, 2)
    assert (resumed.embedded, resumed.pending) == (2, 0)
    assert len(_stored()) == 5


def test_a_model_change_leaves_every_row_pending_until_rebuilt(concept_embeddings, settings):
    MessageFactory(content="my dog")
    embed_backfill_run()
    settings.ANIMA_EMBEDDINGS_MODEL = "concept-stub-2"

    assert embed_pending_count(model=embedding_model()) == 1
    report = embed_backfill_run(rebuild=True)

    assert report.embedded == 1
    assert {row[2] for row in _stored()} == {"concept-stub-2"}


def test_the_command_prints_json_and_exits_zero_with_nothing_pending(concept_embeddings, capsys):
    SemanticMemoryFactory(content="peanut allergy")

    call_command("embed_backfill", "--json")
    call_command("embed_backfill", "--json")

    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert (first["embedded"], first["pending"], second["embedded"], second["pending"]) == (1, 0, 0, 0)
    assert set(first) == {"model", "available", "embedded", "pending", "unusable", "seconds"}


def test_with_embeddings_off_the_command_says_why_and_exits_zero(capsys):
    SemanticMemoryFactory()

    call_command("embed_backfill", "--json")

    captured = capsys.readouterr()
    assert json.loads(captured.out) == {
        "model": None,
        "available": False,
        "embedded": 0,
        "pending": 0,
        "unusable": 0,
        "seconds": 0.0,
    }
    assert "ANIMA_EMBEDDINGS=off" in captured.err


def test_a_text_the_server_cannot_embed_stays_pending_and_holds_up_nothing(concept_embeddings, caplog):
    good = [SemanticMemoryFactory(content=f"Maya likes hiking trail {n}") for n in range(3)]
    bad = SemanticMemoryFactory(content="a text the server chokes on")
    concept_embeddings.embed = lambda text: [math.nan] * CONCEPT_DIM if "chokes" in text else concept_vector(text)

    report = embed_backfill_run(batch=2)

    stored = {row_id for _, row_id, *_ in _stored()}
    assert stored == {memory.pk for memory in good}  # the batch holding the bad text stored its other row
    assert (report.embedded, report.unusable, report.pending) == (3, 1, 1)
    assert f"entity rows [{bad.pk}] stay pending" in caplog.text
    # Once the server answers it, the next run embeds it.
    concept_embeddings.embed = concept_vector
    assert (embed_backfill_run().embedded, embed_pending_count(model=embedding_model())) == (1, 0)


def test_the_backfill_task_runs_the_same_backfill(concept_embeddings):
    from memory.tasks import embed_backfill

    MessageFactory(content="hospital visit")

    assert embed_backfill.delay().get()["embedded"] == 1


def test_forgetting_drops_the_vectors_of_what_it_deleted_or_redacted(concept_embeddings):
    person = PersonFactory(slug="maya", display_name="Maya")
    fact = SemanticMemoryFactory(person=person, content="Maya had knee surgery in May")
    kept = SemanticMemoryFactory(person=person, content="Maya likes green tea")
    stated = MessageFactory(
        conversation=ConversationFactory(person=person), content="I had knee surgery in May. The nurses were lovely."
    )
    embed_backfill_run()
    assert len(_stored()) == 3

    memory_forget(memory=fact, messages=True)

    assert {(kind, row_id) for kind, row_id, *_ in _stored()} == {("entity", kept.pk)}
    # The redacted message keeps its row; its vector comes back from what is left of its text.
    embed_backfill_run()
    assert ("message", stated.pk) in {(kind, row_id) for kind, row_id, *_ in _stored()}


@pytest.mark.local_embeddings
def test_the_local_models_backfill_vectors_of_both_side_by_side():
    MessageFactory(content="我妈妈上周做了手术")

    report = embed_backfill_run()

    assert (report.model, report.embedded) == ("multilingual-e5-small-q4+use-multilingual-v3", 1)
    assert _stored()[0][3] == 384 + 512


def test_a_message_is_embedded_in_its_context_the_turn_it_answers_and_who_said_each(concept_embeddings):
    conversation = ConversationFactory(person=PersonFactory(slug="maya", display_name="Maya"))
    now = timezone.now()
    MessageFactory(conversation=conversation, role="assistant", content="Did you go?", created_at=now)
    MessageFactory(conversation=conversation, role="tool", content="a tool's output", created_at=now)
    MessageFactory(conversation=conversation, role="user", content="yes, last week!", created_at=now)
    MessageFactory(conversation=conversation, role="user", name="Tiago", content="me too", created_at=now)

    embed_backfill_run()

    embedded = {text for request in concept_embeddings.requests for text in request["input"]}
    # A user turn without a name is the conversation's person's; the tool's output is nobody's turn.
    assert embedded == {
        "assistant: Did you go?",
        "assistant: Did you go?\nMaya: yes, last week!",
        "Maya: yes, last week!\nTiago: me too",
    }


def test_a_changed_or_deleted_message_drops_its_vector_and_the_next_turns(concept_embeddings):
    conversation = ConversationFactory()
    now = timezone.now()
    first, second, third = (
        MessageFactory(conversation=conversation, content=text, created_at=now + timedelta(seconds=n))
        for n, text in enumerate(("I live in Reykjavik", "How is the weather there?", "Cold, as always"))
    )
    embed_backfill_run()
    assert {row_id for _, row_id, *_ in _stored()} == {first.pk, second.pk, third.pk}

    Message.objects.filter(pk=first.pk).update(content="[forgotten]")
    assert {row_id for _, row_id, *_ in _stored()} == {third.pk}

    embed_backfill_run()
    second.delete()
    assert {row_id for _, row_id, *_ in _stored()} == {first.pk}
