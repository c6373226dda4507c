"""Entry points of the sleep cycle for the command, the Celery task, the console and the API."""

from __future__ import annotations

import datetime as dt
import json
import zoneinfo
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q, QuerySet
from django.utils import timezone
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from anima.core.config import config_get
from anima.core.models import MemoryStatus
from conversations.models import Message
from memory.models import SemanticMemory
from memory.services import memory_expire, memory_pin, memory_restore, memory_unpin
from sleep.cycle import CATCH_UP_MAX_DAYS, SLEEP_CYCLE, sleep_cycle_default_day, sleep_cycle_mode
from sleep.models import (
    ACTIVE_STATUSES,
    DeepSleepMode,
    PipelineItemRun,
    PipelineRun,
    PipelineStepRun,
    RunStatus,
    RunTrigger,
)
from sleep.pipeline import (
    PipelineError,
    pipeline_execute,
    pipeline_fanout_join,
    pipeline_item_run,
    pipeline_lock,
    pipeline_run_continue,
    pipeline_run_create,
    pipeline_runs_reap,
    run_interrupted,
    run_resumable,
)

# A partial night counts as slept: the conversations that failed are tried again by the next nights' light sleep.
SLEPT = (RunStatus.SUCCEEDED, RunStatus.PARTIAL)
# A requested run not started within this is closed: the broker lost it, or the process died.
QUEUE_EXPIRE_WITH_BROKER = dt.timedelta(hours=3)
QUEUE_EXPIRE_IN_PROCESS = dt.timedelta(minutes=10)


def sleep_cycle_run(
    *,
    day: dt.date | None = None,
    step: str | None = None,
    force: bool = False,
    mode: str | None = None,
    trigger: str = RunTrigger.MANUAL,
    task_id: str = "",
    fan_out: bool = False,
) -> PipelineRun:
    """Run the sleep cycle (or one step of it) for ``day`` (default: yesterday) here, now, and return the run.

    A scheduled full run first catches up the days missed since the last scheduled success.
    ``task_id`` (the Celery task's) makes a redelivered task carry on the runs it started
    instead of starting new ones. With ``fan_out`` a run stops, still running, where it hands out
    light sleep's conversations (see ``sleep.tasks``); a catch-up run that does records in its
    options the cycle to run again (``then``) once it has finished. Raises ``SleepCycleBusy`` when
    another run is active, ``PipelineError`` when the request is refused (unknown step or mode,
    unmet dependencies).
    """
    day = day or sleep_cycle_default_day()
    _validate(step=step, mode=mode)
    token_budget = config_get(section="sleep")["token_budget"]
    with pipeline_lock(pipeline=SLEEP_CYCLE):
        if trigger == RunTrigger.CRON and step is None:
            for missed in sleep_cycle_missed_days(day=day):
                run = _run_once(
                    task_id=task_id,
                    day=missed,
                    mode=sleep_cycle_mode(day=missed, trigger=RunTrigger.CATCH_UP),
                    trigger=RunTrigger.CATCH_UP,
                    token_budget=token_budget,
                    fan_out=fan_out,
                )
                if run.status == RunStatus.RUNNING:
                    then = {"day": day.isoformat(), "task_id": task_id}
                    PipelineRun.objects.filter(pk=run.pk).update(options={**run.options, "then": then})
                    run.refresh_from_db()
                    return run
        return _run_once(
            task_id=task_id,
            day=day,
            mode=mode or sleep_cycle_mode(day=day, trigger=trigger),
            trigger=trigger,
            force=force,
            step=step,
            token_budget=token_budget,
            fan_out=fan_out,
        )


def _validate(*, step: str | None, mode: str | None) -> None:
    if step is not None:
        SLEEP_CYCLE.step(step)
    if mode is not None and mode not in DeepSleepMode.values:
        raise PipelineError(f"unknown mode {mode!r}; one of: {', '.join(DeepSleepMode.values)}")


def _run_once(*, task_id: str, day: dt.date, fan_out: bool, **options) -> PipelineRun:
    """The run of ``task_id`` for ``day``: carried on if its process died, returned as is if finished, else new."""
    if task_id:
        earlier = PipelineRun.objects.filter(pipeline=SLEEP_CYCLE.name, day=day, options__task_id=task_id).first()
        if earlier is not None:
            if not run_resumable(earlier):
                return earlier
            return pipeline_run_continue(pipeline=SLEEP_CYCLE, run=earlier, fan_out=fan_out)
    return pipeline_execute(pipeline=SLEEP_CYCLE, day=day, task_id=task_id, fan_out=fan_out, **options)


