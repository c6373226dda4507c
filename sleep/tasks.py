"""Celery tasks of the sleep cycle (thin adapters over ``sleep.services``) and how a requested run starts.

Runs are never lost with their worker: the task is acknowledged late and rejected when its worker
dies (settings), so the broker hands it to another worker, which carries on the same run (every
step is idempotent). Without a broker a requested run is carried out by a background thread of
the requesting process, never inside the request.

With ``ANIMA_SLEEP_FANOUT`` (on when a broker and a result backend are configured) the run stops
at light sleep and hands out a chord: one ``run_sleep_item`` per conversation, spread over every
worker process, whose join (``join_sleep_run``) writes the outline and carries the run on. No task
waits for another; each item is done once (a redelivered one finds it done, or does it again if
its worker died first), and the join reads the items' rows, not the chord's results.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading

from celery import chord, shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError, connections, transaction
from kombu.exceptions import OperationalError as KombuOperationalError

from anima.core.errors import Unavailable
from sleep.models import PipelineRun, RunTrigger
from sleep.pipeline import PipelineBusy, PipelineItemBusy, pipeline_fanout_waiting
from sleep.services import (
    sleep_cycle_run,
    sleep_fanout_join,
    sleep_item_run,
    sleep_queue_expire,
    sleep_run_carry_out,
    sleep_run_fail,
)

logger = logging.getLogger(__name__)

# A requested run waits for a busy lock (an operator's command run) this often, this long apart.
BUSY_RETRIES = 20
BUSY_RETRY_SECONDS = 60
# A delivered item or join waits this often, this long apart, while another task holds its item or the lock.
FANOUT_BUSY_RETRIES = 120
FANOUT_BUSY_RETRY_SECONDS = 10


@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    # Only a lost database is worth retrying; a refused request is not.
    autoretry_for=(OperationalError, InterfaceError),
    max_retries=3,
    retry_backoff=60,
    retry_backoff_max=900,
)
def run_sleep_cycle(
    self,
    day: str | None = None,
    step: str | None = None,
    force: bool = False,
    mode: str | None = None,
    trigger: str = RunTrigger.CRON,
    run_id: int | None = None,
) -> dict:
    """A requested run (``run_id``), or a scheduled cycle for ``day`` (default yesterday)."""
    task_id = self.request.id or ""
    fan_out = settings.ANIMA_SLEEP_FANOUT
    try:
        if run_id is not None:
            run = sleep_run_carry_out(run_id=run_id, task_id=task_id, fan_out=fan_out)
        else:
            run = sleep_cycle_run(
                day=dt.date.fromisoformat(day) if day else None,
                step=step,
                force=force,
                mode=mode,
                trigger=trigger,
                task_id=task_id,
                fan_out=fan_out,
            )
    except PipelineBusy as exc:
        if run_id is None:
            # A scheduled cycle that finds another running is not needed: the next one catches up.
            logger.warning("sleep cycle not started: %s", exc)
            return {"status": "busy", "error": str(exc)}
        if self.request.retries >= BUSY_RETRIES:
            sleep_run_fail(run_id=run_id, error=f"not started: {exc}")
            return {"run_id": run_id, "status": "failed", "error": str(exc)}
        raise self.retry(countdown=BUSY_RETRY_SECONDS, max_retries=BUSY_RETRIES) from None
    if run is None:
        return {"run_id": run_id, "status": "missing"}
    sleep_run_hand_out(run, queue=_queue(self))
    return _report(run)


def _queue(task) -> str | None:
    """The queue ``task`` came from (None when run eagerly): the fan-out's tasks follow it there."""
    return (task.request.delivery_info or {}).get("routing_key") or None


def _report(run: PipelineRun) -> dict:
    return {"run_id": run.pk, "day": run.day.isoformat(), "status": run.status, "error": run.error}


