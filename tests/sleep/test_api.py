"""Sleep runs over the API (operators): a request is queued and carried out by a worker or a background thread,
never inside the request; one run at a time (409); a run whose process died is never shown running."""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest
from django.utils import timezone

from anima.api.testing import api_client
from sleep import steps
from sleep.cycle import SLEEP_CYCLE
from sleep.models import PipelineRun, RunStatus, StepStatus
from sleep.pipeline import pipeline_lock
from tests.factories import PersonFactory, PipelineRunFactory, PipelineStepRunFactory


@pytest.mark.django_db(transaction=True)
def test_a_requested_step_runs_in_the_background_not_in_the_request(monkeypatch, finished_run):
    client = api_client(staff=True)
    release = threading.Event()
    cleanup = steps.conversation_cleanup

    def slow_cleanup(ctx):
        release.wait(timeout=30)  # still working when the request has long been answered
        return cleanup(ctx)

    monkeypatch.setattr(steps, "conversation_cleanup", slow_cleanup)

    response = client.post(
        "/api/sleep-runs/", {"day": "2026-10-01", "step": "conversation-cleanup", "force": True}, format="json"
    )
    queued = response.json()
    while PipelineRun.objects.get(pk=queued["id"]).status == "queued":
        time.sleep(0.05)
    meanwhile = client.get(f"/api/sleep-runs/{queued['id']}/").json()
    release.set()
    run = finished_run(queued["id"])
    listed = client.get("/api/sleep-runs/", {"day": "2026-10-01"}).json()

    assert response.status_code == 202
    assert (queued["status"], queued["day"], queued["trigger"]) == ("queued", "2026-10-01", "manual")
    assert meanwhile["status"] == "running"  # the lock is held by the thread: not mistaken for a dead run
    assert run.status == "succeeded"
    assert [(s.step, s.status) for s in run.steps.all()] == [("conversation-cleanup", StepStatus.SUCCEEDED)]
    assert [r["id"] for r in listed["results"]] == [run.pk]


def test_trigger_is_queued_when_a_broker_is_configured(settings, monkeypatch, django_capture_on_commit_callbacks):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    queued = []
    monkeypatch.setattr("sleep.tasks.run_sleep_cycle.apply_async", lambda **kwargs: queued.append(kwargs))

    with django_capture_on_commit_callbacks(execute=True):
        response = api_client(staff=True).post(
            "/api/sleep-runs/", {"day": "2026-10-01", "mode": "incremental"}, format="json"
        )

    run = PipelineRun.objects.get()
    assert response.status_code == 202 and response.json()["id"] == run.pk
    assert queued == [{"kwargs": {"run_id": run.pk}, "expires": 3 * 3600}]
    assert (run.status, run.mode, run.options["step"]) == ("queued", "incremental", None)


@pytest.mark.django_db(transaction=True)  # the run is sent as the request commits, inside it
def test_with_the_broker_down_a_request_is_a_503_and_leaves_no_run_queued(broker_down):
    client = api_client(staff=True)

    answers = [
        client.post("/api/sleep-runs/", {"day": "2026-10-01", "step": "conversation-cleanup"}, format="json")
        for _ in range(2)
    ]

    # Not a 409 the second time: the first run is closed, in the history with why.
    assert [answer.status_code for answer in answers] == [503, 503]
    assert "the broker does not answer" in answers[0].json()["detail"]
    runs = list(PipelineRun.objects.order_by("pk").values_list("status", "error"))
    assert [status for status, _ in runs] == [RunStatus.FAILED, RunStatus.FAILED]
    assert all(error.startswith("not started: the broker did not take it") for _, error in runs)


def test_trigger_validation_names_fields():
    client = api_client(staff=True)

    response = client.post("/api/sleep-runs/", {"day": "2026-13-01", "step": "nap", "mode": "deep"}, format="json")

    assert response.status_code == 400
    assert set(response.json()) == {"day", "step", "mode"}


def test_unmet_dependencies_are_a_400():
    response = api_client(staff=True).post(
        "/api/sleep-runs/", {"day": "2026-10-01", "step": "memory-ref-sync"}, format="json"
    )

    assert response.status_code == 400 and "step" in response.json()
    assert not PipelineRun.objects.exists()


@pytest.mark.parametrize("active", ["queued", "running"])
def test_a_second_request_while_a_run_is_active_is_a_409_naming_it(active, django_capture_on_commit_callbacks):
    client = api_client(staff=True)
    with pipeline_lock(pipeline=SLEEP_CYCLE):  # the first run's worker is alive and holds the lock
        first = PipelineRunFactory(day=dt.date(2026, 10, 1), status=active)
        with django_capture_on_commit_callbacks(execute=False):
            second = client.post("/api/sleep-runs/", {"day": "2026-10-02"}, format="json")

    assert second.status_code == 409
    assert second.json()["run_id"] == first.pk and f"run {first.pk}" in second.json()["detail"]
    assert PipelineRun.objects.count() == 1


def test_a_run_left_running_by_a_dead_process_is_shown_failed_and_blocks_nothing(django_capture_on_commit_callbacks):
    dead = PipelineRunFactory(day=dt.date(2026, 10, 1), status="running")
    dead.steps.create(step="light-sleep", status="running")
    client = api_client(staff=True)

    shown = client.get(f"/api/sleep-runs/{dead.pk}/").json()
    with django_capture_on_commit_callbacks(execute=False):
        again = client.post("/api/sleep-runs/", {"day": "2026-10-01"}, format="json")

    assert shown["status"] == "failed" and shown["error"].startswith("interrupted")
    assert shown["steps"][0]["status"] == "failed"
    assert again.status_code == 202


def test_a_queued_run_no_worker_took_in_time_is_closed(settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    lost = PipelineRunFactory(status="queued", started_at=timezone.now() - dt.timedelta(hours=4))
    fresh = PipelineRun.objects.filter(pk=lost.pk)

    listed = api_client(staff=True).get("/api/sleep-runs/").json()

    assert listed["results"][0]["status"] == "failed" and "not started" in fresh.get().error


def test_run_history_and_steps_for_operators_only():
    run = PipelineRunFactory(day=dt.date(2026, 9, 30), status=RunStatus.FAILED)
    PipelineStepRunFactory(run=run, step="light-sleep", status=StepStatus.FAILED, error="boom", output={"x": 1})
    client = api_client(staff=True)
    agent = api_client(username="runtime", scope="agent", persons=[PersonFactory()])

    detail = client.get(f"/api/sleep-runs/{run.pk}/").json()
    steps = client.get("/api/sleep-runs/steps/").json()

    assert detail["steps"][0]["error"] == "boom" and detail["steps"][0]["output"] == {"x": 1}
    assert steps[0] == {"name": "conversation-cleanup", "depends_on": []}
    assert {"name": "memory-ref-sync", "depends_on": ["deep-sleep"]} in steps
    assert agent.get("/api/sleep-runs/").status_code == agent.get(f"/api/sleep-runs/{run.pk}/").status_code == 403
