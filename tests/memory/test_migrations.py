"""Data migrations of the memory app, run on rows as an earlier version left them."""

from __future__ import annotations

import importlib

from django.apps import apps

from anima.core.models import MemoryStatus
from memory.models import SemanticMemory
from memory.services import memory_expire
from tests.factories import ConversationFactory, PersonFactory, SemanticMemoryFactory

provenance = importlib.import_module("memory.migrations.0005_restated_facts_provenance")


def test_a_fact_kept_over_its_restatements_takes_over_where_they_were_said_once():
    person = PersonFactory()
    first, second = ConversationFactory(person=person), ConversationFactory(person=person)
    kept = SemanticMemoryFactory(
        person=person, content="Maya is allergic to peanuts", pinned=True, body={"tags": ["x"]}
    )
    for chat in (first, second):
        copy = SemanticMemoryFactory(
            person=person, content=kept.content, source_conversation=chat, body={"source_conversations": [chat.pk]}
        )
        memory_expire(memory=copy, reason=f"restates #{kept.pk}", superseded_by=kept)
    # Replaced by a correction, not a restatement: where it was said is not where the new fact was.
    corrected = SemanticMemoryFactory(person=person, content="Maya lives in Porto", source_conversation=first)
    newer = SemanticMemoryFactory(person=person, content="Maya lives in Lisbon")
    memory_expire(memory=corrected, reason=f"corrected to #{newer.pk}", superseded_by=newer)
    edited_at = kept.updated_at

    provenance.forwards(apps, None)
    provenance.forwards(apps, None)  # idempotent

    kept.refresh_from_db()
    newer.refresh_from_db()
    assert kept.body == {"tags": ["x"], "source_conversations": sorted([first.pk, second.pk])}
    assert (kept.updated_at, kept.status) == (edited_at, MemoryStatus.ACTIVE)
    assert "source_conversations" not in newer.body
    assert SemanticMemory.objects.filter(status=MemoryStatus.EXPIRED).count() == 3
