from __future__ import annotations

import datetime as dt
import logging

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from anima.core.db import REPLICA
from anima.core.models import BlockTag, MemoryStatus
from conversations.models import Platform, Role
from memory.passive import passive_recall
from memory.search import QuerySyntaxError, _stats
from memory.search._stats import TermStats
from memory.selectors import (
    memory_recall,
    memory_semantic_search,
    memory_versions,
    resident_memories,
    resident_memory_lines,
)
from memory.services import MemoryPart, memory_split
from tests.factories import (
    ContentBlockFactory,
    ConversationFactory,
    MessageFactory,
    PersonFactory,
    RuntimeConfigFactory,
    SemanticMemoryFactory,
    belief_superseded,
)


def _found(results) -> set[tuple[str, int]]:
    return {(r["memory_type"], r["id"]) for r in results}


def test_recall_ranks_all_four_sources_in_one_list():
    semantic = SemanticMemoryFactory(content="Leo 的猫叫 Miso")
    message = MessageFactory(content="我的猫 Miso 今天很调皮", role=Role.USER)
    limbic = ContentBlockFactory(tag=BlockTag.LIMBIC, content="I feel warm when Leo talks about Miso")
    narrative = ContentBlockFactory(tag=BlockTag.NARRATIVE, content="The week Miso arrived")
    results = memory_recall(query="Miso")
    assert _found(results) == {
        ("semantic", semantic.pk),
        ("session", message.pk),
        ("limbic", limbic.pk),
        ("autobiographical", narrative.pk),
    }
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)
    by_type = {r["memory_type"]: r for r in results}
    assert by_type["semantic"]["semantic_memory_id"] == semantic.pk
    assert "semantic_memory_id" not in by_type["session"]
    assert by_type["session"]["conversation_external_id"] == message.conversation.external_id
    assert by_type["semantic"]["ranks"]["fts"] >= 1


def test_recall_can_be_restricted_to_some_types_and_refuses_unknown_ones():
    SemanticMemoryFactory(content="tea ceremony")
    MessageFactory(content="tea ceremony tomorrow")
    assert {r["memory_type"] for r in memory_recall(query="tea", memory_types=["session"])} == {"session"}
    with pytest.raises(ValueError, match="unknown memory type"):
        memory_recall(query="tea", memory_types=["dreams"])


def test_session_recall_skips_cron_conversations_tool_and_system_messages():
    kept = MessageFactory(content="blue whale facts", role=Role.ASSISTANT)
    MessageFactory(content="blue whale facts", conversation=ConversationFactory(platform=Platform.CRON))
    MessageFactory(content="blue whale facts", role=Role.TOOL)
    MessageFactory(content="blue whale facts", role=Role.SYSTEM)
    assert _found(memory_recall(query="whale", memory_types=["session"])) == {("session", kept.pk)}


def test_semantic_search_returns_only_active_semantic_memories():
    active = SemanticMemoryFactory(content="likes jasmine tea")
    SemanticMemoryFactory(content="likes jasmine tea", status=MemoryStatus.DEPRECATED)
    MessageFactory(content="jasmine tea")
    assert _found(memory_semantic_search(query="jasmine")) == {("semantic", active.pk)}


def test_person_scope_never_leaks_another_persons_memories_or_messages():
    maya, leo = PersonFactory(slug="maya"), PersonFactory(slug="leo")
    maya_memory = SemanticMemoryFactory(content="allergic to peanuts", person=maya)
    leo_memory = SemanticMemoryFactory(content="allergic to peanuts", person=leo)
    global_memory = SemanticMemoryFactory(content="peanuts are legumes", person=None)
    maya_message = MessageFactory(content="no peanuts please", conversation=ConversationFactory(person=maya))
    MessageFactory(content="no peanuts please", conversation=ConversationFactory(person=leo))
    found = _found(memory_recall(query="peanut allergy", person=maya, limit=50))
    assert found == {("semantic", maya_memory.pk), ("semantic", global_memory.pk), ("session", maya_message.pk)}
    assert ("semantic", leo_memory.pk) in _found(memory_recall(query="peanut allergy", person=leo))


@pytest.mark.parametrize("common", [{"peanut"}, {"peanut", "allergi"}])
def test_person_scope_holds_when_common_terms_are_pruned(common, monkeypatch):
    # As if ANALYZE had found these lexemes in half of a million rows: recall ranks in tiers then.
    stats = TermStats(rows=1_000_000, frequencies=dict.fromkeys(common, 0.5))
    monkeypatch.setattr(_stats, "term_stats_get", lambda *, table, column: stats)
    test_person_scope_never_leaks_another_persons_memories_or_messages()


