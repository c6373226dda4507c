from __future__ import annotations

import datetime as dt

import pytest

from anima.core.llm import LlmInvalidOutput
from anima.core.llm.testing import scripted
from anima.core.text import is_chinese
from memory.models import SelfBlock, SelfLayerBlock
from sleep.context import StepContext
from sleep.offline.self_layer import self_layer_answer
from sleep.steps import self_layer_refresh
from tests.factories import MessageFactory, SelfLayerBlockFactory, SemanticMemoryFactory

DAY = dt.date(2026, 11, 26)


def _ctx(*, force: bool = False) -> StepContext:
    return StepContext(run_id=0, day=DAY, mode="full", force=force, run_key="test", token_budget=None)


def _answer():
    return {"existence_anchor": "I am someone else now.", "self_model": "I remember Leo and Maya."}


def _learned_today():
    SemanticMemoryFactory(content="Leo 住在杭州", source_day=DAY, external_id="ls:2026-11-26:1:semantic:abc")


def test_existence_anchor_stays_locked_without_force():
    _learned_today()
    SelfLayerBlockFactory(key=SelfBlock.EXISTENCE_ANCHOR, content="I am Anima.", locked=True)

    with scripted({"self-layer": [_answer()]}):
        output = self_layer_refresh(_ctx())

    assert SelfLayerBlock.objects.get(key=SelfBlock.EXISTENCE_ANCHOR).content == "I am Anima."
    assert SelfLayerBlock.objects.get(key=SelfBlock.SELF_MODEL).content == "I remember Leo and Maya."
    assert output == {"changed": ["self_model"], "refused_locked": ["existence_anchor"]}


def test_force_changes_the_existence_anchor():
    _learned_today()
    SelfLayerBlockFactory(key=SelfBlock.EXISTENCE_ANCHOR, content="I am Anima.", locked=True)

    with scripted({"self-layer": [_answer()]}):
        self_layer_refresh(_ctx(force=True))

    assert SelfLayerBlock.objects.get(key=SelfBlock.EXISTENCE_ANCHOR).content == "I am someone else now."


def test_autobiography_summary_is_not_the_self_layer_steps_to_write():
    _learned_today()
    SelfLayerBlockFactory(key=SelfBlock.AUTOBIOGRAPHY_SUMMARY, content="## Milestones\n- exam passed")
    with scripted({"self-layer": [{"autobiography_summary": "rewritten"}]}), pytest.raises(LlmInvalidOutput):
        self_layer_refresh(_ctx())
    assert SelfLayerBlock.objects.get(key=SelfBlock.AUTOBIOGRAPHY_SUMMARY).content == "## Milestones\n- exam passed"


def test_nothing_learned_means_nothing_to_refresh():
    with scripted({}) as provider:
        assert self_layer_refresh(_ctx()) == {"skipped_reason": "nothing_new"}
    assert provider.calls == []


@pytest.mark.parametrize("language", ["zh", "en"])
def test_the_offline_self_layer_speaks_the_companions_language_whatever_the_day(language):
    payload = {
        "day": "2026-11-28",
        "language": language,
        "force": False,
        "blocks": {"self_model": "I am a companion.", "personality_baseline": "我温暖而稳定。"},
        "today": {
            "facts": ["Leo 的女儿小雨属虎", "Maya lives in Lisbon"],
            "anchors": [],
            "narratives": [{"title": "和 Leo 聊杭州", "content": "…"}, {"title": "Lisbon with Maya", "content": "…"}],
        },
    }
    answer = self_layer_answer(payload)
    merged = {**payload["blocks"], **answer}
    assert {key: is_chinese(text) for key, text in merged.items()} == {key: language == "zh" for key in merged}


def test_the_first_run_seeds_an_editable_existence_anchor_in_the_majority_language():
    for text in ("我住在杭州。", "好的。", "Hi!"):
        MessageFactory(content=text)
    self_layer_refresh(_ctx())
    anchor = SelfLayerBlock.objects.get(key=SelfBlock.EXISTENCE_ANCHOR)
    assert is_chinese(anchor.content) and "Anima" in anchor.content and anchor.locked
