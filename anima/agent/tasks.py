"""Celery task of turn assembly; a thin adapter over ``anima.agent.stm``."""

from __future__ import annotations

from datetime import datetime

from celery import shared_task
from django.db import InterfaceError, OperationalError

from anima.agent.stm import short_term_consolidate
from conversations.models import Conversation


@shared_task(acks_late=True, autoretry_for=(OperationalError, InterfaceError), max_retries=2, retry_backoff=10)
def short_term_consolidate_task(*, conversation_id: int, now: str) -> dict:
    """Consolidate a conversation's short-term memory as of the turn (``now``) that found it due."""
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None:
        return {"conversation_id": conversation_id, "status": "missing"}
    view = short_term_consolidate(conversation=conversation, now=datetime.fromisoformat(now))
    return {"conversation_id": conversation_id, "status": "busy" if view is None else "done"}
