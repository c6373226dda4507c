"""Entities at the agent's surfaces: the prepared turn, the tools and MCP resources, for the asking person only."""

from __future__ import annotations

import datetime as dt

import anyio
import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from mcp import Client
from mcp.shared.exceptions import MCPError

from anima.agent.mcp import mcp_server
from anima.agent.tools import ToolError, tool_call
from anima.agent.turn import prepare_turn
from anima.core.models import MemoryType
from conversations.access import OPERATOR_ACCESS
from memory.services import memory_create
from memory.subjects.selectors import subject_get
from sleep.context import StepContext
from sleep.steps import subjects
from tests.factories import ConversationFactory, PersonFactory, SemanticMemoryFactory

pytestmark = pytest.mark.django_db


def _night() -> None:
    subjects(StepContext(run_id=0, day=dt.date(2026, 11, 26), mode="full", force=False, run_key="t", token_budget=None))


@pytest.fixture
def leo_and_maya():
    leo, maya = PersonFactory(slug="leo", display_name="Leo"), PersonFactory(slug="maya", display_name="Maya")
    for text in ("Leo 的女儿小雨属虎", "Leo的女儿小雨今年四岁，在上幼儿园", "小雨最近在学钢琴"):
        memory_create(content=text, memory_type=MemoryType.WORLD, person=leo)
    for text in ("Maya's daughter Lily is four", "Lily plays the violin"):
        memory_create(content=text, memory_type=MemoryType.WORLD, person=maya)
    # Leo's most cited memories fill the system prompt's section about him: the profile is not among them.
    for number in range(60):
        SemanticMemoryFactory(person=leo, content=f"Leo 的第{number}个工作习惯", reference_count=5)
    _night()
    daughter = subject_get(person=leo, key="小雨")
    assert daughter.profile_id is not None
    return leo, maya, daughter


@pytest.mark.parametrize("message", ["我女儿最近怎么样？", "我闺女最近怎么样？"])
def test_the_prepared_turn_for_a_question_about_the_daughter_carries_her_profile(leo_and_maya, message):
    leo, _, daughter = leo_and_maya
    conversation = ConversationFactory(person=leo)

    messages = prepare_turn(conversation=conversation, user_message=message, store=False)

    assert f"[[anima:{daughter.profile_id}]]" not in messages[0]["content"]  # not the system prompt's
    (passive,) = [m for m in messages if m["name"] == "passive_memory_context"]
    first = passive["content"].splitlines()[1]
    assert first.endswith(f"[[anima:{daughter.profile_id}]]")
    assert "小雨" in first
    assert "Lily" not in "\n".join(m["content"] for m in messages)


def test_the_recall_tools_ask_about_an_entity_of_the_callers_person_only(leo_and_maya):
    leo, _, daughter = leo_and_maya
    access = OPERATOR_ACCESS.narrow(person=leo)

    for name in ("memory_recall", "memory_semantic_search"):
        result = tool_call(name=name, arguments={"entity": "女儿"}, access=access)
        assert result["results"][0]["id"] == daughter.profile_id
        assert all("Lily" not in hit["snippet"] for hit in result["results"])
        with pytest.raises(ToolError) as unknown:
            tool_call(name=name, arguments={"entity": "Lily"}, access=access)
        assert unknown.value.field == "entity"
    with pytest.raises(ToolError) as neither:
        tool_call(name="memory_recall", arguments={}, access=access)
    assert neither.value.field == "query"


@pytest.mark.usefixtures("transactional_db")  # the server reads in a thread of its own
def test_mcp_serves_a_persons_entities_within_its_access(leo_and_maya):
    leo, _maya, daughter = leo_and_maya

    async def session() -> tuple:
        async with Client(mcp_server(access=OPERATOR_ACCESS.narrow(person=leo))) as client:
            resources = await client.list_resources()
            listing = await client.read_resource("anima://persons/leo/entities")
            one = await client.read_resource("anima://persons/leo/entities/%E5%B0%8F%E9%9B%A8")
            with pytest.raises(MCPError) as theirs:
                await client.read_resource("anima://persons/maya/entities")
            with pytest.raises(MCPError) as unknown:
                await client.read_resource("anima://persons/leo/entities/Lily")
        # The server's thread keeps its connection open: close it, so the test database can go.
        await sync_to_async(connections.close_all, thread_sensitive=True)()
        return resources, listing, one, theirs.value, unknown.value

    resources, listing, one, theirs, unknown = anyio.run(session)

    assert "anima://persons/leo/entities" in [str(r.uri) for r in resources.resources]
    assert "anima://persons/maya/entities" not in [str(r.uri) for r in resources.resources]
    text = listing.contents[0].text
    assert "### 小雨 (daughter)" in text and f"[[anima:{daughter.profile_id}]]" in text and "Lily" not in text
    assert one.contents[0].text.startswith("# 小雨 (daughter)")
    assert "maya" in str(theirs)
    assert "Lily" in str(unknown)


def test_the_system_prompt_lists_a_persons_facts_once_not_their_profiles_again():
    leo = PersonFactory(slug="leo", display_name="Leo")
    facts = [
        memory_create(content=text, memory_type=MemoryType.WORLD, person=leo)
        for text in ("Leo 的女儿小雨属虎", "Leo的女儿小雨今年四岁，在上幼儿园")
    ]
    _night()
    daughter = subject_get(person=leo, key="小雨")

    messages = prepare_turn(conversation=ConversationFactory(person=leo), user_message="今天好累", store=False)

    system = messages[0]["content"]
    assert all(f"[[anima:{fact.pk}]]" in system for fact in facts)
    assert daughter.profile_id is not None and f"[[anima:{daughter.profile_id}]]" not in system
