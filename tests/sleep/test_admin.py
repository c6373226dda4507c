"""The Sleep page (/admin/sleep/dashboard/): diagnostic runs, history, retries."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone

from anima.core.models import MemoryStatus
from memory.models import SemanticMemory
from sleep.context import StepContext
from sleep.models import PipelineRun, PipelineStepRun, StepStatus
from sleep.services import deep_sleep_changes
from sleep.steps import deep_sleep
from tests.factories import (
    AutoLlmRunFactory,
    ConversationFactory,
    PersonFactory,
    PipelineRunFactory,
    PipelineStepRunFactory,
    SemanticMemoryFactory,
    UserFactory,
)

DASHBOARD = "/admin/sleep/dashboard/"
DAY = dt.date(2026, 7, 18)


def _messages(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def test_dashboard_lives_at_the_seeds_address_and_needs_staff(client, admin_client):
    assert reverse("admin:sleep_dashboard") == DASHBOARD
    assert "/login/" in client.get(DASHBOARD)["Location"]
    client.force_login(UserFactory(is_staff=True))  # staff without sleep permissions
    assert client.get(DASHBOARD).status_code == 403
    page = admin_client.get(DASHBOARD).content.decode()
    assert "Run the sleep cycle" in page and "Pipeline history" in page
    assert 'value="light-sleep"' in page and 'value="incremental"' in page


@pytest.mark.django_db(transaction=True)
def test_one_step_for_a_historical_day_runs_in_the_background_and_lands_in_the_history(admin_client, finished_run):
    stale = ConversationFactory(updated_at=timezone.now() - dt.timedelta(days=3))
    response = admin_client.post(
        DASHBOARD, {"day": DAY.isoformat(), "step": "conversation-cleanup", "force": "on", "mode": "full"}, follow=True
    )
    run = finished_run(PipelineRun.objects.get().pk)

    assert any(
        f"Started conversation-cleanup for 2026-07-18 (force), mode full (run {run.pk}) in the background" in m
        for m in _messages(response)
    )
    assert (run.day, run.options["step"], run.options["force"]) == (DAY, "conversation-cleanup", True)
    step = run.steps.get()
    assert step.status == StepStatus.SUCCEEDED and step.output["conversation_ids"] == [stale.pk]
    page = admin_client.get(DASHBOARD).content.decode()
    assert 'data-step="conversation-cleanup" data-status="succeeded"' in page
    assert "2026-07-18" in page


def test_a_refused_run_is_a_message_naming_the_missing_dependency(admin_client):
    response = admin_client.post(
        DASHBOARD, {"day": DAY.isoformat(), "step": "light-sleep", "mode": "full"}, follow=True
    )
    assert response.status_code == 200
    assert any("conversation-cleanup has not succeeded" in m and "force" in m for m in _messages(response))
    assert not PipelineRun.objects.exists()


def test_a_bad_form_is_shown_again_with_errors(admin_client):
    response = admin_client.post(DASHBOARD, {"day": "not a day", "step": "no-such-step", "mode": "full"})
    assert response.status_code == 200
    assert set(response.context["form"].errors) == {"day", "step"}
    assert not PipelineRun.objects.exists()


@pytest.mark.parametrize("day", ["1899-12-31", "2200-01-01"])
def test_a_day_outside_1900_to_2199_is_refused_by_the_form(admin_client, day):
    response = admin_client.post(DASHBOARD, {"day": day, "step": "memory-ref-sync", "force": "on", "mode": "full"})
    assert response.status_code == 200
    assert response.context["form"].errors == {"day": ["must be between 1900-01-01 and 2199-12-31"]}
    assert not PipelineRun.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_mode_is_passed_to_the_run(admin_client, finished_run):
    admin_client.post(DASHBOARD, {"day": DAY.isoformat(), "step": "deep-sleep", "force": "on", "mode": "incremental"})
    run = finished_run(PipelineRun.objects.get().pk)
    assert run.mode == "incremental"
    assert run.steps.get().output["mode"] == "incremental"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("status", [StepStatus.FAILED, StepStatus.PARTIAL])
def test_retry_of_a_failed_or_partial_step_is_a_new_attempt(admin_client, finished_run, status):
    failed = PipelineStepRunFactory(
        run=PipelineRunFactory(day=DAY, options={"step": None, "force": False}, status=status),
        step="conversation-cleanup",
        status=status,
        error="OperationalError: connection lost",
    )
    page = admin_client.get(DASHBOARD).content.decode()
    assert f'name="retry" value="{failed.pk}"' in page
    response = admin_client.post(DASHBOARD, {"retry": failed.pk}, follow=True)
    run = finished_run(PipelineRun.objects.exclude(pk=failed.run_id).get().pk)
    retried = run.steps.get()
    assert (retried.step, retried.attempt, retried.status) == ("conversation-cleanup", 2, StepStatus.SUCCEEDED)
    assert retried.run.day == DAY
    assert any("Started conversation-cleanup" in m for m in _messages(response))


def test_only_failed_steps_can_be_retried(admin_client):
    done = PipelineStepRunFactory(step="conversation-cleanup", status=StepStatus.SUCCEEDED)
    assert f'name="retry" value="{done.pk}"' not in admin_client.get(DASHBOARD).content.decode()
    response = admin_client.post(DASHBOARD, {"retry": done.pk}, follow=True)
    assert any("nothing to retry" in m for m in _messages(response))
    assert PipelineStepRun.objects.count() == 1


def test_deep_sleep_rounds_and_change_log_are_readable(admin_client):
    PipelineStepRunFactory(
        step="deep-sleep",
        status=StepStatus.SUCCEEDED,
        output={
            "mode": "full",
            "rounds": [
                {
                    "round": "contradiction_expiry",
                    "summary": "1 subject groups checked, 1 memories expired",
                    "changes": [
                        {
                            "action": "expire",
                            "ids": [41],
                            "before": {"content": "女儿属虎", "status": "active"},
                            "after": {"status": "expired", "superseded_by": 42},
                        }
                    ],
                },
                {"round": "split", "summary": "skipped: no active memory changed in 24 h", "changes": []},
            ],
        },
    )
    page = admin_client.get(DASHBOARD).content.decode()
    assert "<strong>contradiction_expiry</strong>: 1 subject groups checked, 1 memories expired" in page
    assert "<strong>split</strong>: skipped: no active memory changed in 24 h" in page
    assert "&quot;content&quot;: &quot;女儿属虎&quot;" in page  # CJK as characters, not \\u escapes
    assert "<td>expire</td><td><a href='/admin/memory/semanticmemory/41/change/'>#41</a></td>" in page


def test_with_a_broker_the_run_is_queued_on_celery_not_run_here(
    admin_client, settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.CELERY_BROKER_URL = "redis://broker.invalid:6379/0"
    queued: list[dict] = []
    monkeypatch.setattr("sleep.tasks.run_sleep_cycle.apply_async", lambda **kwargs: queued.append(kwargs))
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            DASHBOARD, {"day": DAY.isoformat(), "step": "light-sleep", "force": "on", "mode": "incremental"}
        )
    assert response.status_code == 302
    run = PipelineRun.objects.get()
    assert queued == [{"kwargs": {"run_id": run.pk}, "expires": 3 * 3600}]
    assert (run.status, run.mode, run.options["step"], run.options["force"]) == (
        "queued",
        "incremental",
        "light-sleep",
        True,
    )
    assert not run.steps.exists()


@pytest.mark.django_db(transaction=True)  # the run is sent as the request commits, inside it
def test_with_the_broker_down_the_page_says_so_and_no_run_stays_queued(admin_client, broker_down):
    response = admin_client.post(
        DASHBOARD, {"day": DAY.isoformat(), "step": "conversation-cleanup", "mode": "full"}, follow=True
    )

    assert response.status_code == 200
    assert any(m.startswith("Not run: ") and "the broker does not answer" in m for m in _messages(response))
    assert PipelineRun.objects.get().status == "failed"


def test_a_run_whose_process_died_is_shown_failed_on_the_sleep_page(admin_client):
    dead = PipelineRunFactory(day=DAY, status="running")
    dead.steps.create(step="light-sleep", status="running")

    page = admin_client.get(DASHBOARD).content.decode()

    dead.refresh_from_db()
    assert dead.status == "failed" and dead.error.startswith("interrupted")
    assert 'data-status="running"' not in page


@pytest.mark.parametrize("url_name", ["admin:sleep_pipelinerun_changelist", "admin:index"])
def test_console_links_to_the_sleep_page(admin_client, url_name):
    assert f'href="{DASHBOARD}"' in admin_client.get(reverse(url_name)).content.decode()


@pytest.mark.parametrize("value", ["abc", "", "٣", "1" * 30])
def test_a_malformed_retry_id_is_a_404_not_an_error(admin_client, value):
    response = admin_client.post("/admin/sleep/dashboard/", {"retry": value})
    assert response.status_code == 404


def test_the_sleep_page_says_which_mind_each_run_ran_on_and_which_the_next_will(admin_client, settings):
    run = PipelineRunFactory(day=DAY, status="succeeded")
    for _ in range(2):
        AutoLlmRunFactory(
            run_key=f"sleep-run:{run.pk}", provider="openai", model="qwen2.5-0.5b", dialect="json_object_schema"
        )
    AutoLlmRunFactory(run_key="sleep-run:999999", provider="openai", model="other", dialect="json_schema")
    settings.ANIMA_LLM_PROVIDER = "openai"
    settings.ANIMA_LLM_MODEL = "qwen2.5-0.5b"
    settings.ANIMA_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    settings.ANIMA_LLM_STRUCTURED = "json_object_schema"

    page = admin_client.get(DASHBOARD).content.decode()

    assert "ran on openai server, model qwen2.5-0.5b, structured output json_object_schema: 2 calls" in page
    assert "model other" not in page
    assert "LLM for the next run: openai server, model qwen2.5-0.5b, structured output json_object_schema" in page


def test_the_sleep_page_names_the_offline_provider_when_it_is_the_mind(admin_client):
    page = admin_client.get(DASHBOARD).content.decode()
    assert "LLM for the next run: offline provider" in page


def _deep_sleep_night(**step) -> PipelineStepRun:
    """A deep sleep carried out now (offline mind), stored as a run's step as the pipeline stores it."""
    output = deep_sleep(StepContext(run_id=0, day=DAY, mode="full", force=False, run_key="test", token_budget=None))
    return PipelineStepRunFactory(step="deep-sleep", status=StepStatus.SUCCEEDED, output=output, **step)