def sleep_queue_expire() -> dt.timedelta:
    """How long a requested run may wait: a broker queue may be long; the background thread starts at once."""
    return QUEUE_EXPIRE_WITH_BROKER if settings.CELERY_BROKER_URL else QUEUE_EXPIRE_IN_PROCESS


def sleep_runs_reap() -> int:
    """Close sleep runs nobody works on (see ``pipeline_runs_reap``)."""
    return pipeline_runs_reap(pipeline=SLEEP_CYCLE, queued_expire=sleep_queue_expire())


def sleep_cycle_request(
    *, day: dt.date | None = None, step: str | None = None, force: bool = False, mode: str | None = None
) -> PipelineRun:
    """A manual run (API, console), stored as ``queued`` for a worker or the background thread to carry out.

    Raises ``SleepCycleBusy`` naming the active run when one is queued or running, and
    ``PipelineError`` when the request is refused.
    """
    day = day or sleep_cycle_default_day()
    _validate(step=step, mode=mode)
    sleep_runs_reap()
    return pipeline_run_create(
        pipeline=SLEEP_CYCLE,
        day=day,
        mode=mode or sleep_cycle_mode(day=day, trigger=RunTrigger.MANUAL),
        trigger=RunTrigger.MANUAL,
        force=force,
        step=step,
        token_budget=config_get(section="sleep")["token_budget"],
        status=RunStatus.QUEUED,
    )


def sleep_run_carry_out(*, run_id: int, task_id: str = "", fan_out: bool = False) -> PipelineRun | None:
    """Carry out a requested run (queued, or interrupted by a dead process); None when it is gone.

    A run already finished is returned as it is (a task delivered twice does nothing twice).
    ``fan_out`` as for ``sleep_cycle_run``. Raises ``SleepCycleBusy`` when another run holds the lock.
    """
    run = PipelineRun.objects.filter(pk=run_id, pipeline=SLEEP_CYCLE.name).first()
    if run is None or not run_resumable(run):
        return run
    with pipeline_lock(pipeline=SLEEP_CYCLE):
        run.refresh_from_db()
        if not run_resumable(run):
            return run
        if task_id and run.options.get("task_id") != task_id:
            PipelineRun.objects.filter(pk=run.pk).update(options={**run.options, "task_id": task_id})
            run.refresh_from_db()
        return pipeline_run_continue(pipeline=SLEEP_CYCLE, run=run, fan_out=fan_out)


def sleep_item_run(*, step_run_id: int, item: int, wait_for_budget: bool = False) -> PipelineItemRun | None:
    """Carry out one conversation of a fanned-out light sleep (see ``pipeline_item_run``)."""
    return pipeline_item_run(pipeline=SLEEP_CYCLE, step_run_id=step_run_id, item=item, wait_for_budget=wait_for_budget)


def sleep_fanout_join(*, run_id: int) -> PipelineRun | None:
    """Once every conversation of its light sleep is done, finish that step and carry the run on.

    A run interrupted after its fan-out (the join's worker died) is carried on. None when the run
    is gone. Raises ``SleepCycleBusy`` when another process holds the lock.
    """
    run = PipelineRun.objects.filter(pk=run_id, pipeline=SLEEP_CYCLE.name).first()
    if run is None or (run.status != RunStatus.RUNNING and not run_interrupted(run)):
        return run
    with pipeline_lock(pipeline=SLEEP_CYCLE):
        return pipeline_fanout_join(pipeline=SLEEP_CYCLE, run=run)


def sleep_run_fail(*, run_id: int, error: str) -> None:
    """Close a requested run that could not be carried out (it stays in the history with why)."""
    PipelineRun.objects.filter(pk=run_id, status__in=ACTIVE_STATUSES).update(
        status=RunStatus.FAILED, error=error, finished_at=timezone.now()
    )


