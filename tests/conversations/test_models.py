"""What the conversations schema itself guarantees, whichever path writes to it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import pytest

from anima.agent.turn import prepare_turn
from anima.api.testing import api_client, operator_client
from conversations.models import Conversation, Identity, PeerBlock, Person
from conversations.services import identity_map
from tests.factories import ConversationFactory, IdentityFactory, PeerBlockFactory, PersonFactory, SemanticMemoryFactory

pytestmark = pytest.mark.usefixtures("private_cache")

NOW = datetime.fromisoformat("2026-11-28T10:40:00+08:00")


def _remap(conversation: Conversation) -> None:
    identity_map(channel="telegram", external_id="42", person_slug="maya")


def _patch_person(conversation: Conversation) -> None:
    patched = operator_client().patch(f"/api/conversations/{conversation.pk}/", {"person": "maya"}, format="json")
    assert patched.status_code == 200
    assert "Miso" not in patched.json()["system_prompt"]  # the answer is the dropped snapshot, not the old one


def _console_save(conversation: Conversation) -> None:
    conversation.person = Person.objects.get(slug="maya")
    conversation.save()


def _bulk_identity_update(conversation: Conversation) -> None:
    Identity.objects.filter(channel="telegram", external_id="42").update(person=Person.objects.get(slug="maya"))


@pytest.mark.parametrize("change", [_remap, _patch_person, _console_save, _bulk_identity_update])
def test_a_new_person_drops_the_conversations_snapshot_and_frozen_peer_blocks_at_once(
    change: Callable[[Conversation], None],
):
    leo, maya = PersonFactory(slug="leo", display_name="Leo"), PersonFactory(slug="maya", display_name="Maya")
    SemanticMemoryFactory(person=leo, content="Leo's cat is called Miso")
    SemanticMemoryFactory(person=maya, content="Maya works night shifts as a nurse")
    IdentityFactory(channel="telegram", external_id="42", person=leo)
    conversation = ConversationFactory(person=None, platform="telegram", channel="telegram", chat_id="42")
    before = prepare_turn(conversation=conversation, user_message="hi", now=NOW, store=False)[0]["content"]
    PeerBlockFactory(conversation=conversation, content="Other conversations: Leo's own day in full")

    change(conversation)

    conversation.refresh_from_db()
    read = api_client(scope="person", persons=[maya]).get(f"/api/conversations/{conversation.pk}/")
    after = prepare_turn(conversation=conversation, user_message="hi", now=NOW, store=False)
    assert "## About Leo" in before and "Miso" in before
    assert read.status_code == 200 and "Miso" not in read.json()["system_prompt"]
    assert "## About Maya" in after[0]["content"] and "nurse" in after[0]["content"]
    assert "Miso" not in "\n".join(message["content"] for message in after)
    assert not PeerBlock.objects.filter(content__contains="Leo's own day").exists()


def test_a_change_that_keeps_the_person_keeps_the_snapshot():
    leo = PersonFactory(slug="leo", display_name="Leo")
    IdentityFactory(channel="telegram", external_id="42", person=leo)
    conversation = ConversationFactory(person=None, platform="telegram", channel="telegram", chat_id="42")
    before = prepare_turn(conversation=conversation, user_message="hi", now=NOW, store=False)[0]["content"]
    PeerBlockFactory(conversation=conversation)

    operator_client().patch(f"/api/conversations/{conversation.pk}/", {"title": "Evenings"}, format="json")
    identity_map(channel="telegram", external_id="42", person_slug="leo", display_name="Leo")
    IdentityFactory(channel="telegram", external_id="43", person=PersonFactory(slug="maya"))

    conversation.refresh_from_db()
    assert conversation.system_prompt == before and conversation.system_prompt_built_at == NOW
    assert PeerBlock.objects.filter(conversation=conversation).count() == 1