def test_a_memory_edited_in_the_console_is_the_operators_and_deep_sleep_leaves_it_alone(admin_client):
    maya = PersonFactory(slug="maya", display_name="Maya")
    memory = SemanticMemoryFactory(person=maya, content="Maya lives in Berlin", source_day=dt.date(2026, 11, 1))
    newer = SemanticMemoryFactory(person=maya, content="Maya moved to Munich", source_day=dt.date(2026, 11, 20))
    data = {
        "content": "Maya lives in Berlin-Mitte",
        "memory_type": memory.memory_type,
        "status": memory.status,
        "person": maya.pk,
        "source_day": "2026-11-01",
        "body": "{}",
    }
    response = admin_client.post(reverse("admin:memory_semanticmemory_change", args=[memory.pk]), data)
    assert response.status_code == 302

    step = _deep_sleep_night()

    memory.refresh_from_db()
    newer.refresh_from_db()
    assert memory.body["edited_by"] == "console:admin"
    assert memory.status == newer.status == MemoryStatus.ACTIVE
    assert step.output["rounds"][0]["refused"] == [
        {"action": "expire", "ids": [memory.pk, newer.pk], "reason": f"#{memory.pk} was edited by console:admin"}
    ]
    page = admin_client.get(DASHBOARD).content.decode()
    assert "was edited by console:admin</td>" in page


