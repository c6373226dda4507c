"""`migrate` on an empty database creates every index, constraint and trigger the design relies on."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from anima.core.models import BlockTag
from tests.factories import ContentBlockFactory, DiaryEntryFactory, SemanticMemoryFactory, TemporalSummaryFactory


def _catalog(sql: str) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return {row[0] for row in cursor.fetchall()}


def _index_definitions() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()")
        return dict(cursor.fetchall())


def test_extensions_are_installed():
    assert {"pg_trgm", "unaccent"} <= _catalog("SELECT extname FROM pg_extension")


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        ("entities_search_fts_gin", "USING gin (search_fts)"),
        ("entities_fts_segmented_trgm", 'USING gin ("left"(fts_segmented, 2000) gin_trgm_ops)'),
        ("messages_content_fts_gin", "USING gin (content_fts)"),
        ("messages_fts_segmented_trgm", 'USING gin ("left"(fts_segmented, 2000) gin_trgm_ops)'),
        ("history_search_fts_gin", "USING gin (search_fts)"),
        ("entities_temporal_summary_window_period_unique", "((body ->> 'window'::text)), ((body ->> 'period_start'"),
        ("entities_external_id_unique_per_kind", "WHERE (external_id IS NOT NULL)"),
        ("entities_one_diary_entry_per_day", "WHERE ((primary_component)::text = 'diary_entry'::text)"),
        ("entities_one_dream_per_diary_day", "'dream'::text"),
        ("messages_external_id_unique_per_conversation", "(conversation_id, external_id)"),
        ("identities_channel_external_id_unique", "(channel, external_id)"),
        ("memory_references_once_per_message", "(message_id, entity_id)"),
    ],
)
def test_index_exists_with_its_definition(index, expected):
    definitions = _index_definitions()
    assert index in definitions
    assert expected in definitions[index]


def test_generated_tsvector_columns_are_stored_generated_columns():
    rows = _catalog(
        "SELECT table_name || '.' || column_name FROM information_schema.columns "
        "WHERE is_generated = 'ALWAYS' AND table_schema = current_schema()"
    )
    assert {"entities.search_fts", "messages.content_fts", "history_entries.search_fts"} <= rows


def test_triggers_exist():
    triggers = _catalog("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
    expected = {
        "pgtrigger_limbic_blocks_append_only",
        "pgtrigger_history_entries_append_only",
        "pgtrigger_reference_count_on_insert",
        "pgtrigger_reference_count_on_delete",
        "pgtrigger_reference_count_on_update",
    }
    assert {name.rsplit("_", 1)[0] for name in triggers} >= expected


def test_check_constraints_exist():
    constraints = _catalog("SELECT conname FROM pg_constraint WHERE contype = 'c'")
    assert {
        "entities_semantic_memory_has_type_and_status",
        "entities_content_block_has_tag_and_parent",
        "entities_reference_count_non_negative",
    } <= constraints


def test_seed_table_names():
    tables = _catalog("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
    assert {
        "entities",
        "conversations",
        "messages",
        "memory_references",
        "auto_llm_runs",
        "pipeline_run",
        "pipeline_step_run",
        "persons",
        "identities",
        "history_entries",
        "self_layer_blocks",
    } <= tables


def test_one_temporal_summary_per_window_and_period():
    TemporalSummaryFactory(body={"window": "day", "period_start": "2026-11-27"})
    TemporalSummaryFactory(body={"window": "month", "period_start": "2026-11-27"})
    with pytest.raises(IntegrityError), transaction.atomic():
        TemporalSummaryFactory(body={"window": "day", "period_start": "2026-11-27"})


def test_one_diary_entry_and_one_dream_per_day():
    diary = DiaryEntryFactory()
    ContentBlockFactory(parent=diary, tag=BlockTag.DREAM)
    ContentBlockFactory(parent=diary, tag=BlockTag.LIMBIC)
    ContentBlockFactory(parent=diary, tag=BlockTag.LIMBIC)
    with pytest.raises(IntegrityError), transaction.atomic():
        ContentBlockFactory(parent=diary, tag=BlockTag.DREAM)
    with pytest.raises(IntegrityError), transaction.atomic():
        DiaryEntryFactory._meta.model.objects.create(source_day=diary.source_day)


def test_external_id_is_unique_per_kind_only():
    SemanticMemoryFactory(external_id="same")
    ContentBlockFactory(external_id="same")  # another kind may reuse it
    with pytest.raises(IntegrityError), transaction.atomic():
        SemanticMemoryFactory(external_id="same")


def test_semantic_memory_needs_type_and_status_in_the_database():
    memory = SemanticMemoryFactory()
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE entities SET memory_type = NULL WHERE id = %s", [memory.pk])
