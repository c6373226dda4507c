"""User-facing recall for a conversation whose human is unknown sees global memories only."""

from __future__ import annotations

from anima.config import config_update
from memory.selectors import memory_semantic_search, passive_recall, resident_memories
from tests.factories import ConversationFactory, PersonFactory, SemanticMemoryFactory


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
