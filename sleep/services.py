"""Entry points of the sleep cycle for the command, the Celery task, the console and the API."""

from __future__ import annotations

import datetime as dt
import json
import zoneinfo
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Max, Q, QuerySet
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from anima.core.config import config_get
from conversations.models import Message
from sleep.cycle import CATCH_UP_MAX_DAYS, SLEEP_CYCLE, sleep_cycle_default_day, sleep_cycle_mode
from sleep.models import DeepSleepMode, PipelineRun, RunStatus, RunTrigger
from sleep.pipeline import PipelineError, pipeline_execute, pipeline_lock


def sleep_cycle_run(
    *,
    day: dt.date | None = None,
    step: str | None = None,
    force: bool = False,
    mode: str | None = None,
    trigger: str = RunTrigger.MANUAL,
) -> PipelineRun:
    """Run the sleep cycle (or one step of it) for ``day`` (default: yesterday) and return the run.

    A scheduled full run first catches up the days missed since the last scheduled success.
    Raises ``SleepCycleBusy`` when another cycle holds the lock, ``PipelineError`` when the
    request is refused (unknown step or mode, unmet dependencies).
    """
    day = day or sleep_cycle_default_day()
    if step is not None:
        SLEEP_CYCLE.step(step)
    if mode is not None and mode not in DeepSleepMode.values:
        raise PipelineError(f"unknown mode {mode!r}; one of: {', '.join(DeepSleepMode.values)}")
    token_budget = config_get(section="sleep")["token_budget"]
    with pipeline_lock(pipeline=SLEEP_CYCLE):
        if trigger == RunTrigger.CRON and step is None:
            for missed in sleep_cycle_missed_days(day=day):
                pipeline_execute(
                    pipeline=SLEEP_CYCLE,
                    day=missed,
                    mode=sleep_cycle_mode(day=missed, trigger=RunTrigger.CATCH_UP),
                    trigger=RunTrigger.CATCH_UP,
                    token_budget=token_budget,
                )
        return pipeline_execute(
            pipeline=SLEEP_CYCLE,
            day=day,
            mode=mode or sleep_cycle_mode(day=day, trigger=trigger),
            trigger=trigger,
            force=force,
            step=step,
            token_budget=token_budget,
        )


def sleep_cycle_missed_days(*, day: dt.date) -> list[dt.date]:
    """Days before ``day`` a scheduled run should have slept but no full run slept successfully.

    Looks back from the last successful scheduled run, at most CATCH_UP_MAX_DAYS, never before
    the first stored message (nothing to sleep before it).
    """
    first_message_at = Message.objects.order_by("created_at").values_list("created_at", flat=True).first()
    if first_message_at is None:
        return []
    start = max(day - dt.timedelta(days=CATCH_UP_MAX_DAYS), timezone.localdate(first_message_at))
    last_scheduled = (
        _full_runs()
        .filter(status=RunStatus.SUCCEEDED, trigger__in=[RunTrigger.CRON, RunTrigger.CATCH_UP], day__lt=day)
        .aggregate(day=Max("day"))["day"]
    )
    if last_scheduled is not None:
        start = max(start, last_scheduled + dt.timedelta(days=1))
    slept = set(
        _full_runs().filter(status=RunStatus.SUCCEEDED, day__gte=start, day__lt=day).values_list("day", flat=True)
    )
    days = (start + dt.timedelta(days=offset) for offset in range((day - start).days))
    return [missed for missed in days if missed not in slept]


def _full_runs() -> QuerySet[PipelineRun]:
    """Runs of the whole cycle (single-step runs do not count as a slept day)."""
    return PipelineRun.objects.filter(pipeline=SLEEP_CYCLE.name).filter(
        Q(options__step=None) | Q(options__step__isnull=True)
    )


@dataclass(frozen=True)
class Schedule:
    name: str
    task: str
    minute: str
    hour: str
    kwargs: dict
    # A run still queued this long after its slot is dropped: the next slot (or catch-up) covers it.
    expire_seconds: int
    description: str


SCHEDULES = (
    Schedule(
        name="sleep-cycle",
        task="sleep.tasks.run_sleep_cycle",
        minute="0",
        hour="2",
        kwargs={"trigger": RunTrigger.CRON.value},
        expire_seconds=3 * 3600,
        description="Nightly sleep cycle for yesterday; deep sleep full on Mondays, incremental otherwise.",
    ),
    Schedule(
        name="temporal-tick",
        task="temporal.tasks.temporal_tick",
        minute="0,30",
        hour="*",
        kwargs={},
        expire_seconds=25 * 60,
        description="Half-hourly temporal chunks of active conversations.",
    ),
)


def schedules_setup() -> list[tuple[str, str]]:
    """Create or update the beat schedules from code (idempotent); returns (name, what happened)."""
    results = []
    for schedule in SCHEDULES:
        crontab, _ = CrontabSchedule.objects.get_or_create(
            minute=schedule.minute,
            hour=schedule.hour,
            day_of_week="*",
            day_of_month="*",
            month_of_year="*",
            timezone=zoneinfo.ZoneInfo(settings.ANIMA_TIME_ZONE),
        )
        wanted = {
            "task": schedule.task,
            "crontab": crontab,
            "interval": None,
            "kwargs": json.dumps(schedule.kwargs),
            "expire_seconds": schedule.expire_seconds,
            "description": schedule.description,
            "enabled": True,
        }
        task = PeriodicTask.objects.filter(name=schedule.name).first()
        if task is None:
            PeriodicTask.objects.create(name=schedule.name, **wanted)
            results.append((schedule.name, "created"))
            continue
        changed = [field for field, value in wanted.items() if getattr(task, field) != value]
        for field in changed:
            setattr(task, field, wanted[field])
        if changed:
            task.save()
        results.append((schedule.name, f"updated ({', '.join(changed)})" if changed else "unchanged"))
    return results
