"""Imprints in the prepared turn: the conversation's own person's, under a heading in the conversation's language."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import pytest

from anima.agent.turn import prepare_turn
from conversations.models import Role
from memory.imprints import IMPRINT_HEADING, imprints_refresh
from tests.factories import ConversationFactory, IdentityFactory, LimbicAnchorFactory, MessageFactory, PersonFactory

pytestmark = pytest.mark.usefixtures("private_cache")

DAY = date(2026, 11, 20)
NOW = datetime.fromisoformat("2026-11-21T10:00:00+08:00")
WORRIES = {
    "en": [
        "I'm so anxious about my driving test.",
        "The driving test is on Monday, I'm scared.",
        "Still worried about the driving test.",
    ],
    "zh": ["驾照考试让我好焦虑。", "周一就要驾照考试了，我好害怕。", "还是很担心驾照考试。"],
}


def worried(person, language: str) -> None:
    for offset, segment in enumerate(WORRIES[language]):
        LimbicAnchorFactory(
            person=person,
            day=DAY - timedelta(days=2 * offset),
            content=f'I feel worried for {person.display_name}: they said "{segment}"'
            if language == "en"
            else f"我感到担心：{person.display_name}说「{segment}」",
            body={
                "valence": -0.6,
                "arousal": 0.6,
                "intensity": 0.7,
                "kind": "conversation_mood",
                "source_segment": segment,
            },
        )


def system_prompt(conversation, message: str = "hi") -> str:
    return prepare_turn(conversation=conversation, user_message=message, now=NOW, store=False)[0]["content"]


@pytest.mark.parametrize(("language", "said"), [("en", "Hello again"), ("zh", "你好呀，又见面了")])
def test_the_persons_imprint_is_in_their_prompt_under_a_heading_in_the_conversations_language(language, said):
    leo = PersonFactory(slug="leo", display_name="Leo")
    worried(leo, language)
    imprints_refresh(day=DAY)
    conversation = ConversationFactory(person=leo)
    MessageFactory(conversation=conversation, role=Role.USER, content=said)

    prompt = system_prompt(conversation, said)

    assert IMPRINT_HEADING[language] in prompt
    assert IMPRINT_HEADING["zh" if language == "en" else "en"] not in prompt
    # The latest day's anchor is the strongest of equals: its words are the imprint's.
    assert WORRIES[language][0] in prompt


def test_another_persons_imprint_never_appears_in_a_prompt():
    leo, maya = PersonFactory(slug="leo", display_name="Leo"), PersonFactory(slug="maya", display_name="Maya")
    worried(leo, "en")
    imprints_refresh(day=DAY)
    # Maya's own conversation, one whose account is mapped to her, and one of nobody known.
    mapped = ConversationFactory(person=None, channel="telegram", chat_id="m-1")
    IdentityFactory(person=maya, channel="telegram", external_id="m-1")
    conversations = [ConversationFactory(person=maya), mapped, ConversationFactory(person=None)]

    for conversation in conversations:
        prompt = system_prompt(conversation)
        assert IMPRINT_HEADING["en"] not in prompt
        assert "driving test" not in prompt

    assert "driving test" in system_prompt(ConversationFactory(person=leo))


def test_an_account_mapped_to_the_person_carries_their_imprint():
    leo = PersonFactory(slug="leo", display_name="Leo")
    worried(leo, "en")
    imprints_refresh(day=DAY)
    conversation = ConversationFactory(person=None, channel="telegram", chat_id="leo-1")
    IdentityFactory(person=leo, channel="telegram", external_id="leo-1")

    assert "driving test" in system_prompt(conversation)
