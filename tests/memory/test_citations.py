"""[[anima:ID]] citations and their counts.

Memories are global (no person) unless a test is about whose they are: any conversation may cite them.
"""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from anima.core.models import Entity
from conversations.models import Message, Platform, Role
from conversations.services import message_create
from memory.citations import memory_ref_sync
from memory.models import MemoryReference
from memory.services import MemoryPart, memory_expire, memory_merge, memory_split
from tests.factories import (
    ConversationFactory,
    IdentityFactory,
    MemoryReferenceFactory,
    MessageFactory,
    PersonFactory,
    SemanticMemoryFactory,
)


def _count(entity) -> int:
    return Entity.objects.get(pk=entity.pk).reference_count


def test_only_user_and_assistant_markers_of_existing_entities_count_once_per_message():
    memory = SemanticMemoryFactory(person=None)
    conversation = ConversationFactory()
    message_create(conversation=conversation, role=Role.USER, content=f"[[anima:{memory.pk}]] x [[anima:{memory.pk}]]")
    message_create(conversation=conversation, role=Role.TOOL, content=f"[[anima:{memory.pk}]]")
    message_create(conversation=conversation, role=Role.ASSISTANT, content=f"see {memory.pk} and [[anima:999999999]]")
    assert _count(memory) == 2  # one recent citing message, weight 2
    assert memory_ref_sync()["counts_changed"] == 0


def test_sync_recalibrates_drifted_counts_and_zeroes_uncited_ones():
    cited, uncited = SemanticMemoryFactory(person=None), SemanticMemoryFactory(person=None)
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
    memory = SemanticMemoryFactory(person=None)
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
    memory = SemanticMemoryFactory(person=None)
    cron = ConversationFactory(platform=Platform.CRON)
    message_create(conversation=cron, role=Role.ASSISTANT, content=f"nightly report [[anima:{memory.pk}]]")
    assert _count(memory) == 0
    assert memory_ref_sync()["counts_changed"] == 0


def test_a_merged_or_split_memory_passes_its_citations_on_but_a_changed_one_keeps_them():
    first, second, changed, newer = (SemanticMemoryFactory(person=None) for _ in range(4))
    conversation = ConversationFactory()
    message_create(conversation=conversation, role=Role.USER, content=f"[[anima:{first.pk}]] [[anima:{second.pk}]]")
    message_create(conversation=conversation, role=Role.ASSISTANT, content=f"[[anima:{second.pk}]]")
    message_create(conversation=conversation, role=Role.ASSISTANT, content=f"[[anima:{changed.pk}]]")
    merged = memory_merge(sources=[first, second], content="both", memory_type="world", external_id="m")
    (part, _) = memory_split(
        memory=merged,
        parts=[MemoryPart(memory_type="world", content=t, external_id=t) for t in ("one", "two")],
    )
    memory_expire(memory=changed, reason="changed", superseded_by=newer)

    memory_ref_sync()

    assert _count(merged) == 2 + 2  # two citing messages, each counted once
    assert _count(part) == 4  # and on through the split
    assert _count(changed) == 2 and _count(newer) == 0


def test_a_conversation_counts_only_citations_of_what_its_person_could_see():
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    leos, mayas, everyones = (SemanticMemoryFactory(person=p) for p in (leo, maya, None))
    IdentityFactory(channel="telegram", external_id="100", person=leo)
    by_account = ConversationFactory(person=None, platform="telegram", channel="telegram", chat_id="100")
    stranger = ConversationFactory(person=None, platform="telegram", channel="telegram", chat_id="999")
    citing_all = f"[[anima:{leos.pk}]] [[anima:{mayas.pk}]] [[anima:{everyones.pk}]]"
    for conversation in (ConversationFactory(person=leo), by_account, stranger):
        message_create(conversation=conversation, role=Role.ASSISTANT, content=citing_all)

    assert (_count(leos), _count(mayas), _count(everyones)) == (4, 0, 6)
    # The nightly recount follows the same rule: a reference to Maya's memory stored before it held is dropped.
    MemoryReferenceFactory(entity=mayas, message=Message.objects.filter(conversation=by_account).get(), weight=2)
    summary = memory_ref_sync()
    assert (_count(leos), _count(mayas), _count(everyones)) == (4, 0, 6)
    assert summary["references_removed"] == 1 and summary["references_added"] == 0
