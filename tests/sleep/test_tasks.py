from __future__ import annotations

import datetime as dt

import pytest
from celery.exceptions import Retry
from django.conf import settings as settings_module
from django.db import OperationalError

from sleep import tasks
from sleep.cycle import SLEEP_CYCLE
from sleep.models import PipelineRun, PipelineStepRun
from sleep.pipeline import PipelineError, pipeline_lock
from sleep.services import sleep_cycle_request
from sleep.tasks import sleep_run_dispatch
from tests.factories import PipelineRunFactory, PipelineStepRunFactory

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
