"""The database itself refuses what must never happen — raw SQL included, not only the ORM."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, ProgrammingError, connection, transaction
from django.utils import timezone

from anima.core.models import BlockTag, Entity, ForgetReason, ForgetTombstone
from anima.core.redaction import forget_redaction
from conversations.models import HistoryEntry
from tests.factories import (
    ContentBlockFactory,
    HistoryEntryFactory,
    MemoryReferenceFactory,
    MessageFactory,
    SemanticMemoryFactory,
)

# pgtrigger's Protect raises from PL/pgSQL; psycopg surfaces it as a ProgrammingError.
REFUSED = ProgrammingError


def _raw(sql: str, params: list) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)


def test_limbic_block_refuses_update_through_raw_sql():
    block = ContentBlockFactory(tag=BlockTag.LIMBIC, content="I feel a quiet warmth")
    with pytest.raises(REFUSED, match="Cannot update or delete rows from entities"):
        _raw("UPDATE entities SET content = 'rewritten' WHERE id = %s", [block.pk])
    block.refresh_from_db()
    assert block.content == "I feel a quiet warmth"


def test_limbic_block_refuses_delete_through_raw_sql_and_orm():
    block = ContentBlockFactory(tag=BlockTag.LIMBIC)
    with pytest.raises(REFUSED):
        _raw("DELETE FROM entities WHERE id = %s", [block.pk])
    with pytest.raises(REFUSED), transaction.atomic():
        Entity.objects.filter(pk=block.pk).delete()
    assert Entity.objects.filter(pk=block.pk).exists()


def test_narrative_and_dream_blocks_stay_editable():
    narrative = ContentBlockFactory(tag=BlockTag.NARRATIVE, content="old")
    _raw("UPDATE entities SET content = 'new' WHERE id = %s", [narrative.pk])
    narrative.refresh_from_db()
    assert narrative.content == "new"


def test_history_entries_are_append_only():
    entry = HistoryEntryFactory(content="we shipped the launch")
    with pytest.raises(REFUSED, match="Cannot update or delete rows from history_entries"):
        _raw("UPDATE history_entries SET content = 'nothing happened' WHERE id = %s", [entry.pk])
    with pytest.raises(REFUSED, match="Cannot update or delete rows from history_entries"):
        _raw("DELETE FROM history_entries WHERE id = %s", [entry.pk])
    assert HistoryEntry.objects.get(pk=entry.pk).content == "we shipped the launch"
    HistoryEntryFactory(person=entry.person)  # appending still works
    assert HistoryEntry.objects.filter(person=entry.person).count() == 2


def test_inserting_a_reference_raises_reference_count_even_from_raw_sql():
    memory = SemanticMemoryFactory()
    message = MessageFactory()
    _raw(
        "INSERT INTO memory_references (entity_id, message_id, weight, created_at) VALUES (%s, %s, 2, now())",
        [memory.pk, message.pk],
    )
    MemoryReferenceFactory(entity=memory, weight=1)
    memory.refresh_from_db()
    assert memory.reference_count == 3


def test_deleting_references_lowers_the_count_and_never_below_zero():
    memory = SemanticMemoryFactory()
    reference = MemoryReferenceFactory(entity=memory, weight=2)
    MemoryReferenceFactory(entity=memory, weight=1)
    _raw("DELETE FROM memory_references WHERE id = %s", [reference.pk])
    memory.refresh_from_db()
    assert memory.reference_count == 1
    with pytest.raises(IntegrityError):
        _raw("UPDATE entities SET reference_count = -1 WHERE id = %s", [memory.pk])


def test_a_message_counts_once_per_cited_entity():
    reference = MemoryReferenceFactory()
    with pytest.raises(IntegrityError):
        _raw(
            "INSERT INTO memory_references (entity_id, message_id, weight, created_at) VALUES (%s, %s, 1, now())",
            [reference.entity_id, reference.message_id],
        )


def test_only_an_open_forget_tombstone_lets_redaction_past_the_append_only_triggers():
    block = ContentBlockFactory(tag=BlockTag.LIMBIC, content="I feel a quiet warmth")
    entry = HistoryEntryFactory(content="we shipped the launch")
    tombstone = ForgetTombstone.objects.create(kind="memory", target_id=1, reason=ForgetReason.OPERATOR)
    with forget_redaction(tombstone_id=tombstone.pk):
        Entity.objects.filter(pk=block.pk).update(content="I feel warmth")
        HistoryEntry.objects.filter(pk=entry.pk).delete()
    assert Entity.objects.get(pk=block.pk).content == "I feel warmth"
    assert not HistoryEntry.objects.filter(pk=entry.pk).exists()
    # Outside it, after it is finished, or naming a tombstone that does not exist: refused.
    with pytest.raises(REFUSED), transaction.atomic():
        Entity.objects.filter(pk=block.pk).update(content="rewritten")
    ForgetTombstone.objects.filter(pk=tombstone.pk).update(finished_at=timezone.now())
    for tombstone_id in (tombstone.pk, tombstone.pk + 1000):
        with pytest.raises(REFUSED), forget_redaction(tombstone_id=tombstone_id):
            Entity.objects.filter(pk=block.pk).delete()
    assert Entity.objects.get(pk=block.pk).content == "I feel warmth"
