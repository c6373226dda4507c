"""Celery tasks of the sleep cycle (thin adapters over ``sleep.services``) and how a requested run starts.

Runs are never lost with their worker: the task is acknowledged late and rejected when its worker
dies (settings), so the broker hands it to another worker, which carries on the same run (every
step is idempotent). Without a broker a requested run is carried out by a background thread of
the requesting process, never inside the request.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError, connections, transaction

from sleep.models import PipelineRun, RunTrigger
from sleep.pipeline import PipelineBusy
from sleep.services import sleep_cycle_run, sleep_queue_expire, sleep_run_carry_out, sleep_run_fail

logger = logging.getLogger(__name__)

# A requested run waits for a busy lock (an operator's command run) this often, this long apart.
BUSY_RETRIES = 20
BUSY_RETRY_SECONDS = 60


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
    try:
        if run_id is not None:
            run = sleep_run_carry_out(run_id=run_id, task_id=task_id)
        else:
            run = sleep_cycle_run(
                day=dt.date.fromisoformat(day) if day else None,
                step=step,
                force=force,
                mode=mode,
                trigger=trigger,
                task_id=task_id,
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
    return {"run_id": run.pk, "day": run.day.isoformat(), "status": run.status, "error": run.error}


def sleep_run_dispatch(run: PipelineRun) -> None:
    """Start a requested (queued) run once the current transaction commits.

    On the Celery worker when a broker is configured (the message expires with the queued run),
    else in a background thread of this process.
    """
    if settings.CELERY_BROKER_URL:
        expires = int(sleep_queue_expire().total_seconds())
        transaction.on_commit(lambda: run_sleep_cycle.apply_async(kwargs={"run_id": run.pk}, expires=expires))
    else:
        transaction.on_commit(lambda: sleep_run_in_background(run_id=run.pk))


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
