"""Celery tasks of the sleep cycle (thin adapters over ``sleep.services``) and the call that queues one."""

from __future__ import annotations

import datetime as dt
import logging

from celery import shared_task
from django.db import InterfaceError, OperationalError, transaction

from sleep.models import RunTrigger
from sleep.pipeline import PipelineBusy
from sleep.services import sleep_cycle_run

logger = logging.getLogger(__name__)


@shared_task(
    # Only a lost database is worth retrying; a busy lock or a refused request is not.
    autoretry_for=(OperationalError, InterfaceError),
    max_retries=3,
    retry_backoff=60,
    retry_backoff_max=900,
)
def run_sleep_cycle(
    day: str | None = None,
    step: str | None = None,
    force: bool = False,
    mode: str | None = None,
    trigger: str = RunTrigger.CRON,
) -> dict:
    try:
        run = sleep_cycle_run(
            day=dt.date.fromisoformat(day) if day else None, step=step, force=force, mode=mode, trigger=trigger
        )
    except PipelineBusy as exc:
        logger.warning("sleep cycle not started: %s", exc)
        return {"status": "busy", "error": str(exc)}
    return {"run_id": run.pk, "day": run.day.isoformat(), "status": run.status, "error": run.error}


def sleep_cycle_enqueue(
    *, day: dt.date | None = None, step: str | None = None, force: bool = False, mode: str | None = None
) -> None:
    """Queue a manual run on the Celery worker once the current transaction commits."""
    kwargs = {
        "day": day.isoformat() if day else None,
        "step": step,
        "force": force,
        "mode": mode,
        "trigger": RunTrigger.MANUAL.value,
    }
    transaction.on_commit(lambda: run_sleep_cycle.delay(**kwargs))
