"""Forgetting reaches everything derived: the cascade, the tombstone, the audited path past append-only rows."""

from __future__ import annotations

import datetime as dt
import json
import zoneinfo
from io import StringIO

from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from anima.agent.turn import prepare_turn, system_prompt_ensure
from anima.api.testing import operator_client
from anima.core.models import BlockTag, Entity, MemoryStatus
from conversations.models import Conversation, Person, Role
from memory.forgetting import forget_hook_register, memory_forget
from memory.models import SemanticMemory
from memory.selectors import memory_recall
from sleep.services import sleep_cycle_run
from tests.factories import (
    ConversationFactory,
    HistoryEntryFactory,
    MessageFactory,
    PeerBlockFactory,
    PersonFactory,
)

TZ = zoneinfo.ZoneInfo("Asia/Shanghai")
NIGHTS = (dt.date(2026, 11, 18), dt.date(2026, 11, 19))
SAID = (
    "I'm allergic to quinoa flakes and sesame seeds. I feel anxious about the dinner party.",
    "I'm allergic to quinoa flakes. I'm so happy the dinner went well!",
)


def traces(*needles: str) -> list[tuple[str, str, int]]:
    """(table, column, rows) holding any needle: every text, JSON, tsvector and array column of every table."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND data_type IN ('text', 'character varying', 'json', 'jsonb', 'tsvector', 'ARRAY')"
        )
        columns = cursor.fetchall()
        found = []
        for table, column in columns:
            cursor.execute(
                f'SELECT count(*) FROM "{table}" WHERE "{column}"::text ILIKE ANY(%s)', [[f"%{n}%" for n in needles]]
            )
            (rows,) = cursor.fetchone()
            if rows:
                found.append((table, column, rows))
    return found


def _two_nights(maya: Person) -> Conversation:
    conversation = ConversationFactory(person=maya, channel="cli", chat_id="maya")
    for day, text in zip(NIGHTS, SAID, strict=True):
        at = dt.datetime.combine(day, dt.time(12), tzinfo=TZ)
        MessageFactory(conversation=conversation, role=Role.USER, content=text, created_at=at)
        MessageFactory(
            conversation=conversation,
            role=Role.ASSISTANT,
            content="Noted, I will keep that in mind.",
            created_at=at + dt.timedelta(minutes=1),
        )
    for day in NIGHTS:
        assert sleep_cycle_run(day=day, mode="full").status == "succeeded"
    return conversation


def test_a_fact_consolidated_summarised_and_merged_over_two_nights_is_found_nowhere_once_forgotten(tmp_path):
    maya = PersonFactory(slug="maya", display_name="Maya")
    conversation = _two_nights(maya)
    merged = SemanticMemory.objects.get(status=MemoryStatus.ACTIVE, body__merged_from__isnull=False)
    assert "quinoa" in merged.content
    conversation.refresh_from_db()
    conversation.temporal_day = {"chunks": [{"summary": "Maya is allergic to quinoa flakes.", "topic": "diet"}]}
    conversation.save(update_fields=["temporal_day"])
    PeerBlockFactory(conversation=ConversationFactory(), content="Elsewhere: Maya is allergic to quinoa flakes.")
    HistoryEntryFactory(person=maya, content="Maya told me she is allergic to quinoa flakes and sesame seeds.")
    system_prompt_ensure(conversation=conversation, now=timezone.now())
    assert traces("quinoa")  # everywhere before: memories, diary, summaries, LLM audit, step outputs …

    seen = []
    forget_hook_register(lambda result: seen.append(result.deleted.get("entities", set())))
    tombstone = memory_forget(memory=merged, messages=True, requested_by="maya")

    assert traces("quinoa", "sesame") == []
    # No recall surface, no prompt, no export.
    assert memory_recall(query="quinoa OR sesame OR allergic") == []
    client = operator_client()
    for url in ("/api/memories/?status=expired", "/api/diary/", "/api/temporal-summaries/", "/api/history/?q=allergic"):
        response = client.get(url)
        assert response.status_code == 200 and "quinoa" not in response.content.decode(), url
    conversation.refresh_from_db()  # a turn reads its conversation afresh
    turn = prepare_turn(conversation=conversation, user_message="what can't I eat?", store=False)
    assert "quinoa" not in json.dumps(turn, ensure_ascii=False)
    call_command("export_workspace", str(tmp_path / "ws"), stdout=StringIO())
    exported = [path.read_text() for path in (tmp_path / "ws").rglob("*") if path.is_file()]
    assert exported and not any("quinoa" in text for text in exported)
    # What was not about the fact stays: the feeling of the day, the rest of the message.
    assert Entity.objects.filter(tag=BlockTag.LIMBIC).count() == 2
    assert conversation.messages.filter(content="I feel anxious about the dinner party.").exists()
    assert {merged.pk} <= seen[0]
    assert (tombstone.kind, tombstone.target_id, tombstone.with_messages) == ("memory", merged.pk, True)
    assert merged.pk in tombstone.entity_ids and tombstone.finished_at is not None
    assert "quinoa" not in json.dumps(tombstone.counts)
