"""Celery task of the embedding backfill; a thin adapter over ``memory.embedding``."""

from __future__ import annotations

import logging

from celery import shared_task
from django.db import InterfaceError, OperationalError

from anima.core.embeddings import EmbeddingsUnavailable
from memory.embedding import embed_backfill_run

logger = logging.getLogger(__name__)

# The beat schedule runs it every minute: one run stops after this long, before the next one is due.
RUN_SECONDS = 50.0


@shared_task(acks_late=True, autoretry_for=(OperationalError, InterfaceError), max_retries=2, retry_backoff=10)
def embed_backfill() -> dict:
    try:
        return embed_backfill_run(max_seconds=RUN_SECONDS).as_dict()
    except EmbeddingsUnavailable as exc:
        # The next minute's run tries again; what was stored stays stored.
        logger.warning("embedding backfill stopped: %s", exc)
        return {"error": str(exc)}
