from __future__ import annotations

import logging
import subprocess
import sys

import jieba
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anima.core import segmentation
from anima.core.segmentation import segment_text
from conversations.models import Message
from tests.factories import MessageFactory, SemanticMemoryFactory


def test_chinese_is_split_into_words_and_english_passes_through():
    assert segment_text("我的邮箱是 leo@example.com").split() == ["我", "的", "邮箱", "是", "leo@example.com"]
    assert "TypeScript" in segment_text("我现在更喜欢TypeScript了").split()


def test_loading_with_tags_leaves_nothing_for_a_first_request_to_load():
    # A fresh interpreter: this one has loaded jieba's tables already.
    probe = (
        "import sys, jieba; from anima.core.segmentation import segmentation_load; segmentation_load(tags=True); "
        "print(jieba.dt.initialized, 'jieba.posseg' in sys.modules, 'jieba.analyse' in sys.modules)"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert loaded.stdout.split() == ["True", "True", "True"]


def test_long_words_also_index_their_parts():
    tokens = segment_text("中华人民共和国").split()
    assert {"中华", "人民", "共和国", "中华人民共和国"} <= set(tokens)


def test_edits_re_segment_on_save():
    memory = SemanticMemoryFactory(content="小雨属虎")
    memory.content = "小雨喜欢徒步"
    memory.save(update_fields=["content"])
    memory.refresh_from_db()
    assert "徒步" in memory.fts_segmented.split()


def test_a_segmentation_failure_stores_null_logs_and_still_writes_the_row(monkeypatch, caplog):
    def broken(text):
        raise RuntimeError("dictionary corrupted")

    monkeypatch.setattr(jieba, "cut_for_search", broken)
    with caplog.at_level(logging.WARNING, logger="anima.core.segmentation"):
        message = MessageFactory(content="这条消息仍然要保存")
    stored = Message.objects.get(pk=message.pk)
    assert stored.content == "这条消息仍然要保存"
    assert stored.fts_segmented is None
    assert "segmentation failed" in caplog.text


def test_the_dictionary_loads_once_per_process(monkeypatch):
    calls = []
    monkeypatch.setattr(segmentation, "_initialized", False)
    monkeypatch.setattr(jieba, "initialize", lambda *a, **k: calls.append(1))
    for _ in range(3):
        segment_text("你好")
    assert calls == [1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300))
def test_any_text_segments_to_tokens_that_keep_every_non_space_character(text):
    segmented = segment_text(text)
    assert segmented is not None
    assert {ch for ch in segmented if not ch.isspace()} == {ch for ch in text if not ch.isspace()}


@pytest.mark.parametrize("text", ["", "   ", "\n"])
def test_blank_text_segments_to_empty(text):
    assert segment_text(text) == ""
