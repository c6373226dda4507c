"""The nightly sleep cycle as a pipeline DAG and its scheduling rules."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from sleep.models import DeepSleepMode, RunTrigger
from sleep.pipeline import Fanout, Pipeline, PipelineBusy, Step


class SleepCycleBusy(PipelineBusy):
    """Another sleep cycle is running (one cycle at a time)."""


def _step(name: str, *depends_on: str, fanout: Fanout | None = None) -> Step:
    # Dotted paths: the step functions are imported only when a step runs.
    return Step(name=name, func=f"sleep.steps.{name.replace('-', '_')}", depends_on=depends_on, fanout=fanout)


# Under a broker, one task per conversation of the day; the outline (a shared write) once they are all done.
LIGHT_SLEEP_FANOUT = Fanout(
    items="sleep.steps.light.light_sleep_conversations",
    item="sleep.steps.light.light_sleep_conversation",
    join="sleep.steps.light.light_sleep_join",
)


# A light sleep that failed for some conversations is partial: the steps after it run on what it consolidated
# (the day summary reads the dialogue itself), and the following nights' light sleep retries those conversations.
SLEEP_CYCLE = Pipeline(
    name="sleep-cycle",
    run_key_prefix="sleep-run",
    busy_error=SleepCycleBusy,
    steps=(
        _step("conversation-cleanup"),
        _step("light-sleep", "conversation-cleanup", fanout=LIGHT_SLEEP_FANOUT),
        _step("deep-sleep", "light-sleep"),
        _step("dream", "light-sleep"),
        _step("self-layer-refresh", "light-sleep"),
        _step("temporal-summary-day", "light-sleep"),
        _step("emotional-tendency", "light-sleep"),
        _step("emotional-imprint", "light-sleep"),
        _step("memory-ref-sync", "deep-sleep"),
        _step("temporal-summary-cascade", "deep-sleep"),
        # Who the facts are about, once deep sleep has settled which facts stand.
        _step("subjects", "deep-sleep"),
    ),
)

# How far back a scheduled run looks for missed days.
CATCH_UP_MAX_DAYS = 7


def sleep_cycle_default_day() -> dt.date:
    """Yesterday in ANIMA_TIME_ZONE: the 02:00 run sleeps the day that just ended."""
    return timezone.localdate() - dt.timedelta(days=1)


def sleep_cycle_mode(*, day: dt.date, trigger: str) -> str:
    """Deep-sleep mode when none is asked for.

    Scheduled runs (cron, catch-up) are full on Mondays and incremental Tuesday to Sunday,
    where the weekday is that of the run date, the morning after the slept ``day`` (so the
    Monday 02:00 run, sleeping Sunday, is full). Manual runs default to full.
    """
    if trigger == RunTrigger.MANUAL:
        return DeepSleepMode.FULL
    run_date = day + dt.timedelta(days=1)
    return DeepSleepMode.FULL if run_date.weekday() == 0 else DeepSleepMode.INCREMENTAL
