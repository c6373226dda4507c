from __future__ import annotations

from django.db import connection

from tests.factories import (
    AutoLlmRunFactory,
    ContentBlockFactory,
    ConversationFactory,
    HistoryEntryFactory,
    IdentityFactory,
    MemoryReferenceFactory,
    MessageFactory,
    PipelineStepRunFactory,
    RuntimeConfigChangeFactory,
    RuntimeConfigFactory,
    SelfLayerBlockFactory,
    SemanticMemoryFactory,
    TemporalSummaryFactory,
)


def test_every_factory_writes_a_row_with_its_searchable_text_segmented():
    memory = SemanticMemoryFactory(content="我女儿小雨属虎")
    assert memory.fts_segmented.split()[:4] == ["我", "女儿", "小雨", "属虎"]
    assert ContentBlockFactory().parent.primary_component == "diary_entry"
    assert TemporalSummaryFactory().body["window"] == "day"
    assert HistoryEntryFactory().fts_segmented
    assert IdentityFactory().person.slug
    assert MemoryReferenceFactory().weight == 1
    assert SelfLayerBlockFactory().key == "self_model"
    assert AutoLlmRunFactory().total_tokens == 0
    assert PipelineStepRunFactory().attempt == 1
    assert RuntimeConfigFactory().section == "memory.passive_recall"
    assert RuntimeConfigChangeFactory().after == {"limit": 7}


def test_search_indexes_keep_at_most_64_kb_of_entries_queued_for_searches_to_read():
    """A GIN index's pending list is read by every search until it is merged: recall's indexes merge it at 64 kB."""
    conversation = ConversationFactory()
    words = "西湖 徒步 pasta harbor nurse Lisbon 杭州 工作 river bakery 火锅 piano".split()
    for number in range(300):
        text = " ".join(words[(number + k) % len(words)] for k in range(6)) + f" #{number}"
        MessageFactory(conversation=conversation, content=text)
        SemanticMemoryFactory(content=text)
        HistoryEntryFactory(content=text)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam"
            " JOIN pg_class t ON t.oid = i.indrelid WHERE a.amname = 'gin'"
            " AND t.relname IN ('messages', 'entities', 'history_entries') ORDER BY 1"
        )
        indexes = [row[0] for row in cursor.fetchall()]
        # The pages of the pending list, merged now: at PostgreSQL's default (4 MB) the trigram indexes hold 20-30.
        queued = {}
        for name in indexes:
            cursor.execute("SELECT gin_clean_pending_list(%s::regclass)", [name])
            queued[name] = cursor.fetchone()[0]

    assert indexes == [
        "entities_fts_segmented_trgm",
        "entities_search_fts_gin",
        "history_search_fts_gin",
        "messages_content_fts_gin",
        "messages_fts_segmented_trgm",
    ]
    # 64 kB is 8 pages, and the insert that crosses the limit merges the list after adding its own entries.
    assert all(pages <= 9 for pages in queued.values()), queued
