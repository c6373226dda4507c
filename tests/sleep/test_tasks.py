from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest
from celery.exceptions import Retry
from django.conf import settings as settings_module
from django.db import OperationalError

from anima.core.db import advisory_lock
from anima.core.models import AutoLlmRun
from conversations.models import Role
from memory.models import SemanticMemory
from memory.subjects.selectors import profile_q
from sleep import steps, tasks
from sleep.cycle import SLEEP_CYCLE
from sleep.models import PipelineItemRun, PipelineRun, PipelineStepRun
from sleep.pipeline import PipelineError, pipeline_fanout_waiting, pipeline_lock
from sleep.services import sleep_cycle_request, sleep_fanout_join, sleep_runs_reap
from sleep.tasks import sleep_run_dispatch
from tests.factories import MessageFactory, PipelineRunFactory, PipelineStepRunFactory

DAY = dt.date(2026, 11, 20)


def test_the_task_runs_a_scheduled_cycle_from_plain_values():
    result = tasks.run_sleep_cycle.apply(kwargs={"day": "2026-11-22"}).get()

    run = PipelineRun.objects.get(pk=result["run_id"])
    assert result == {"run_id": run.pk, "day": "2026-11-22", "status": "succeeded", "error": ""}
    assert (run.trigger, run.mode) == ("cron", "full")  # Sunday's run, on Monday morning


def test_a_busy_cycle_is_reported_and_never_retried(monkeypatch):
    with pipeline_lock(pipeline=SLEEP_CYCLE):
        result = tasks.run_sleep_cycle.apply(kwargs={"day": "2026-11-20"}).get()

    assert result["status"] == "busy" and "already running" in result["error"]
    assert PipelineRun.objects.count() == 0


