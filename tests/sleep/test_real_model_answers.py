"""Light sleep against a server that behaves like llama-cpp-python, fed an answer a real small model gave.

Qwen2.5 0.5B instruct, served by llama-cpp-python with only ``json_object`` asked for, answered the
semantic stage with a field name as the memory type and an id as a string; every night then failed
on its first call.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from anima.core.llm import providers
from anima.core.llm.testing import StubLlmServer
from anima.core.models import AutoLlmRun
from conversations.models import Role
from memory.models import SemanticMemory
from sleep.context import StepContext
from sleep.steps import light_sleep
from tests.factories import ConversationFactory, MessageFactory, PersonFactory

DAY = dt.date(2026, 11, 26)
REAL_ANSWER = {"create": [{"memory_type": "content", "content": "Maya lives in Lisbon"}], "update": [{"id": "903"}]}


@pytest.fixture
def llama_cpp(settings, monkeypatch):
    monkeypatch.setattr(providers, "RETRY_BACKOFF_SECONDS", 0)
    with StubLlmServer(persona="llama_cpp") as server:
        settings.ANIMA_LLM_PROVIDER = "openai"
        settings.ANIMA_LLM_BASE_URL = server.base_url
        settings.ANIMA_LLM_MODEL = "qwen2.5-0.5b-instruct"
        settings.ANIMA_LLM_STRUCTURED = "auto"
        yield server


def test_the_real_models_bad_answer_is_repaired_and_the_night_goes_on(llama_cpp):
    maya = PersonFactory(slug="maya", display_name="Maya")
    conversation = ConversationFactory(person=maya)
    at = timezone.make_aware(dt.datetime.combine(DAY, dt.time(20, 0)))
    MessageFactory(conversation=conversation, role=Role.USER, content="I moved to Lisbon last month.", created_at=at)
    llama_cpp.reply(REAL_ANSWER)
    llama_cpp.reply({"create": [{"memory_type": "world", "content": "Maya lives in Lisbon", "occurred_at": None}]})
    llama_cpp.reply({"anchors": []})
    llama_cpp.reply({"narratives": []})

    light_sleep(StepContext(run_id=0, day=DAY, mode="full", force=False, run_key="test", token_budget=None))

    assert list(SemanticMemory.objects.values_list("content", flat=True)) == ["Maya lives in Lisbon"]
    first, repair = llama_cpp.requests[:2]
    # The schema went in llama-cpp-python's form, which its grammar compiler enforces.
    assert first["response_format"]["type"] == "json_object" and "schema" in first["response_format"]
    errors = repair["messages"][-1]["content"]
    assert "$.create[0].memory_type: 'content' is not one of" in errors
    assert "$.update[0].id: expected integer, got string" in errors
    runs = AutoLlmRun.objects.filter(purpose="light-sleep.semantic").order_by("id")
    assert [(run.dialect, run.attempt, bool(run.error)) for run in runs] == [
        ("json_object_schema", "", True),
        ("json_object_schema", "repair", False),
    ]