def test_a_whole_nights_deep_sleep_is_restored_with_one_click_and_stays_restored(admin_client):
    maya = PersonFactory(slug="maya", display_name="Maya")
    berlin = SemanticMemoryFactory(person=maya, content="Maya lives in Berlin", source_day=dt.date(2026, 11, 1))
    munich = SemanticMemoryFactory(person=maya, content="Maya moved to Munich", source_day=dt.date(2026, 11, 20))
    vegetarian = [SemanticMemoryFactory(person=maya, content="Maya is vegetarian") for _ in range(2)]
    step = _deep_sleep_night()
    merged = SemanticMemory.objects.get(content="Maya is vegetarian", status=MemoryStatus.ACTIVE)
    assert [c["action"] for c in deep_sleep_changes(step_run=step)] == ["expire", "merge"]
    assert f'name="restore_night" value="{step.pk}"' in admin_client.get(DASHBOARD).content.decode()

    response = admin_client.post(DASHBOARD, {"restore_night": step.pk}, follow=True)

    restored = f"Restored the night of run {step.run_id}: 3 memories back, 1 the night made retired, 0 pins reversed."
    assert restored in _messages(response)
    for memory in (berlin, *vegetarian):
        memory.refresh_from_db()
        assert memory.status == MemoryStatus.ACTIVE and memory.superseded_by_id is None
        # Belief history keeps what was undone; the memory is the operator's now.
        [undone] = memory.body["restored"]
        assert (undone["by"], undone["status"]) == ("console:admin", MemoryStatus.EXPIRED)
        assert memory.body["edited_by"] == "console:admin"
    assert berlin.body["restored"][0]["superseded_by"] == munich.pk
    timeline = admin_client.get(reverse("admin:memory_semanticmemory_change", args=[berlin.pk])).content.decode()
    assert f"retired (changed, superseded by #{munich.pk}) and restored " in timeline
    assert "by console:admin" in timeline
    merged.refresh_from_db()
    assert merged.status == MemoryStatus.EXPIRED and "restored by console:admin" in merged.expired_reason
    step.refresh_from_db()
    assert sorted(step.output["restored"]["restored"]) == sorted([berlin.pk, *(m.pk for m in vegetarian)])
    page = admin_client.get(DASHBOARD).content.decode()
    assert f'name="restore_night" value="{step.pk}"' not in page and "Restored " in page

    again = admin_client.post(DASHBOARD, {"restore_night": step.pk}, follow=True)
    assert any("was restored already" in m for m in _messages(again))

    # The next night does not undo the operator's restore.
    _deep_sleep_night()
    berlin.refresh_from_db()
    assert berlin.status == MemoryStatus.ACTIVE


def test_restoring_a_night_needs_the_right_to_change_memories(client):
    user = UserFactory(is_staff=True)
    # May run the sleep cycle, not change memories.
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_pipelinerun", "add_pipelinerun"]))
    client.force_login(user)
    step = PipelineStepRunFactory(step="deep-sleep", output={"rounds": [{"round": "merge", "changes": []}]})
    assert client.post(DASHBOARD, {"restore_night": step.pk}).status_code == 403
