from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest
from django.utils import timezone

from sleep import steps
from sleep.cycle import SLEEP_CYCLE, SleepCycleBusy, sleep_cycle_default_day, sleep_cycle_mode
from sleep.models import PipelineRun
from sleep.pipeline import PipelineError, pipeline_lock
from sleep.services import sleep_cycle_missed_days, sleep_cycle_run
from tests.factories import MessageFactory, PipelineRunFactory, RuntimeConfigFactory

DAY = dt.date(2026, 11, 20)  # a Friday
STEP_FUNCTIONS = [
    "conversation_cleanup",
    "light_sleep",
    "deep_sleep",
    "dream",
    "self_layer_refresh",
    "memory_ref_sync",
    "temporal_summary_day",
    "temporal_summary_cascade",
]


@pytest.fixture
def quiet_steps(monkeypatch):
    """Replace the real steps with ones that only report the day they ran for."""
    for name in STEP_FUNCTIONS:
        monkeypatch.setattr(steps, name, lambda ctx, name=name: {"step": name, "day": ctx.day, "mode": ctx.mode})


def message_on(day: dt.date):
    local_noon = dt.datetime.combine(day, dt.time(12), tzinfo=zoneinfo.ZoneInfo("Asia/Shanghai"))
    return MessageFactory(created_at=local_noon)


def full_runs(**filters) -> list[tuple[dt.date, str, str]]:
    return list(PipelineRun.objects.filter(**filters).order_by("id").values_list("day", "trigger", "status"))


def test_the_dag_is_the_one_of_the_seeds():
    assert {step.name: step.depends_on for step in SLEEP_CYCLE.steps} == {
        "conversation-cleanup": (),
        "light-sleep": ("conversation-cleanup",),
        "deep-sleep": ("light-sleep",),
        "dream": ("light-sleep",),
        "self-layer-refresh": ("light-sleep",),
        "temporal-summary-day": ("light-sleep",),
        "memory-ref-sync": ("deep-sleep",),
        "temporal-summary-cascade": ("deep-sleep",),
    }
    for step in SLEEP_CYCLE.steps:
        assert callable(step.resolve())


@pytest.mark.parametrize(
    ("day", "trigger", "mode"),
    [
        (dt.date(2026, 11, 22), "cron", "full"),  # Sunday, slept by the Monday 02:00 run
        (dt.date(2026, 11, 23), "cron", "incremental"),
        (DAY, "cron", "incremental"),
        (dt.date(2026, 11, 22), "catch-up", "full"),
        (DAY, "manual", "full"),
    ],
)
def test_scheduled_runs_are_full_on_mondays_and_manual_runs_are_full(day, trigger, mode):
    assert sleep_cycle_mode(day=day, trigger=trigger) == mode


def test_the_default_day_is_yesterday_in_the_companions_time_zone():
    assert sleep_cycle_default_day() == timezone.localdate() - dt.timedelta(days=1)


def test_a_manual_cycle_runs_the_real_steps_in_order_with_the_configured_budget():
    RuntimeConfigFactory(section="sleep", values={"token_budget": 12_345})

    run = sleep_cycle_run(day=DAY)

    assert (run.day, run.trigger, run.mode) == (DAY, "manual", "full")
    assert run.options["token_budget"] == 12_345
    rows = list(run.steps.values_list("step", "status"))
    assert [step for step, _ in rows] == [
        "conversation-cleanup",
        "light-sleep",
        "deep-sleep",
        "dream",
        "self-layer-refresh",
        "temporal-summary-day",
        "memory-ref-sync",
        "temporal-summary-cascade",
    ]
    assert run.status == "succeeded", run.steps.exclude(status="succeeded").values("step", "error")


def test_a_second_cycle_while_one_runs_is_refused_with_sleep_cycle_busy(quiet_steps):
    with pipeline_lock(pipeline=SLEEP_CYCLE):  # another session holds the cycle's lock
        with pytest.raises(SleepCycleBusy, match="sleep-cycle is already running"):
            sleep_cycle_run(day=DAY)
    assert PipelineRun.objects.count() == 0

    assert sleep_cycle_run(day=DAY).status == "succeeded"


def test_bad_requests_are_refused_before_anything_runs(quiet_steps):
    with pytest.raises(PipelineError, match="unknown step 'rem-sleep'"):
        sleep_cycle_run(day=DAY, step="rem-sleep")
    with pytest.raises(PipelineError, match="unknown mode 'deep'"):
        sleep_cycle_run(day=DAY, mode="deep")
    with pytest.raises(PipelineError, match="light-sleep has not succeeded"):
        sleep_cycle_run(day=DAY, step="dream")
    assert PipelineRun.objects.count() == 0


def test_the_scheduled_run_first_catches_up_the_days_missed_during_downtime(quiet_steps):
    message_on(DAY - dt.timedelta(days=30))
    PipelineRunFactory(day=DAY - dt.timedelta(days=5), trigger="cron", status="succeeded")
    PipelineRunFactory(day=DAY - dt.timedelta(days=3), trigger="manual", status="succeeded")
    earlier = PipelineRunFactory(day=DAY - dt.timedelta(days=2), trigger="cron", status="failed")

    sleep_cycle_run(day=DAY, trigger="cron")

    assert full_runs(id__gt=earlier.pk) == [
        (DAY - dt.timedelta(days=4), "catch-up", "succeeded"),
        (DAY - dt.timedelta(days=2), "catch-up", "succeeded"),
        (DAY - dt.timedelta(days=1), "catch-up", "succeeded"),
        (DAY, "cron", "succeeded"),
    ]
    catch_up = PipelineRun.objects.get(day=DAY - dt.timedelta(days=1), trigger="catch-up")
    assert catch_up.steps.get(step="light-sleep").output["day"] == "2026-11-19"
    assert sleep_cycle_missed_days(day=DAY + dt.timedelta(days=1)) == []


def test_catch_up_looks_back_at_most_a_week():
    message_on(DAY - dt.timedelta(days=30))

    assert sleep_cycle_missed_days(day=DAY) == [DAY - dt.timedelta(days=n) for n in range(7, 0, -1)]


def test_catch_up_never_reaches_before_the_first_message():
    message_on(DAY - dt.timedelta(days=2))

    assert sleep_cycle_missed_days(day=DAY) == [DAY - dt.timedelta(days=2), DAY - dt.timedelta(days=1)]


def test_nothing_is_caught_up_without_messages_or_for_manual_runs(quiet_steps):
    assert sleep_cycle_missed_days(day=DAY) == []

    message_on(DAY - dt.timedelta(days=3))
    sleep_cycle_run(day=DAY)

    assert full_runs() == [(DAY, "manual", "succeeded")]


def test_single_step_runs_do_not_count_as_a_slept_day(quiet_steps):
    message_on(DAY - dt.timedelta(days=1))
    sleep_cycle_run(day=DAY - dt.timedelta(days=1), step="conversation-cleanup")

    assert sleep_cycle_missed_days(day=DAY) == [DAY - dt.timedelta(days=1)]
