"""A real Celery worker on the Redis broker runs a sleep cycle against the test database."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import signal
import time
import zoneinfo
from collections.abc import Iterator

import psutil
import psycopg
import pytest
from django.conf import settings
from django.db import connection

from anima.core.llm.testing import StubLlmServer, StubReply
from anima.core.models import AutoLlmRun
from conversations.models import Role
from memory.models import ContentBlock, LimbicBlock, NarrativeBlock, SemanticMemory
from sleep.cycle import SLEEP_CYCLE
from sleep.models import LightSleepWatermark, PipelineRun
from sleep.services import sleep_cycle_request, sleep_runs_reap
from sleep.tasks import run_sleep_cycle
from sleep.testing import light_sleep_responder, sleep_purpose
from tests.celery_worker import celery_worker, worker_database_url
from tests.factories import ConversationFactory, MessageFactory, RuntimeConfigFactory, SemanticMemoryFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

DAY = dt.date(2026, 11, 20)
WAIT_SECONDS = 180


def _wait_for_finished_run(log) -> PipelineRun:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        run = PipelineRun.objects.filter(day=DAY, finished_at__isnull=False).first()
        if run is not None:
            return run
        time.sleep(1)
    log.seek(0)
    pytest.fail(f"no finished sleep-cycle run after {WAIT_SECONDS}s; worker log:\n{log.read()[-4000:]}")


def _talk(conversation, said: str, answer: str) -> None:
    at = dt.datetime.combine(DAY, dt.time(20), tzinfo=zoneinfo.ZoneInfo(settings.ANIMA_TIME_ZONE))
    MessageFactory(conversation=conversation, role=Role.USER, content=said, created_at=at)
    MessageFactory(
        conversation=conversation, role=Role.ASSISTANT, content=answer, created_at=at + dt.timedelta(minutes=1)
    )


def test_a_worker_runs_the_whole_cycle_end_to_end(worker_queue):
    queue, log = worker_queue
    conversation = ConversationFactory()
    _talk(conversation, "我女儿小雨属虎，今年上一年级。", "记住了：小雨属虎，上一年级。")

    with celery_worker(queue, log, ANIMA_SLEEP_FANOUT="0"):
        run_sleep_cycle.apply_async(kwargs={"day": DAY.isoformat(), "trigger": "manual"}, queue=queue)
        run = _wait_for_finished_run(log)

    steps = dict(run.steps.values_list("step", "status"))
    assert run.status == "succeeded", list(run.steps.values("step", "status", "error"))
    assert len(steps) == len(SLEEP_CYCLE.steps) and set(steps.values()) == {"succeeded"}
    assert (run.trigger, run.mode) == ("manual", "full")
    # The worker's LLM calls (offline provider) are audited under the run's key.
    assert AutoLlmRun.objects.filter(run_key=f"sleep-run:{run.pk}", purpose="light-sleep.semantic").exists()
    assert SemanticMemory.objects.filter(source_conversation=conversation).exists()


def _until(what: str, check, log, seconds: float = WAIT_SECONDS):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    log.seek(0)
    pytest.fail(f"{what}: not within {seconds}s; worker log:\n{log.read()[-4000:]}")


def _blocked_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0] > 0


def _carried_on_after_its_worker_died(run: PipelineRun, queue: str, log, *, fan_out: str) -> PipelineRun:
    """The run of a killed worker: detected and shown interrupted, then finished by a second worker."""
    # Nobody works on it any more: detected (the advisory lock died with the worker) and shown failed...
    _until(
        "the dead run detected",
        lambda: sleep_runs_reap() or PipelineRun.objects.get(pk=run.pk).status == "failed",
        log,
        30,
    )
    assert PipelineRun.objects.get(pk=run.pk).error.startswith("interrupted")
    # ...until the broker hands the unacknowledged task to a second worker, which carries the same run on.
    time.sleep(2)
    carried_on = PipelineRun.objects.filter(pk=run.pk, finished_at__isnull=False).exclude(
        error__startswith="interrupted"
    )
    with celery_worker(queue, log, ANIMA_BROKER_VISIBILITY_TIMEOUT="1", ANIMA_SLEEP_FANOUT=fan_out):
        return _until("the run carried on by the second worker", carried_on.first, log)


def test_a_worker_killed_mid_cycle_loses_nothing_and_a_second_worker_finishes_the_same_run(worker_queue):
    queue, log = worker_queue
    first = ConversationFactory()
    _talk(first, "我女儿小雨属虎，今年上一年级。", "记住了：小雨属虎，上一年级。")
    second = ConversationFactory()
    _talk(second, "我住在杭州，我在一家银行工作，最近压力很大，很焦虑。", "抱抱你，慢慢来。")
    run = sleep_cycle_request(day=DAY)
    # Hold the second conversation's row: light sleep writes the first conversation's memories, then
    # waits here, mid-cycle, for as long as the test likes.
    # The whole run in one task (no fan-out): the run itself is resumed, step by step.
    with psycopg.connect(worker_database_url()) as blocker, celery_worker(queue, log, ANIMA_SLEEP_FANOUT="0") as doomed:
        blocker.execute("SELECT id FROM conversations WHERE id = %s FOR UPDATE", [second.pk])
        run_sleep_cycle.apply_async(kwargs={"run_id": run.pk}, queue=queue)
        _until("the first worker blocked mid-cycle", _blocked_on_a_lock, log)
        memories_of_first = SemanticMemory.objects.filter(source_conversation=first)
        _until("the first conversation's memories", memories_of_first.exists, log)
        written = set(SemanticMemory.objects.values_list("external_id", flat=True))
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        blocker.rollback()  # the dead worker's blocked statement may end now: its transaction never commits

    finished = _carried_on_after_its_worker_died(run, queue, log, fan_out="0")

    assert finished.pk == run.pk and finished.status == "succeeded", list(
        finished.steps.values("step", "status", "error")
    )
    assert finished.options["resumed"] == 1 and PipelineRun.objects.count() == 1
    light = list(
        finished.steps.filter(step="light-sleep").order_by("attempt").values_list("attempt", "status", "error")
    )
    assert [(attempt, status) for attempt, status, _ in light] == [(1, "failed"), (2, "succeeded")]
    assert light[0][2].startswith("interrupted")
    assert finished.steps.filter(step="conversation-cleanup").count() == 1  # done once, kept
    # Nothing the first worker wrote was written again, and the second conversation is consolidated too.
    assert written <= set(SemanticMemory.objects.values_list("external_id", flat=True))
    assert SemanticMemory.objects.filter(source_conversation=second).exists()
    for model in (SemanticMemory, ContentBlock):
        contents = list(model.objects.values_list("person_id", "content"))
        assert len(contents) == len(set(contents)), model


SAID = (
    "我女儿小雨属虎，今年上一年级。",
    "我住在杭州，我在一家银行工作。",
    "I live in Lisbon and I work at a bakery.",
    "我对花生过敏，千万别给我推荐花生酱。",
    "I prefer green tea over coffee these days.",
    "我打算明年去成都看大熊猫。",
)


def _conversations(count: int) -> list:
    conversations = [ConversationFactory() for _ in range(count)]
    for index, conversation in enumerate(conversations):
        _talk(conversation, SAID[index % len(SAID)], "记住了。")
    return conversations


@contextlib.contextmanager
def _stub_model(*, broken: str = "", **reply: int) -> Iterator[tuple[StubLlmServer, dict]]:
    """A stand-in model answering light sleep after a second, and the worker settings that point at it.

    Its limbic answers for the conversation titled ``broken`` break the schema.
    """

    def respond(body: dict) -> StubReply:
        answer = light_sleep_responder(body)
        if broken and sleep_purpose(body) == "light-sleep.limbic":
            if json.loads(body["messages"][1]["content"])["conversation"]["title"] == broken:
                answer = {"anchors": [{"kind": "content", "content": "valence"}]}
        return StubReply(content=json.dumps(answer, ensure_ascii=False), **reply)

    with StubLlmServer(responder=respond, delay=1.0) as stub:
        yield stub, {"ANIMA_LLM_BASE_URL": stub.base_url, "ANIMA_LLM_MODEL": "stub", "ANIMA_LLM_PROVIDER": "openai"}


LIGHT_SLEEP_ONLY = {"day": DAY.isoformat(), "trigger": "manual", "step": "light-sleep", "force": True}


def test_a_fanned_out_cycle_completes_its_chord_on_a_pool_of_worker_processes(worker_queue):
    queue, log = worker_queue
    conversations = _conversations(4)

    with celery_worker(queue, log, processes=2):
        run_sleep_cycle.apply_async(kwargs={"day": DAY.isoformat(), "trigger": "manual"}, queue=queue)
        run = _wait_for_finished_run(log)

    assert run.status == "succeeded", list(run.steps.values("step", "status", "error"))
    assert run.steps.count() == len(SLEEP_CYCLE.steps)
    assert set(run.steps.values_list("status", flat=True)) == {"succeeded"}
    light = run.steps.get(step="light-sleep")
    assert sorted(light.output["fanout"]["items"]) == sorted(c.pk for c in conversations)
    assert sorted(light.items.values_list("item", "status")) == sorted((c.pk, "succeeded") for c in conversations)
    assert len(light.output["conversations"]) == 4 and light.output["autobiography_summary"]["chars"] > 0
    for conversation in conversations:
        assert SemanticMemory.objects.filter(source_conversation=conversation).exists()


def test_one_conversations_broken_answers_leave_the_others_consolidated_by_the_pool(worker_queue):
    queue, log = worker_queue
    conversations = _conversations(4)
    broken = conversations[1]

    with _stub_model(broken=broken.title) as (_, model), celery_worker(queue, log, processes=2, **model):
        run_sleep_cycle.apply_async(kwargs=LIGHT_SLEEP_ONLY, queue=queue)
        run = _wait_for_finished_run(log)

    assert run.status == "partial", list(run.steps.values("step", "status", "error"))
    assert f"conversation_id {broken.pk} day {DAY} stage limbic: LlmRepairFailed" in run.error
    light = run.steps.get()
    assert light.status == "partial" and light.output["autobiography_summary"]["chars"] > 0
    assert sorted(light.items.values_list("item", "status")) == sorted(
        (c.pk, "partial" if c == broken else "succeeded") for c in conversations
    )
    for conversation in conversations:
        assert SemanticMemory.objects.filter(source_conversation=conversation).exists()
        assert LimbicBlock.objects.filter(source_conversation=conversation).exists() == (conversation != broken)
    assert LightSleepWatermark.objects.get(conversation=broken, day=DAY).last_message_id == 0


def test_a_worker_process_killed_mid_conversation_has_it_redone_without_duplicates(worker_queue):
    queue, log = worker_queue
    conversations = _conversations(4)

    with _stub_model() as (stub, model), celery_worker(queue, log, processes=2, **model) as worker:
        run_sleep_cycle.apply_async(kwargs=LIGHT_SLEEP_ONLY, queue=queue)
        # A conversation's facts are written and its next stage is in flight: kill every pool process.
        _until("a first conversation's facts", SemanticMemory.objects.exists, log)
        killed = psutil.Process(worker.pid).children()
        for process in killed:
            process.kill()
        run = _wait_for_finished_run(log)
        replaced = psutil.Process(worker.pid).children()

    assert killed and not {p.pid for p in killed} & {p.pid for p in replaced}
    assert run.status == "succeeded", list(run.steps.values("step", "status", "error"))
    light = run.steps.get()
    assert sorted(light.items.values_list("item", "status")) == sorted((c.pk, "succeeded") for c in conversations)
    # The killed calls were sent again (4 conversations x 3 stages + the outline, plus what died in flight)...
    assert len(stub.requests) > 4 * 3 + 1
    # ...and every conversation holds exactly one fact, one anchor and one narrative.
    for conversation in conversations:
        assert SemanticMemory.objects.filter(source_conversation=conversation).count() == 1
        assert LimbicBlock.objects.filter(source_conversation=conversation).count() == 1
        assert NarrativeBlock.objects.filter(source_conversation=conversation).count() == 1


def test_the_nights_token_budget_holds_across_worker_processes(worker_queue):
    queue, log = worker_queue
    _conversations(6)
    budget, call, processes = 2000, 700, 2
    RuntimeConfigFactory(section="sleep", values={"token_budget": budget})

    # Above the local estimate of every light-sleep prompt (~480 tokens), so each call counts exactly 700.
    with _stub_model(prompt_tokens=600, completion_tokens=100) as (_, model):
        with celery_worker(queue, log, processes=processes, **model):
            run_sleep_cycle.apply_async(kwargs=LIGHT_SLEEP_ONLY, queue=queue)
            run = _wait_for_finished_run(log)

    spent = sum(AutoLlmRun.objects.filter(run_key=f"sleep-run:{run.pk}").values_list("total_tokens", flat=True))
    assert run.status == "failed" and run.error.startswith("token budget exhausted"), run.error
    assert run.steps.get().error.startswith("token budget exhausted")
    # 6 conversations x 3 calls x 700 tokens would be 12,600.
    assert budget <= spent <= budget + processes * call


def _deep_sleep_running(run: PipelineRun):
    return run.steps.filter(step="deep-sleep", finished_at__isnull=True).exists() and _blocked_on_a_lock()


def test_a_worker_killed_mid_deep_sleep_of_a_fanned_out_run_has_the_run_finished_by_the_redelivered_task(
    worker_queue,
):
    queue, log = worker_queue
    conversation = ConversationFactory()
    held = SemanticMemoryFactory(
        person=conversation.person, content="我住在杭州。", source_day=DAY - dt.timedelta(days=30)
    )
    _talk(conversation, "我搬家了，现在住在成都。", "好的，记住了：你现在住在成都。")
    run = sleep_cycle_request(day=DAY)
    # Deep sleep retires the old residence when it meets the new one: hold that row, and it waits there.
    with psycopg.connect(worker_database_url()) as blocker, celery_worker(queue, log, ANIMA_SLEEP_FANOUT="1") as doomed:
        blocker.execute("SELECT id FROM entities WHERE id = %s FOR UPDATE", [held.pk])
        run_sleep_cycle.apply_async(kwargs={"run_id": run.pk}, queue=queue)
        _until("the worker blocked mid deep sleep", lambda: _deep_sleep_running(run), log)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        blocker.rollback()

    finished = _carried_on_after_its_worker_died(run, queue, log, fan_out="1")

    assert finished.status == "succeeded", list(finished.steps.values("step", "status", "error"))
    assert PipelineRun.objects.count() == 1
    deep = list(finished.steps.filter(step="deep-sleep").order_by("attempt").values_list("status", "error"))
    assert [status for status, _ in deep] == ["failed", "succeeded"] and deep[0][1].startswith("interrupted")
    # Light sleep was not done again: one fact of the new residence, the old one retired once.
    assert finished.steps.filter(step="light-sleep").count() == 1
    assert SemanticMemory.objects.filter(source_conversation=conversation).count() == 1
    held.refresh_from_db()
    assert held.status == "expired"