def test_since_and_until_bound_by_day_inclusive():
    day = dt.date(2026, 3, 10)
    at = timezone.make_aware(dt.datetime(2026, 3, 10, 23, 30))
    inside = MessageFactory(content="orchid bloom", created_at=at)
    MessageFactory(content="orchid bloom", created_at=at + dt.timedelta(days=2))
    found = _found(memory_recall(query="orchid", memory_types=["session"], since=day, until=day))
    assert found == {("session", inside.pk)}


def test_channel_restricts_session_hits():
    telegram = MessageFactory(content="sunset photo", conversation=ConversationFactory(channel="telegram"))
    MessageFactory(content="sunset photo", conversation=ConversationFactory(channel="web"))
    assert _found(memory_recall(query="sunset", memory_types=["session"], channel="telegram")) == {
        ("session", telegram.pk)
    }


def test_malformed_query_raises_query_syntax_error():
    with pytest.raises(QuerySyntaxError):
        memory_recall(query="tea NOT")


def test_passive_recall_cuts_by_relative_score_and_leaves_out_what_the_system_prompt_shows():
    person = PersonFactory()
    strong = SemanticMemoryFactory(content="Maya's cat Miso likes tuna", person=person)
    weak = SemanticMemoryFactory(content="tuna sandwiches are fine", person=person)
    SemanticMemoryFactory(content="Miso cat tuna", person=PersonFactory())
    pinned = SemanticMemoryFactory(content="Miso is a cat", person=person, pinned=True)
    # Today's snapshot shows the pinned memory; one pinned after it was built is shown nowhere yet.
    conversation = ConversationFactory(
        person=person, system_prompt=f"## Resident memory\n- Miso is a cat [[anima:{pinned.pk}]]"
    )
    pinned_since = SemanticMemoryFactory(content="Miso the cat likes naps", person=person, pinned=True)
    recall = passive_recall(conversation=conversation, user_message="What does Miso the cat like?")
    ids = [hit["id"] for hit in recall.hits]
    assert set(ids[:2]) == {strong.pk, pinned_since.pk}  # each holds every word asked
    assert pinned.pk not in ids
    assert pinned_since.pk in ids
    assert weak.pk not in ids  # below top × min_relative_score
    message = recall.as_message()
    assert message["name"] == "passive_memory_context"
    assert message["role"] == "assistant"
    assert f"[[anima:{strong.pk}]]" in message["content"]


def test_passive_recall_is_skipped_for_cron_and_when_disabled():
    SemanticMemoryFactory(content="Miso likes tuna", person=None)
    cron = ConversationFactory(platform=Platform.CRON)
    assert passive_recall(conversation=cron, user_message="Miso").as_message() is None
    RuntimeConfigFactory(section="memory.passive_recall", values={"enabled": False})
    assert passive_recall(conversation=ConversationFactory(), user_message="Miso").hits == []


def test_passive_recall_respects_max_chars():
    for n in range(5):
        SemanticMemoryFactory(content=f"kiwi fact {n} " + "x" * 80, person=None)
    RuntimeConfigFactory(section="memory.passive_recall", values={"max_chars": 150, "min_relative_score": 0.0})
    recall = passive_recall(conversation=ConversationFactory(), user_message="kiwi")
    assert len(recall.hits) == 1
    assert len(recall.text) <= 150 + len("Possibly relevant memories:\n")


def test_resident_memory_is_global_plus_the_persons_own_with_citation_markers():
    maya, leo = PersonFactory(), PersonFactory()
    mine = SemanticMemoryFactory(content="Maya is a nurse", person=maya, pinned=True)
    shared = SemanticMemoryFactory(content="Anima lives on a server", person=None, pinned=True)
    other = SemanticMemoryFactory(content="Leo codes", person=leo, pinned=True)
    assert {m.pk for m in resident_memories(person=maya)} == {mine.pk, shared.pk}
    assert {m.pk for m in resident_memories()} == {mine.pk, shared.pk, other.pk}
    assert all(line.endswith("]]") for line in resident_memory_lines(person=maya))
    assert f"Maya is a nurse [[anima:{mine.pk}]]" in "\n".join(resident_memory_lines(person=maya))


def test_resident_memory_cuts_pinned_beyond_forty_with_a_warning(caplog):
    for n in range(42):
        SemanticMemoryFactory(content=f"pinned {n}", person=None, pinned=True)
    with caplog.at_level(logging.WARNING, logger="memory.selectors"):
        assert len(resident_memories()) == 40
    assert "more than 40 pinned" in caplog.text


def test_recall_reads_the_replica_and_finds_what_the_primary_committed(replica):
    memory = SemanticMemoryFactory(content="Leo 的邮箱是 leo@example.com")
    with (
        CaptureQueriesContext(connections["default"]) as primary,
        CaptureQueriesContext(connections[REPLICA]) as on_replica,
    ):
        results = memory_recall(query="你的邮箱是啥？")
    assert [result["id"] for result in results] == [memory.pk]
    assert primary.captured_queries == []
    assert any("to_tsquery" in query["sql"] for query in on_replica.captured_queries)  # the search itself


