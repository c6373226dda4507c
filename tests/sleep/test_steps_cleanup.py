from __future__ import annotations

import datetime as dt

from django.utils import timezone

from conversations.models import Conversation, Role
from sleep.context import StepContext
from sleep.steps import conversation_cleanup
from tests.factories import ConversationFactory, MessageFactory


def _ctx() -> StepContext:
    return StepContext(run_id=0, day=timezone.localdate(), mode="full", force=False, run_key="test", token_budget=None)


def _conversation(roles, *, age_hours: float, archived: bool = False):
    conversation = ConversationFactory(archived=archived)
    for role in roles:
        MessageFactory(conversation=conversation, role=role, created_at=timezone.now() - dt.timedelta(hours=age_hours))
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=timezone.now() - dt.timedelta(hours=age_hours))
    return conversation


def test_cleanup_drops_only_stale_conversations_that_never_became_an_exchange():
    stale_empty = _conversation([], age_hours=30)
    stale_single = _conversation([Role.USER], age_hours=30)
    stale_unanswered = _conversation([Role.USER, Role.USER], age_hours=30)
    recent_empty = _conversation([], age_hours=2)
    real = _conversation([Role.USER, Role.ASSISTANT], age_hours=300)
    archived = _conversation([], age_hours=300, archived=True)

    output = conversation_cleanup(_ctx())

    remaining = set(Conversation.objects.values_list("pk", flat=True))
    assert remaining == {recent_empty.pk, real.pk, archived.pk}
    assert output == {"deleted": 3, "conversation_ids": sorted([stale_empty.pk, stale_single.pk, stale_unanswered.pk])}


def test_a_lone_message_of_the_day_being_slept_waits_for_light_sleep():
    waiting = _conversation([Role.USER], age_hours=30)
    slept_day = timezone.localdate(waiting.messages.get().created_at)
    ctx = StepContext(run_id=0, day=slept_day, mode="full", force=False, run_key="test", token_budget=None)

    assert conversation_cleanup(ctx) == {"deleted": 0, "conversation_ids": []}
    assert Conversation.objects.filter(pk=waiting.pk).exists()
