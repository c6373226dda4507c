"""Conversation cleanup: drop stale conversations that never became a real exchange."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, Q
from django.utils import timezone

from anima.core.calendar import day_start
from conversations.models import Conversation, Role
from sleep.context import StepContext

STALE_AFTER = timedelta(hours=24)


def conversation_cleanup(ctx: StepContext) -> dict:
    """Delete non-archived conversations idle for 24 h (wall clock) with 0 or 1 message or no assistant reply."""
    stale = (
        Conversation.objects.filter(archived=False, updated_at__lt=timezone.now() - STALE_AFTER)
        # History entries keep their conversation (PROTECT): a consolidated conversation is never dropped.
        .filter(history_entries__isnull=True)
        # Messages of the day being slept (or later) wait for light sleep to read them first.
        .exclude(messages__created_at__gte=day_start(ctx.day))
        .annotate(
            message_count=Count("messages", distinct=True),
            reply_count=Count("messages", filter=Q(messages__role=Role.ASSISTANT), distinct=True),
        )
        .filter(Q(message_count__lte=1) | Q(reply_count=0))
    )
    ids = sorted(stale.values_list("pk", flat=True))
    Conversation.objects.filter(pk__in=ids).delete()
    return {"deleted": len(ids), "conversation_ids": ids}