def sleep_cycle_missed_days(*, day: dt.date) -> list[dt.date]:
    """Days before ``day`` a scheduled run should have slept but no full run slept successfully.

    Looks back from the last successful (or partial) scheduled run, at most CATCH_UP_MAX_DAYS, never before
    the first stored message (nothing to sleep before it).
    """
    first_message_at = Message.objects.order_by("created_at").values_list("created_at", flat=True).first()
    if first_message_at is None:
        return []
    start = max(day - dt.timedelta(days=CATCH_UP_MAX_DAYS), timezone.localdate(first_message_at))
    last_scheduled = (
        _full_runs()
        .filter(status__in=SLEPT, trigger__in=[RunTrigger.CRON, RunTrigger.CATCH_UP], day__lt=day)
        .aggregate(day=Max("day"))["day"]
    )
    if last_scheduled is not None:
        start = max(start, last_scheduled + dt.timedelta(days=1))
    slept = set(_full_runs().filter(status__in=SLEPT, day__gte=start, day__lt=day).values_list("day", flat=True))
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
    Schedule(
        name="embed-backfill",
        task="memory.tasks.embed_backfill",
        minute="*",
        hour="*",
        kwargs={},
        expire_seconds=55,
        description="Every minute: embed the memories and messages that have no vector yet (dense recall).",
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


# --- Reviewing a night's deep sleep -----------------------------------------------------------------------------

DEEP_SLEEP_STEP = "deep-sleep"


def deep_sleep_changes(*, step_run: PipelineStepRun) -> list[dict]:
    """The changes one deep sleep made, in the order it made them ([] for any other step)."""
    output = step_run.output if isinstance(step_run.output, dict) else {}
    if step_run.step != DEEP_SLEEP_STEP or not isinstance(output.get("rounds"), list):
        return []
    return [change for entry in output["rounds"] for change in entry.get("changes") or []]


def deep_sleep_night_restore(*, step_run: PipelineStepRun, by: str) -> dict:
    """Undo every change one deep sleep made, the last first, through the memory services.

    A retired memory is active again (its retirement kept in its belief history, and it counts as
    edited by ``by``, so no later night retires it again); a memory the night made (a merge, split
    parts) is retired; a pin or an unpin is reversed. What changed since (forgotten, retired or
    restored meanwhile) is left as it is and listed as skipped. A night is restored once; the
    outcome is kept in the step's output under ``restored``. Raises ``PipelineError`` naming why
    when there is nothing to restore.
    """
    with transaction.atomic():
        step_run = PipelineStepRun.objects.select_for_update().select_related("run").get(pk=step_run.pk)
        changes = deep_sleep_changes(step_run=step_run)
        if not changes:
            raise PipelineError(f"{step_run.step} #{step_run.attempt} of run {step_run.run_id} changed no memory")
        if done := step_run.output.get("restored"):
            raise PipelineError(f"the night of {step_run.run.day} was restored already ({done['at']}, {done['by']})")
        undo = _NightUndo(by=by, note=f"deep sleep of {step_run.run.day} (run {step_run.run_id}) restored by {by}")
        for change in reversed(changes):
            undo.change(change)
        outcome = {"at": timezone.now().isoformat(), "by": by, **undo.outcome()}
        step_run.output = {**step_run.output, "restored": outcome}
        step_run.save(update_fields=["output"])
    return outcome


class _NightUndo:
    def __init__(self, *, by: str, note: str) -> None:
        self.by, self.note = by, note
        self.restored: list[int] = []
        self.retired: list[int] = []
        self.pins: list[int] = []
        self.skipped: list[dict] = []
        self.memories = SemanticMemory.objects.select_for_update()

    def change(self, change: dict) -> None:
        ids = list(change.get("ids") or [])
        action = change.get("action")
        if action == "expire" and ids:
            self._restore(ids[0])
        elif action == "split" and ids:
            for pk in ids[1:]:
                self._retire(pk)
            self._restore(ids[0])
        elif action == "merge" and len(ids) >= 2:
            self._retire(ids[-1])
            for pk in ids[:-1]:
                self._restore(pk)
        elif action in {"pin", "unpin"} and ids:
            self._pin(ids[0], pinned=action == "unpin")

    def _get(self, pk: int) -> SemanticMemory | None:
        memory = self.memories.filter(pk=pk).first()
        if memory is None:
            self.skipped.append({"id": pk, "reason": "no longer stored (forgotten)"})
        return memory

    def _restore(self, pk: int) -> None:
        memory = self._get(pk)
        if memory is None:
            return
        if memory.status == MemoryStatus.ACTIVE:
            self.skipped.append({"id": pk, "reason": "already active"})
            return
        memory_restore(memory=memory, by=self.by, note=self.note)
        self.restored.append(pk)

    def _retire(self, pk: int) -> None:
        memory = self._get(pk)
        if memory is None:
            return
        if memory.status != MemoryStatus.ACTIVE:
            self.skipped.append({"id": pk, "reason": f"already {memory.status}"})
            return
        memory_expire(memory=memory, reason=self.note)
        self.retired.append(pk)

    def _pin(self, pk: int, *, pinned: bool) -> None:
        memory = self._get(pk)
        if memory is None:
            return
        if memory.pinned == pinned:
            self.skipped.append({"id": pk, "reason": "pinned" if pinned else "not pinned"})
            return
        (memory_pin if pinned else memory_unpin)(memory=memory)
        self.pins.append(pk)

    def outcome(self) -> dict:
        return {"restored": self.restored, "retired": self.retired, "pins": self.pins, "skipped": self.skipped}
