from __future__ import annotations

from tests.factories import (
    AutoLlmRunFactory,
    ContentBlockFactory,
    HistoryEntryFactory,
    IdentityFactory,
    MemoryReferenceFactory,
    PipelineStepRunFactory,
    RuntimeConfigChangeFactory,
    RuntimeConfigFactory,
    SelfLayerBlockFactory,
    SemanticMemoryFactory,
    TemporalSummaryFactory,
)


def test_every_factory_writes_a_row_with_its_searchable_text_segmented():
    memory = SemanticMemoryFactory(content="我女儿小雨属虎")
    assert memory.fts_segmented == "我 女儿 小雨 属虎"
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