# --- Belief history: recall "as of" a moment ---


def test_the_as_of_answer_changes_across_a_supersede():
    leo = PersonFactory(slug="leo")
    old, new, _ = belief_superseded(person=leo)

    def held(as_of):
        return [r["id"] for r in memory_recall(query="zodiac sign", person=leo, as_of=as_of, memory_types=["semantic"])]

    assert held(dt.date(2026, 11, 20)) == [old.pk]  # a date: the end of that local day
    assert held(dt.date(2026, 11, 9)) == []  # before anyone knew
    assert held(dt.date(2026, 11, 26)) == [new.pk]
    assert held(timezone.make_aware(dt.datetime(2026, 11, 25, 19, 59))) == [old.pk]
    assert held(None) == [new.pk]  # today: active memories only
    past = memory_recall(query="zodiac", person=leo, as_of=dt.date(2026, 11, 20), memory_types=["semantic"])[0]
    assert past["valid_to"] == old.valid_to.isoformat()


def test_as_of_reads_other_sources_by_creation_time():
    early = MessageFactory(content="we adopted a hedgehog", role=Role.USER)
    early.created_at = timezone.make_aware(dt.datetime(2026, 11, 1, 12))
    early.save(update_fields=["created_at"])
    MessageFactory(content="the hedgehog is called Spike", role=Role.USER)
    found = memory_recall(query="hedgehog", as_of=dt.date(2026, 11, 2), memory_types=["session"])
    assert [r["id"] for r in found] == [early.pk]


def test_memory_versions_run_old_to_new_with_the_conversation_that_changed_them():
    old, new, correction = belief_superseded(person=PersonFactory(slug="leo"))
    for memory in (old, new):
        versions = memory_versions(memory=memory)
        assert [v.pk for v in versions] == [old.pk, new.pk]
        assert versions[0].superseded_by.source_conversation == correction


def test_memory_versions_of_a_split_memory_show_every_part():
    person = PersonFactory(slug="maya")
    whole = SemanticMemoryFactory(person=person, content="Maya swims and Maya paints")
    parts = memory_split(
        memory=whole, parts=[MemoryPart("world", "Maya swims", "p1"), MemoryPart("world", "Maya paints", "p2")]
    )

    for memory in (whole, *parts):  # from any part: the whole it came from and its sibling too
        assert {v.pk for v in memory_versions(memory=memory)} == {whole.pk, *(p.pk for p in parts)}


def test_passive_recall_skips_memories_the_system_prompt_already_shows():
    person = PersonFactory()
    shown = SemanticMemoryFactory(content="Maya's cat Miso likes tuna", person=person)
    unseen = SemanticMemoryFactory(content="Miso the cat sleeps on the piano", person=person)
    conversation = ConversationFactory(
        person=person, system_prompt=f"## Person memory\n- {shown.content} [[anima:{shown.pk}]]"
    )

    ids = [
        hit["id"] for hit in passive_recall(conversation=conversation, user_message="What does Miso the cat like?").hits
    ]

    assert shown.pk not in ids and unseen.pk in ids


def test_passive_recall_offers_a_memory_whose_word_holds_the_messages_one_character_word():
    person = PersonFactory()
    cat = SemanticMemoryFactory(person=person, content="我养了一只橘猫，叫年糕")
    dog = SemanticMemoryFactory(person=person, content="她的狗叫豆豆")
    SemanticMemoryFactory(person=person, content="我开的是一辆白色的新款轿车")
    conversation = ConversationFactory(person=person)

    def offered(message: str) -> list[int]:
        return [hit["id"] for hit in passive_recall(conversation=conversation, user_message=message).hits]

    assert offered("我的猫最近不爱吃饭") == [cat.pk]
    assert offered("狗狗今天生病了") == [dog.pk]


@pytest.mark.parametrize(
    "message",
    ['Maya said "Miso hates tuna" this morning', "NOT eating again", "Miso OR", 'is "Miso okay'],
)
def test_passive_recall_reads_the_message_as_words_not_as_query_syntax(message):
    person = PersonFactory()
    miso = SemanticMemoryFactory(person=person, content="Miso the cat stopped eating tuna")
    SemanticMemoryFactory(person=person, content="Leo bought a new bike")
    conversation = ConversationFactory(person=person)
    # Quotes and AND / OR / NOT in a chat message are prose: no phrase search, no "every memory without 'eat'".
    assert [hit["id"] for hit in passive_recall(conversation=conversation, user_message=message).hits] == [miso.pk]