def test_a_lost_database_is_retried_a_bounded_number_of_times(monkeypatch):
    def lost(**kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(tasks, "sleep_cycle_run", lost)

    with pytest.raises(Retry):
        tasks.run_sleep_cycle.apply(kwargs={"day": "2026-11-20"})
    last = tasks.run_sleep_cycle.max_retries
    with pytest.raises(OperationalError):  # the last retry gives up with the real error
        tasks.run_sleep_cycle.apply(kwargs={"day": "2026-11-20"}, retries=last)
    assert last == 3


def test_a_refused_request_is_not_retried():
    with pytest.raises(PipelineError, match="light-sleep has not succeeded"):
        tasks.run_sleep_cycle.apply(kwargs={"day": "2026-11-20", "step": "dream"})


def test_dispatch_queues_the_run_on_the_broker_once_the_transaction_commits(
    settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    sent: list[dict] = []
    monkeypatch.setattr(tasks.run_sleep_cycle, "apply_async", lambda **kwargs: sent.append(kwargs))
    run = sleep_cycle_request(step="conversation-cleanup")

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        sleep_run_dispatch(run)
    assert sent == []
    callbacks[0]()

    assert sent == [{"kwargs": {"run_id": run.pk}, "expires": 3 * 3600}]
    assert (run.status, run.trigger, run.options["step"]) == ("queued", "manual", "conversation-cleanup")


def test_the_task_settings_never_lose_a_run_with_its_worker():
    task = tasks.run_sleep_cycle
    assert task.acks_late and task.reject_on_worker_lost
    assert settings_module.CELERY_TASK_ACKS_LATE and settings_module.CELERY_TASK_REJECT_ON_WORKER_LOST
    assert settings_module.CELERY_WORKER_PREFETCH_MULTIPLIER == 1


def test_a_requested_run_delivered_twice_is_carried_out_once():
    run = sleep_cycle_request(day=DAY, step="conversation-cleanup", force=True)

    first = tasks.run_sleep_cycle.apply(kwargs={"run_id": run.pk}).get()
    second = tasks.run_sleep_cycle.apply(kwargs={"run_id": run.pk}).get()

    assert first == second == {"run_id": run.pk, "day": DAY.isoformat(), "status": "succeeded", "error": ""}
    assert PipelineStepRun.objects.filter(run=run).count() == 1


@pytest.mark.parametrize("requested", [True, False])
def test_a_run_whose_worker_died_is_carried_on_by_its_redelivered_task(requested):
    """The worker died during light sleep: the same task, delivered again, resumes the same run."""
    options = {"step": None, "force": False, "token_budget": 400_000, "task_id": "task-1"}
    trigger = "manual" if requested else "cron"
    dead = PipelineRunFactory(day=DAY, status="running", trigger=trigger, options=options)
    PipelineStepRunFactory(run=dead, step="conversation-cleanup", status="succeeded", output={"kept": True})
    PipelineStepRunFactory(run=dead, step="light-sleep", status="running")
    kwargs = {"run_id": dead.pk} if requested else {"day": DAY.isoformat(), "trigger": "cron"}

    result = tasks.run_sleep_cycle.apply(kwargs=kwargs, task_id="task-1").get()

    dead.refresh_from_db()
    assert result["run_id"] == dead.pk and dead.status == "succeeded" and PipelineRun.objects.count() == 1
    assert dead.options["resumed"] == 1
    steps = list(dead.steps.order_by("id").values_list("step", "attempt", "status"))
    assert steps[:3] == [
        ("conversation-cleanup", 1, "succeeded"),  # kept, not run again
        ("light-sleep", 1, "failed"),  # interrupted
        ("light-sleep", 2, "succeeded"),
    ]
    assert [name for name, *_ in steps].count("conversation-cleanup") == 1
    assert len(steps) == len(SLEEP_CYCLE.steps) + 1  # every step once, light sleep twice


def test_a_requested_run_waits_for_a_busy_lock_and_gives_up_with_a_reason():
    run = sleep_cycle_request(day=DAY, step="conversation-cleanup", force=True)
    with pipeline_lock(pipeline=SLEEP_CYCLE):
        with pytest.raises(Retry):
            tasks.run_sleep_cycle.apply(kwargs={"run_id": run.pk})
        given_up = tasks.run_sleep_cycle.apply(kwargs={"run_id": run.pk}, retries=tasks.BUSY_RETRIES).get()

    run.refresh_from_db()
    assert given_up["status"] == run.status == "failed"
    assert run.error.startswith("not started: sleep-cycle is already running")


def test_a_deleted_run_is_tolerated():
    assert tasks.run_sleep_cycle.apply(kwargs={"run_id": 10**9}).get() == {"run_id": 10**9, "status": "missing"}


@pytest.fixture
def fan_out(settings):
    """Light sleep fanned out as under a broker, its chord run eagerly (as Celery does without one)."""
    settings.ANIMA_SLEEP_FANOUT = True


def _talk_on(day: dt.date, said: str):
    at = dt.datetime.combine(day, dt.time(12), tzinfo=zoneinfo.ZoneInfo(settings_module.ANIMA_TIME_ZONE))
    message = MessageFactory(role=Role.USER, content=said, created_at=at)
    return message.conversation


def test_fanned_out_light_sleep_runs_one_task_per_conversation_and_its_join_finishes_the_cycle(fan_out):
    first, second = _talk_on(DAY, "我住在杭州，我在一家银行工作。"), _talk_on(DAY, "我女儿小雨属虎，今年上一年级。")

    result = tasks.run_sleep_cycle.apply(kwargs={"day": DAY.isoformat(), "trigger": "manual"}).get()

    run = PipelineRun.objects.get(pk=result["run_id"])
    assert run.status == "succeeded", list(run.steps.values("step", "status", "error"))
    assert set(run.steps.values_list("status", flat=True)) == {"succeeded"}
    assert run.steps.count() == len(SLEEP_CYCLE.steps)
    light = run.steps.get(step="light-sleep")
    assert light.output["fanout"]["items"] == [first.pk, second.pk]
    assert [c["conversation_id"] for c in light.output["conversations"]] == [first.pk, second.pk]
    assert light.output["autobiography_summary"]["chars"] > 0  # the shared write, once, after both
    items = PipelineItemRun.objects.filter(step_run=light)
    assert sorted(items.values_list("item", "status")) == [(first.pk, "succeeded"), (second.pk, "succeeded")]
    assert SemanticMemory.objects.filter(source_conversation=first).exists()
    assert SemanticMemory.objects.filter(source_conversation=second).exists()
    assert AutoLlmRun.objects.filter(run_key=f"sleep-run:{run.pk}", purpose="light-sleep.outline").count() == 1


def test_fanned_out_catch_up_runs_each_missed_day_after_the_one_before_finished(fan_out):
    _talk_on(DAY - dt.timedelta(days=2), "我住在杭州。")

    tasks.run_sleep_cycle.apply(kwargs={"day": DAY.isoformat(), "trigger": "cron"}).get()

    runs = list(PipelineRun.objects.order_by("id").values_list("day", "trigger", "status"))
    assert runs == [
        (DAY - dt.timedelta(days=2), "catch-up", "succeeded"),
        (DAY - dt.timedelta(days=1), "catch-up", "succeeded"),
        (DAY, "cron", "succeeded"),
    ]


def test_a_fanned_out_run_whose_task_is_delivered_again_hands_out_only_what_is_not_done(fan_out, monkeypatch):
    first, second = _talk_on(DAY, "我住在杭州。"), _talk_on(DAY, "我女儿小雨属虎。")
    sent: list = []
    monkeypatch.setattr(tasks, "chord", lambda header: lambda body: sent.append([s.kwargs for s in header]))
    tasks.run_sleep_cycle.apply(kwargs={"day": DAY.isoformat(), "trigger": "manual"}, task_id="task-1").get()
    run = PipelineRun.objects.get()
    light = run.steps.get(step="light-sleep")
    assert run.status == "running" and sent == [
        [{"step_run_id": light.pk, "item": first.pk}, {"step_run_id": light.pk, "item": second.pk}]
    ]
    tasks.run_sleep_item.apply(kwargs={"step_run_id": light.pk, "item": first.pk}).get()

    tasks.run_sleep_cycle.apply(kwargs={"day": DAY.isoformat(), "trigger": "manual"}, task_id="task-1").get()

    assert sent[1] == [{"step_run_id": light.pk, "item": second.pk}]
    assert PipelineRun.objects.count() == 1 and run.steps.filter(step="light-sleep").count() == 1


def test_an_item_still_busy_on_its_last_delivery_is_left_for_the_join_to_hand_out_again(fan_out, monkeypatch):
    conversation = _talk_on(DAY, "我住在杭州。")
    monkeypatch.setattr(tasks, "chord", lambda header: lambda body: None)  # items are delivered by hand below
    run_id = tasks.run_sleep_cycle.apply(kwargs={"day": DAY.isoformat(), "trigger": "manual"}).get()["run_id"]
    light = PipelineStepRun.objects.get(run_id=run_id, step="light-sleep")
    kwargs = {"step_run_id": light.pk, "item": conversation.pk}

    # Another worker holds the item the whole time.
    with advisory_lock(f"item:{light.pk}:{conversation.pk}") as held:
        assert held
        with pytest.raises(Retry):
            tasks.run_sleep_item.apply(kwargs=kwargs)
        last = tasks.run_sleep_item.apply(kwargs=kwargs, retries=tasks.FANOUT_BUSY_RETRIES).get()

    assert last == {"item": conversation.pk, "status": "busy"}
    assert pipeline_fanout_waiting(run=PipelineRun.objects.get(pk=run_id))[1] == [conversation.pk]


class WorkerKilled(BaseException):
    """What ``kill -9`` leaves behind: the step's row and the run still running, nothing recorded."""


@pytest.mark.parametrize("reaped", [False, True])
def test_a_join_killed_mid_deep_sleep_is_carried_on_by_its_redelivered_task(fan_out, monkeypatch, reaped):
    """The join's worker died in deep sleep: the join, delivered again, finishes the night in the same run."""
    first, second = _talk_on(DAY, "我住在杭州，我在一家银行工作。"), _talk_on(DAY, "我女儿小雨属虎，今年上一年级。")
    monkeypatch.setattr(tasks, "chord", lambda header: lambda body: None)  # items and join are delivered by hand
    run_id = tasks.run_sleep_cycle.apply(kwargs={"day": DAY.isoformat(), "trigger": "manual"}).get()["run_id"]
    light = PipelineStepRun.objects.get(run_id=run_id, step="light-sleep")
    for conversation in (first, second):
        tasks.run_sleep_item.apply(kwargs={"step_run_id": light.pk, "item": conversation.pk}).get()
    deep_sleep = steps.deep_sleep

    def killed_after_its_writes(ctx):
        deep_sleep(ctx)
        raise WorkerKilled

    monkeypatch.setattr(steps, "deep_sleep", killed_after_its_writes)
    with pytest.raises(WorkerKilled):
        sleep_fanout_join(run_id=run_id)
    monkeypatch.setattr(steps, "deep_sleep", deep_sleep)
    # The facts: the subjects step, after deep sleep, only writes profiles of them.
    facts = SemanticMemory.objects.exclude(profile_q())
    memories = sorted(facts.values_list("external_id", "content", "status"))
    if reaped:  # the Sleep page or the API looked at it before the broker handed the join back
        assert sleep_runs_reap() == 1

    result = tasks.join_sleep_run.apply(kwargs={"run_id": run_id}).get()

    run = PipelineRun.objects.get(pk=run_id)
    assert result["status"] == run.status == "succeeded", list(run.steps.values("step", "status", "error"))
    assert PipelineRun.objects.count() == 1 and run.options["resumed"] == 1
    deep = list(run.steps.filter(step="deep-sleep").order_by("attempt").values_list("attempt", "status", "error"))
    assert [(attempt, status) for attempt, status, _ in deep] == [(1, "failed"), (2, "succeeded")]
    assert deep[0][2].startswith("interrupted")
    # Light sleep (and its shared outline) is kept, not redone; every other step runs once.
    assert list(run.steps.filter(step="light-sleep").values_list("pk", "status")) == [(light.pk, "succeeded")]
    assert AutoLlmRun.objects.filter(run_key=f"sleep-run:{run_id}", purpose="light-sleep.outline").count() == 1
    assert run.steps.count() == len(SLEEP_CYCLE.steps) + 1
    # Deep sleep done again over what it had already changed changes nothing.
    assert sorted(facts.values_list("external_id", "content", "status")) == memories


def test_fan_out_tasks_are_acknowledged_late_and_items_keep_their_results_for_the_chord():
    for task in (tasks.run_sleep_item, tasks.join_sleep_run):
        assert task.acks_late and task.reject_on_worker_lost
    assert tasks.run_sleep_item.ignore_result is False
