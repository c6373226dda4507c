"""Celery task of the temporal tick; a thin adapter over ``temporal.tick``."""

from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

from temporal.tick import temporal_tick_run


# The schedule lets a run expire after 25 minutes; retrying a lost database within that is worth it.
@shared_task(autoretry_for=(OperationalError, InterfaceError), max_retries=2, retry_backoff=30)
def temporal_tick() -> dict:
    return temporal_tick_run()
