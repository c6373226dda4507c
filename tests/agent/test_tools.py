"""Agent tools: one schema both published and enforced; person memory actions; remember dedupe."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from anima.agent.tools import TOOLS, ToolError, tool_call, tool_schemas
from anima.api.testing import api_client, operator_client
from conversations.models import Role
from memory.models import SemanticMemory
from memory.services import memory_remember
from tests.factories import (
    ConversationFactory,
    HistoryEntryFactory,
    IdentityFactory,
    MessageFactory,
    PersonFactory,
    SemanticMemoryFactory,
    belief_superseded,
)


def test_the_published_schemas_are_openai_function_definitions():
    schemas = operator_client().get("/api/tools/").json()

    assert schemas == tool_schemas()
    names = [schema["function"]["name"] for schema in schemas]
    assert names == ["memory_recall", "memory_semantic_search", "memory_remember", "memory", "update_short_term_memory"]
    for schema in schemas:
        assert schema["type"] == "function"
        assert schema["function"]["parameters"]["type"] == "object"
        assert schema["function"]["parameters"]["additionalProperties"] is False
    by_name = {schema["function"]["name"]: schema["function"] for schema in schemas}
    assert "[[anima:ID]]" in by_name["memory_recall"]["description"]
    assert "next week" in by_name["memory_remember"]["description"]  # writing guidelines
    assert by_name["memory"]["parameters"]["properties"]["action"]["enum"] == [
        "recall",
        "remember",
        "search_history",
        "map_identity",
        "forget",
    ]


@pytest.mark.parametrize(
    ("name", "arguments", "field"),
    [
        ("memory_recall", {}, "query"),
        ("memory_recall", {"query": "x", "limit": "ten"}, "limit"),
        ("memory_recall", {"query": "x", "memory_types": ["gossip"]}, "memory_types[0]"),
        ("memory_recall", {"query": "x", "since": "someday"}, "since"),
        ("memory_recall", {"query": "python AND"}, "query"),
        ("memory_remember", {"content": "x", "mood": "happy"}, "mood"),
        ("memory", {"action": "fly"}, "action"),
        ("memory", {"action": "remember", "person": "leo"}, "content"),
        ("memory", {"action": "map_identity", "channel": "tg", "chat_id": "1", "person": "Not A Slug"}, "person"),
        ("memory", {"action": "recall", "person": "nobody"}, "person"),
        ("memory", {"action": "search_history", "query": "diagnosis AND"}, "query"),
    ],
)
def test_arguments_are_validated_against_the_published_schema(name, arguments, field):
    with pytest.raises(ToolError) as caught:
        tool_call(name=name, arguments=arguments)

    assert caught.value.field == field
    response = operator_client().post(f"/api/tools/{name}/", arguments, format="json")
    assert response.status_code == 400 and field in response.json()


def test_unknown_tool_is_404_and_a_tool_error_naming_the_name():
    response = operator_client().post("/api/tools/teleport/", {}, format="json")

    assert response.status_code == 404
    assert response.json()["detail"].startswith("unknown tool 'teleport'; one of memory_recall")
    with pytest.raises(ToolError, match="unknown tool 'teleport'") as caught:
        tool_call(name="teleport", arguments={})
    assert caught.value.field == "name"


def test_recall_and_semantic_search_tools():
    SemanticMemoryFactory(person=None, content="Leo 喜欢 Python")

    recall = operator_client().post("/api/tools/memory_recall/", {"query": "Python", "limit": 3}, format="json").json()
    semantic = tool_call(name="memory_semantic_search", arguments={"query": "Python"})

    assert recall["results"][0]["snippet"] == "Leo 喜欢 Python"
    assert semantic["results"][0]["semantic_memory_id"] == recall["results"][0]["id"]


def test_person_memory_tool_round():
    map_result = tool_call(
        name="memory",
        arguments={
            "action": "map_identity",
            "channel": "telegram",
            "chat_id": "123",
            "person": "leo",
            "display_name": "Leo",
        },
    )
    remembered = tool_call(
        name="memory",
        arguments={
            "action": "remember",
            "channel": "telegram",
            "chat_id": "123",
            "content": "位置: 杭州",
            "scope": "source",
        },
    )
    recalled = tool_call(name="memory", arguments={"action": "recall", "person": "leo"})
    searched = tool_call(name="memory", arguments={"action": "recall", "person": "leo", "query": "杭州"})

    assert map_result["identity"] == {"channel": "telegram", "chat_id": "123", "person": "leo"}
    memory = SemanticMemory.objects.get(pk=remembered["memory"]["id"])
    assert (memory.person.slug, memory.source_channel, memory.body["source_id"]) == ("leo", "telegram", "123")
    assert [m["content"] for m in recalled["memories"]] == ["位置: 杭州"]
    assert searched["results"][0]["id"] == memory.pk


def test_remember_needs_a_resolvable_person():
    with pytest.raises(ToolError) as caught:
        tool_call(name="memory", arguments={"action": "remember", "channel": "tg", "chat_id": "9", "content": "x"})

    assert caught.value.field == "chat_id"


def test_search_history_action_filters_by_person_channel_and_time():
    leo = PersonFactory(slug="leo")
    IdentityFactory(person=leo, channel="telegram", external_id="1")
    HistoryEntryFactory(person=leo, channel="telegram", content="聊了 咖啡")
    HistoryEntryFactory(person=leo, channel="cli", content="也聊了 咖啡")

    result = tool_call(
        name="memory",
        arguments={
            "action": "search_history",
            "person": "leo",
            "query": "咖啡",
            "channel": "telegram",
            "since": "2020-01-01",
        },
    )

    assert [entry["content"] for entry in result["entries"]] == ["聊了 咖啡"]
    assert result["entries"][0]["person"] == "leo"


def test_search_history_without_a_person_sees_the_global_timeline_only():
    HistoryEntryFactory(person=PersonFactory(slug="maya"), channel="web", content="maya secret diagnosis")
    HistoryEntryFactory(person=None, channel="web", content="global diagnosis checklist")
    leo = PersonFactory(slug="leo")
    IdentityFactory(person=leo, channel="telegram", external_id="7")

    anonymous = tool_call(name="memory", arguments={"action": "search_history", "query": "diagnosis"})
    as_leo = tool_call(
        name="memory",
        arguments={"action": "search_history", "query": "diagnosis", "channel": "telegram", "chat_id": "7"},
    )

    assert [entry["content"] for entry in anonymous["entries"]] == ["global diagnosis checklist"]
    assert as_leo["entries"] == []


def test_search_history_never_shows_another_persons_consolidated_digest_from_the_global_timeline():
    # Short-term consolidation archives one digest twice: to the global timeline and to the person's.
    maya = PersonFactory(slug="maya")
    leo = PersonFactory(slug="leo")
    IdentityFactory(person=leo, channel="telegram", external_id="7")
    chat = ConversationFactory(person=maya)
    for owner in (None, maya):
        HistoryEntryFactory(
            person=owner, conversation=chat, timestamp=chat.created_at, content="maya's biopsy diagnosis"
        )
    HistoryEntryFactory(person=None, channel="web", content="global diagnosis checklist")

    def found(**where) -> list[tuple[str, str | None]]:
        result = tool_call(name="memory", arguments={"action": "search_history", "query": "diagnosis", **where})
        return sorted((entry["content"], entry["person"]) for entry in result["entries"])

    assert found() == [("global diagnosis checklist", None)]
    assert found(channel="telegram", chat_id="7") == []  # Leo's own timeline
    assert found(person="maya") == [("maya's biopsy diagnosis", "maya")]
    leo_app = api_client(username="leo-app", scope="person", persons=[leo])
    through_api = leo_app.get("/api/history/", {"q": "diagnosis"}).json()["results"]
    assert [entry["content"] for entry in through_api] == ["global diagnosis checklist"]
    everything = operator_client().get("/api/history/", {"q": "diagnosis", "scope": "global"}).json()["results"]
    assert len(everything) == 2  # the operator's console view keeps the whole global timeline


def test_update_short_term_memory_tool():
    conversation = ConversationFactory()

    result = tool_call(
        name="update_short_term_memory", arguments={"conversation_id": conversation.pk, "summary": "聊了天气"}
    )
    missing = operator_client().post(
        "/api/tools/update_short_term_memory/", {"conversation_id": 10**9, "summary": "x"}, format="json"
    )

    assert result["success"] is True
    assert missing.status_code == 400 and "conversation_id" in missing.json()


def test_remember_tool_dedupes_and_api_executes_it():
    client = operator_client()

    first = client.post("/api/tools/memory_remember/", {"content": "Prefers tea"}, format="json").json()
    second = client.post("/api/tools/memory_remember/", {"content": "prefers   TEA"}, format="json").json()

    assert first["memory"]["id"] == second["memory"]["id"]
    assert SemanticMemory.objects.count() == 1


def test_remembering_in_an_unknown_humans_conversation_stores_nothing_everyone_would_see():
    stranger = ConversationFactory(person=None, chat_id="visitor-7", external_id="web-visitor-7")
    client = operator_client()

    told = client.post(
        "/api/tools/memory_remember/",
        {"content": "The user's email is zed@example.org"},
        format="json",
        headers={"X-Anima-Conversation": stranger.external_id},
    )

    assert told.status_code == 403 and "global" in str(told.json())
    assert not SemanticMemory.objects.exists()


def test_registry_names_are_unique():
    assert len({tool.name for tool in TOOLS}) == len(TOOLS)


@settings(max_examples=40, deadline=None)
@given(
    content=st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), min_size=1, max_size=80)
)
def test_remembering_the_same_text_twice_never_duplicates(content):
    assume(content.strip())
    person = PersonFactory(slug="hypo")
    before = SemanticMemory.objects.count()

    first, _ = memory_remember(content=content, person=person)
    again = memory_remember(content=f"  {content.upper()} ", person=person)[0] if content.isascii() else first

    assert first.pk == again.pk == memory_remember(content=content, person=person)[0].pk
    assert SemanticMemory.objects.count() - before <= 1


def test_recall_tools_without_a_person_see_only_global_memories():
    SemanticMemoryFactory(person=PersonFactory(slug="leo-t"), content="Leo 的邮箱是 leo@example.com")
    SemanticMemoryFactory(person=None, content="邮箱 notifications go out every Monday")
    for name in ("memory_recall", "memory_semantic_search"):
        result = tool_call(name=name, arguments={"query": "邮箱"})
        snippets = [hit["snippet"] for hit in result["results"]]
        assert snippets == ["邮箱 notifications go out every Monday"], name


def test_a_source_note_is_refused_for_an_account_mapped_to_someone_else():
    PersonFactory(slug="leo")
    IdentityFactory(person=PersonFactory(slug="maya"), channel="telegram", external_id="999")
    with pytest.raises(ToolError) as caught:
        tool_call(
            name="memory",
            arguments={
                "action": "remember",
                "person": "leo",
                "content": "Leo likes tea",
                "scope": "source",
                "channel": "telegram",
                "chat_id": "999",
            },
        )
    assert caught.value.field == "person"
    assert not SemanticMemory.objects.exists()


@pytest.mark.parametrize("query", [None, "peanut allergy"])
def test_a_call_from_leos_account_can_never_read_mayas_memories(query):
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    IdentityFactory(person=leo, channel="telegram", external_id="100")
    SemanticMemoryFactory(person=maya, content="Maya has a peanut allergy")
    SemanticMemoryFactory(person=leo, content="Leo likes peanut butter")
    arguments = {"action": "recall", "channel": "telegram", "chat_id": "100", "person": "maya"}
    if query:
        arguments["query"] = query

    with pytest.raises(ToolError) as caught:
        tool_call(name="memory", arguments=arguments)
    as_leo = tool_call(name="memory", arguments={**arguments, "person": "leo"})

    # In a conversation's context the person is the resolved identity, whoever the call names.
    assert caught.value.field == "person" and "mapped to leo" in str(caught.value)
    assert "Maya" not in str(as_leo)
    response = operator_client().post("/api/tools/memory/", arguments, format="json")
    assert response.status_code == 400 and "Maya" not in response.content.decode()


def test_an_unmapped_account_naming_a_person_is_refused_and_alone_sees_global_memories_only():
    SemanticMemoryFactory(person=PersonFactory(slug="maya"), content="Maya has a peanut allergy")
    SemanticMemoryFactory(person=None, content="peanut allergy is common")

    with pytest.raises(ToolError) as caught:
        tool_call(name="memory", arguments={"action": "recall", "channel": "tg", "chat_id": "5", "person": "maya"})
    alone = tool_call(
        name="memory_recall", arguments={"query": "peanut allergy", "channel": "tg"}
    )  # a channel alone is a filter, not an account

    assert caught.value.field == "person" and "not mapped" in str(caught.value)
    assert [hit["snippet"] for hit in alone["results"]] == ["peanut allergy is common"]


def test_the_tools_answer_what_was_believed_last_week():
    leo = PersonFactory(slug="leo")
    old, new, _ = belief_superseded(person=leo)
    last_week = {"person": "leo", "as_of": "2026-11-20"}
    recalled = tool_call(name="memory_recall", arguments={"query": "daughter zodiac", **last_week})
    searched = tool_call(name="memory_semantic_search", arguments={"query": "zodiac", **last_week})
    listed = tool_call(name="memory", arguments={"action": "recall", **last_week})
    now = tool_call(name="memory", arguments={"action": "recall", "person": "leo"})
    assert [r["id"] for r in recalled["results"]] == [r["id"] for r in searched["results"]] == [old.pk]
    assert [m["id"] for m in listed["memories"]] == [old.pk]
    assert [m["id"] for m in now["memories"]] == [new.pk]
    with pytest.raises(ToolError) as refused:
        tool_call(name="memory_recall", arguments={"query": "zodiac", "as_of": "2200-01-01"})
    assert refused.value.field == "as_of"


def test_a_turn_that_asks_to_remember_is_not_offered_the_short_term_tool():
    conversation = ConversationFactory()
    MessageFactory(conversation=conversation, role=Role.USER, content="Let's plan the trip.")

    def offered() -> list[str]:
        schemas = operator_client().get("/api/tools/", {"conversation": conversation.pk}).json()
        return [schema["function"]["name"] for schema in schemas]

    assert "update_short_term_memory" in offered()
    MessageFactory(conversation=conversation, role=Role.USER, content="Please remember this: I'm vegan.")
    assert "update_short_term_memory" not in offered()
    assert "memory_remember" in offered()


@pytest.mark.parametrize("nothing", [10**9, "²", "9" * 30, "abc"])
def test_the_tools_of_a_conversation_that_cannot_exist_are_a_404(nothing):
    assert operator_client().get("/api/tools/", {"conversation": nothing}).status_code == 404
