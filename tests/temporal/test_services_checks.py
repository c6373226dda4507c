"""A day summary's section names only its own conversation's people, whatever the model wrote."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from conversations.models import Role
from temporal.models import TemporalSummary
from temporal.services import DAY_INSTRUCTIONS, temporal_summary_write_day
from tests.factories import ConversationFactory, MessageFactory, PersonFactory
from tests.sleep.stages import stages_script

DAY = dt.date(2026, 11, 26)


def _talk(person, lines, *, hour: int):
    conversation = ConversationFactory(person=person, title=f"{person.slug}'s evening")
    for minute, (role, content) in enumerate(lines):
        MessageFactory(
            conversation=conversation,
            role=role,
            content=content,
            created_at=timezone.make_aware(dt.datetime.combine(DAY, dt.time(hour, minute))),
        )
    return conversation


def _sections(texts_by_person: dict[str, str]):
    """The model's answer: a section per conversation, its text chosen by the conversation's person."""

    def answer(payload: dict) -> dict:
        return {
            "sections": [
                {"conversation": c["conversation"], "topic": "feelings", "summary": texts_by_person[c["person"]]}
                for c in payload["conversations"]
            ]
        }

    return answer


def test_a_section_mixing_in_someone_from_another_conversation_is_not_stored(llm_stub):
    maya, leo = PersonFactory(slug="maya", display_name="Maya"), PersonFactory(slug="leo", display_name="Leo")
    mine = _talk(maya, [(Role.USER, "Got home late tonight, so tired."), (Role.ASSISTANT, "Rest well.")], hour=21)
    theirs = _talk(leo, [(Role.USER, "刚到家，累死了。"), (Role.ASSISTANT, "早点休息。")], hour=22)
    # Written by a real small model for Maya's English conversation: two people in one section.
    mixed = "Maya 和 Leo 在晚上回家后都感到疲惫"
    stages_script(llm_stub, {DAY_INSTRUCTIONS: [_sections({"Maya": mixed, "Leo": "Leo 晚上回家后很累"})]})

    outcome = temporal_summary_write_day(day=DAY)

    sections = TemporalSummary.objects.get().body["sections"]
    assert [(s["conversation_id"], s["text"]) for s in sections] == [(theirs.pk, "Leo 晚上回家后很累")]
    assert outcome["refused"] == [{"conversation_id": mine.pk, "reason": "names Leo, who is not in this conversation"}]
    assert mixed not in TemporalSummary.objects.get().content


def test_a_section_may_name_someone_its_conversation_talks_about(llm_stub):
    maya = PersonFactory(slug="maya", display_name="Maya")
    PersonFactory(slug="leo", display_name="Leo")
    mine = _talk(maya, [(Role.USER, "Leo and I both got home late, we're tired.")], hour=21)
    stages_script(llm_stub, {DAY_INSTRUCTIONS: [_sections({"Maya": "Maya and Leo got home late and were tired"})]})

    outcome = temporal_summary_write_day(day=DAY)

    assert "refused" not in outcome
    [section] = TemporalSummary.objects.get().body["sections"]
    assert (section["conversation_id"], section["text"]) == (mine.pk, "Maya and Leo got home late and were tired")
