"""User-facing recall for a conversation whose human is unknown sees global memories only."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from anima.core.config import config_update
from conversations.models import Identity
from memory.passive import passive_recall
from memory.selectors import memory_recall, memory_semantic_search, resident_memories
from tests.factories import ConversationFactory, MessageFactory, PersonFactory, SemanticMemoryFactory


def _shared_vocabulary():
    leo, maya = PersonFactory(slug="leo-s"), PersonFactory(slug="maya-s")
    private = SemanticMemoryFactory(person=leo, content="my cat Miso sleeps on the keyboard", pinned=True)
    other = SemanticMemoryFactory(person=maya, content="the cat Miso hates the vet", pinned=True)
    shared = SemanticMemoryFactory(person=None, content="a cat named Miso appears in many stories", pinned=True)
    return leo, private, other, shared


def test_global_only_search_without_a_person_returns_only_global_memories():
    _, private, other, shared = _shared_vocabulary()
    ids = {hit["id"] for hit in memory_semantic_search(query="cat Miso", global_only=True)}
    assert ids == {shared.pk}
    # The operator's unscoped view (no person, not global_only) still sees everything.
    assert {hit["id"] for hit in memory_semantic_search(query="cat Miso")} == {private.pk, other.pk, shared.pk}


def test_resident_memory_for_an_unknown_human_is_global():
    leo, private, _, shared = _shared_vocabulary()
    assert {m.pk for m in resident_memories(person=None, global_only=True)} == {shared.pk}
    assert {m.pk for m in resident_memories(person=leo, global_only=True)} == {private.pk, shared.pk}


def test_passive_recall_for_an_unknown_human_is_global():
    _shared_vocabulary()
    stranger = ConversationFactory(person=None)
    config_update(section="memory.passive_recall", values={"exclude_resident": False})
    recall = passive_recall(conversation=stranger, user_message="tell me about the cat Miso")
    assert [hit["snippet"] for hit in recall.hits] == ["a cat named Miso appears in many stories"]


def _mapped_conversation_of_leo():
    leo = PersonFactory(slug="leo-m")
    Identity.objects.create(channel="telegram", external_id="555", person=leo)
    conversation = ConversationFactory(person=None, platform="telegram", channel="telegram", chat_id="555")
    MessageFactory(conversation=conversation, content="my bank password is zebrafish42")
    return leo


def test_an_unknown_human_gets_no_conversation_snippets_at_all():
    _mapped_conversation_of_leo()
    hits = memory_recall(query="zebrafish42 password", global_only=True)
    assert hits == []
    assert memory_recall(query="zebrafish42 password", memory_types=["session"], global_only=True) == []


def test_a_person_sees_conversations_their_channel_account_maps_to_and_others_do_not():
    leo = _mapped_conversation_of_leo()
    maya = PersonFactory(slug="maya-m")
    assert [hit["snippet"] for hit in memory_recall(query="zebrafish42", person=leo)] == [
        "my bank password is zebrafish42"
    ]
    assert memory_recall(query="zebrafish42", person=maya) == []


def test_recall_inside_a_callers_transaction_leaves_planner_settings_as_they_were():
    SemanticMemoryFactory(content="a cat named Miso")
    with transaction.atomic(), connection.cursor() as cursor:
        memory_recall(query="Miso")
        cursor.execute("SELECT current_setting('enable_seqscan'), current_setting('enable_indexscan')")
        assert cursor.fetchone() == ("on", "on")


@pytest.mark.django_db(transaction=True)
def test_recall_on_a_fresh_connection_before_pg_trgm_is_loaded():
    SemanticMemoryFactory(content="Leo 住在杭州")
    connection.close()  # a new session: pg_trgm's settings are not defined until its library loads
    assert [hit["snippet"] for hit in memory_semantic_search(query="杭州在哪")] == ["Leo 住在杭州"]
