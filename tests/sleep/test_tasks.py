from __future__ import annotations

import pytest
from celery.exceptions import Retry
from django.db import OperationalError

from sleep import tasks
from sleep.cycle import SLEEP_CYCLE
from sleep.models import PipelineRun
from sleep.pipeline import PipelineError, pipeline_lock
from sleep.tasks import sleep_cycle_enqueue


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


def test_enqueueing_waits_for_the_commit(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        sleep_cycle_enqueue(step="conversation-cleanup")
    assert PipelineRun.objects.count() == 0

    callbacks[0]()

    run = PipelineRun.objects.get()
    assert (run.trigger, run.options["step"]) == ("manual", "conversation-cleanup")
