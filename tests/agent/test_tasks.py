"""Short-term consolidation as a Celery task: by id, tolerant of a deleted conversation; on a real worker once a
turn finds it due (``-m integration``)."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from celery import current_app
from django.utils import timezone

from anima.agent.tasks import short_term_consolidate_task
from anima.agent.turn import SUMMARY_NAME, prepare_turn
from anima.core.config import config_update
from anima.core.llm.testing import StubLlmServer
from conversations.models import HistoryEntry
from tests.celery_worker import celery_worker
from tests.factories import ConversationFactory, MessageFactory

WAIT_SECONDS = 120


def test_a_conversation_deleted_before_its_task_runs_is_skipped():
    gone = ConversationFactory()
    pk = gone.pk
    gone.delete()

    assert short_term_consolidate_task(conversation_id=pk, now=timezone.now().isoformat()) == {
        "conversation_id": pk,
        "status": "missing",
    }


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
# The turn's cache is this test's own: the database's ids restart every run, and a marker that an aborted earlier run
# left on a shared Redis for the same conversation id would keep the turn from sending.
@pytest.mark.usefixtures("private_cache")
def test_with_a_broker_a_worker_consolidates_while_the_turn_goes_on(worker_queue, monkeypatch):
    queue, log = worker_queue
    # Where the turn's task goes (the Celery app holds Django's settings under their CELERY_ names).
    monkeypatch.setitem(current_app.conf, "CELERY_TASK_DEFAULT_QUEUE", queue)
    config_update(section="stm", values={"consolidate_after_messages": 10})
    conversation = ConversationFactory()
    start = timezone.now() - timedelta(minutes=30)
    for i in range(14):
        MessageFactory(conversation=conversation, content=f"Hotel option {i}.", created_at=start + timedelta(minutes=i))
    answer = {"summary": "We compared fourteen hotel options.", "topic": "hotels"}
    # The model answers after 3 s: the turn has long returned by then.
    with StubLlmServer(responder=lambda body: answer, delay=3.0) as stub:
        model = {"ANIMA_LLM_BASE_URL": stub.base_url, "ANIMA_LLM_MODEL": "stub", "ANIMA_LLM_PROVIDER": "openai"}
        with celery_worker(queue, log, **model):
            first = prepare_turn(conversation=conversation, user_message="Which one?", store=False)
            archived = HistoryEntry.objects.filter(conversation=conversation)
            assert not archived.exists() and first[1]["name"] != SUMMARY_NAME  # raw, not waiting for the model

            deadline = time.monotonic() + WAIT_SECONDS
            while not archived.exists() and time.monotonic() < deadline:
                time.sleep(0.5)
            log.seek(0)
            assert archived.count() == 2, log.read()[-4000:]  # the global entry and the person's

    then = prepare_turn(conversation=conversation, user_message="And now?", store=False)
    assert then[1]["name"] == SUMMARY_NAME and then[1]["content"].endswith(answer["summary"])
    assert len(stub.requests) == 1
    assert "Hotel option 0." in json.dumps(stub.requests[0], ensure_ascii=False)
