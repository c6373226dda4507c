from __future__ import annotations

import datetime as dt

from django.utils import timezone

from anima.core.models import Entity
from conversations.models import Platform, Role
from conversations.services import message_create
from memory.citations import memory_ref_sync
from memory.models import MemoryReference
from tests.factories import ConversationFactory, MessageFactory, SemanticMemoryFactory


def _count(entity) -> int:
    return Entity.objects.get(pk=entity.pk).reference_count


def test_only_user_and_assistant_markers_of_existing_entities_count_once_per_message():
    memory = SemanticMemoryFactory()
    conversation = ConversationFactory()
    message_create(conversation=conversation, role=Role.USER, content=f"[[anima:{memory.pk}]] x [[anima:{memory.pk}]]")
    message_create(conversation=conversation, role=Role.TOOL, content=f"[[anima:{memory.pk}]]")
    message_create(conversation=conversation, role=Role.ASSISTANT, content=f"see {memory.pk} and [[anima:999999999]]")
    assert _count(memory) == 2  # one recent citing message, weight 2
    assert memory_ref_sync()["counts_changed"] == 0


def test_sync_recalibrates_drifted_counts_and_zeroes_uncited_ones():
    cited, uncited = SemanticMemoryFactory(), SemanticMemoryFactory()
    old = timezone.now() - dt.timedelta(days=40)
    MessageFactory(content=f"remember [[anima:{cited.pk}]]", role=Role.ASSISTANT, created_at=old)
    MessageFactory(content=f"[[anima:{cited.pk}]]", role=Role.USER)
    MessageFactory(
        content=f"[[anima:{cited.pk}]]", role=Role.USER, conversation=ConversationFactory(platform=Platform.CRON)
    )
    Entity.objects.filter(pk__in=[cited.pk, uncited.pk]).update(reference_count=17)
    summary = memory_ref_sync()
    assert _count(cited) == 1 + 2  # old message weight 1, recent weight 2; cron ignored
    assert _count(uncited) == 0
    assert summary["references_added"] == 2
    assert summary["counts_changed"] == 2
    assert memory_ref_sync()["counts_changed"] == 0


def test_sync_removes_references_whose_marker_is_gone_and_reweights_by_age():
    memory = SemanticMemoryFactory()
    message = message_create(conversation=ConversationFactory(), role=Role.USER, content=f"[[anima:{memory.pk}]]")
    other = message_create(conversation=ConversationFactory(), role=Role.USER, content=f"[[anima:{memory.pk}]]")
    assert _count(memory) == 4
    type(message).objects.filter(pk=message.pk).update(content="edited away")
    summary = memory_ref_sync(now=timezone.now() + dt.timedelta(days=31))
    assert summary["references_removed"] == 1
    assert summary["weights_changed"] == 1
    assert list(MemoryReference.objects.values_list("message_id", "weight")) == [(other.pk, 1)]
    assert _count(memory) == 1


def test_a_cron_conversation_citing_a_memory_never_counts_on_write():
    memory = SemanticMemoryFactory()
    cron = ConversationFactory(platform=Platform.CRON)
    message_create(conversation=cron, role=Role.ASSISTANT, content=f"nightly report [[anima:{memory.pk}]]")
    assert _count(memory) == 0
    assert memory_ref_sync()["counts_changed"] == 0