@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    # A part of a chord: its result is what the join counts.
    ignore_result=False,
    autoretry_for=(OperationalError, InterfaceError),
    max_retries=3,
    retry_backoff=10,
)
def run_sleep_item(self, step_run_id: int, item: int) -> dict:
    """One conversation of a fanned-out light sleep; on its last delivery a budget still held by others is spent."""
    try:
        row = sleep_item_run(
            step_run_id=step_run_id, item=item, wait_for_budget=self.request.retries < FANOUT_BUSY_RETRIES
        )
    except PipelineItemBusy:
        if self.request.retries >= FANOUT_BUSY_RETRIES:
            # Not a failure of the chord: its join finds the item not done and hands it out again.
            return {"item": item, "status": "busy"}
        raise self.retry(countdown=FANOUT_BUSY_RETRY_SECONDS, max_retries=FANOUT_BUSY_RETRIES) from None
    return {"item": item, "status": row.status if row else "gone"}


@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(OperationalError, InterfaceError),
    max_retries=3,
    retry_backoff=60,
)
def join_sleep_run(self, run_id: int) -> dict:
    """The chord's join: once every conversation is done, finish light sleep and carry the run on."""
    try:
        run = sleep_fanout_join(run_id=run_id)
    except PipelineBusy:
        raise self.retry(countdown=FANOUT_BUSY_RETRY_SECONDS, max_retries=FANOUT_BUSY_RETRIES) from None
    if run is None:
        return {"run_id": run_id, "status": "missing"}
    sleep_run_hand_out(run, queue=_queue(self))
    return _report(run)


def sleep_run_hand_out(run: PipelineRun, *, queue: str | None = None) -> None:
    """Send what ``run`` waits for (its fan-out's items not done, then the join), or the cycle it says comes next.

    Called once the lock is released, so that the join can take it (at once, when tasks run eagerly).
    """
    options = {"queue": queue} if queue else {}
    waiting = pipeline_fanout_waiting(run=run)
    if waiting is not None:
        row, pending = waiting
        join = join_sleep_run.si(run_id=run.pk).set(**options)
        if pending:
            chord(run_sleep_item.s(step_run_id=row.pk, item=item).set(**options) for item in pending)(join)
        else:
            join.apply_async()
        return
    then = run.options.get("then")
    if run.finished_at is not None and then:
        kwargs = {"day": then["day"], "trigger": RunTrigger.CRON.value}
        run_sleep_cycle.apply_async(kwargs=kwargs, task_id=then["task_id"] or None, **options)


def sleep_run_dispatch(run: PipelineRun) -> None:
    """Start a requested (queued) run once the current transaction commits.

    On the Celery worker when a broker is configured (the message expires with the queued run),
    else in a background thread of this process. Raises Unavailable, the run closed as failed, when
    the broker does not take the message: a queued run nobody will carry out would refuse every
    other request until it expired.
    """
    if settings.CELERY_BROKER_URL:
        transaction.on_commit(lambda: _send_requested(run))
    else:
        transaction.on_commit(lambda: sleep_run_in_background(run_id=run.pk))


def _send_requested(run: PipelineRun) -> None:
    expires = int(sleep_queue_expire().total_seconds())
    try:
        run_sleep_cycle.apply_async(kwargs={"run_id": run.pk}, expires=expires)
    except (KombuOperationalError, OSError) as exc:
        sleep_run_fail(run_id=run.pk, error=f"not started: the broker did not take it ({exc})")
        raise Unavailable(f"run {run.pk} could not be queued: the broker does not answer ({exc})") from exc


def sleep_run_in_background(*, run_id: int) -> threading.Thread:
    """Carry out a requested run in a daemon thread; if the process dies, the run is closed when next looked at."""

    def work() -> None:
        try:
            sleep_run_carry_out(run_id=run_id)
        except PipelineBusy as exc:
            sleep_run_fail(run_id=run_id, error=f"not started: {exc}")
        except Exception as exc:
            logger.exception("sleep run %s stopped", run_id)
            sleep_run_fail(run_id=run_id, error=f"stopped: {type(exc).__name__}: {exc}")
        finally:
            connections.close_all()  # this thread's connections only

    thread = threading.Thread(target=work, name=f"sleep-run-{run_id}", daemon=True)
    thread.start()
    return thread
