"""Sleep runs over the API: staff trigger (in-process without a broker, queued with one), history with steps."""

from __future__ import annotations

import datetime as dt

from anima.api.testing import api_client
from sleep.cycle import SLEEP_CYCLE
from sleep.models import PipelineRun, RunStatus, StepStatus
from sleep.pipeline import pipeline_lock
from tests.factories import PersonFactory, PipelineRunFactory, PipelineStepRunFactory


def test_staff_trigger_runs_one_step_in_process_and_lists_it_with_its_steps():
    client = api_client(staff=True)

    response = client.post(
        "/api/sleep-runs/", {"day": "2026-10-01", "step": "conversation-cleanup", "force": True}, format="json"
    )
    listed = client.get("/api/sleep-runs/", {"day": "2026-10-01"}).json()

    assert response.status_code == 201
    run = response.json()
    assert run["day"] == "2026-10-01" and run["trigger"] == "manual"
    assert [(s["step"], s["status"]) for s in run["steps"]] == [("conversation-cleanup", StepStatus.SUCCEEDED)]
    assert [r["id"] for r in listed["results"]] == [run["id"]]


def test_trigger_is_queued_when_a_broker_is_configured(settings, monkeypatch, django_capture_on_commit_callbacks):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    queued = []
    monkeypatch.setattr("sleep.tasks.run_sleep_cycle.delay", lambda **kwargs: queued.append(kwargs))

    with django_capture_on_commit_callbacks(execute=True):
        response = api_client(staff=True).post(
            "/api/sleep-runs/", {"day": "2026-10-01", "mode": "incremental"}, format="json"
        )

    assert response.status_code == 202 and response.json()["queued"] is True
    assert queued == [{"day": "2026-10-01", "step": None, "force": False, "mode": "incremental", "trigger": "manual"}]
    assert not PipelineRun.objects.exists()


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


def test_a_busy_cycle_is_a_409():
    with pipeline_lock(pipeline=SLEEP_CYCLE):
        response = api_client(staff=True).post("/api/sleep-runs/", {"day": "2026-10-01"}, format="json")

    assert response.status_code == 409


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
