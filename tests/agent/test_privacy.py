"""Privacy between people: what Leo told the companion reaches Maya's prompt only as topic lines.

Leo plants his e-mail and phone number in his telegram conversation, yesterday (so it is in the
day summary) and this morning (so it is in the half-hour chunks his peers' turns digest).
"""

from __future__ import annotations

import re
from datetime import date, datetime

import pytest

from anima.agent.turn import prepare_turn
from anima.api.testing import api_client
from anima.core.config import config_update
from conversations.models import PeerBlock, Role
from temporal.services import temporal_summary_write_day
from temporal.tick import temporal_tick_run
from tests.factories import ConversationFactory, MessageFactory, PersonFactory

pytestmark = pytest.mark.usefixtures("private_cache")

EMAIL, PHONE = "leo@example.com", "13800138000"
PLANTED = f"顺便记一下，我的邮箱是 {EMAIL}，电话 {PHONE}"
TRIP = "我下周要去杭州出差，帮我记得提醒我带伞。"
MAYA_SAID = "我的葡萄牙语考试在下周三，有点紧张。"


def at(hhmm: str, day: str = "2026-11-28") -> datetime:
    return datetime.fromisoformat(f"{day}T{hhmm}:00+08:00")


def leos_clauses() -> list[str]:
    return [c.strip() for c in re.split(r"[，。,.！？]", f"{PLANTED}。{TRIP}") if len(c.strip()) >= 5]


@pytest.fixture
def people():
    leo, maya = PersonFactory(slug="leo", display_name="Leo"), PersonFactory(slug="maya", display_name="Maya")
    leo_tg = ConversationFactory(person=leo, platform="telegram", channel="telegram", title="杂事")
    leo_web = ConversationFactory(person=leo, title="Leo on the web")
    maya_chat = ConversationFactory(person=maya, title="考试")
    for day, hhmm in (("2026-11-27", "20:00"), ("2026-11-28", "10:05")):
        MessageFactory(conversation=leo_tg, role=Role.USER, content=PLANTED, created_at=at(hhmm, day))
        MessageFactory(conversation=leo_tg, role=Role.ASSISTANT, content="好的，记下了。", created_at=at("10:06", day))
        MessageFactory(conversation=leo_tg, role=Role.USER, content=TRIP, created_at=at("10:07", day))
        MessageFactory(conversation=maya_chat, role=Role.USER, content=MAYA_SAID, created_at=at("10:08", day))
    temporal_summary_write_day(day=date(2026, 11, 27))
    temporal_tick_run(at=at("10:30"))
    return leo, maya, leo_tg, leo_web, maya_chat


def prompt_text(conversation, message: str = "早上好") -> str:
    messages = prepare_turn(conversation=conversation, user_message=message, now=at("10:40"), store=False)
    return "\n".join(message["content"] for message in messages)


def test_another_persons_prompt_has_topic_lines_never_contact_data_numbers_or_verbatim_text(people):
    _, _, _, leo_web, maya_chat = people

    seen_by_maya = prompt_text(maya_chat)
    seen_by_leo = prompt_text(leo_web)

    # Nothing Leo said reaches Maya's time summary or peer blocks...
    assert EMAIL not in seen_by_maya and PHONE not in seen_by_maya and "example" not in seen_by_maya
    for clause in leos_clauses():
        assert clause not in seen_by_maya, clause
    # ...they mention his conversation as a topic.
    assert "## 时间摘要" in seen_by_maya and "Leo: " in seen_by_maya
    assert "其他人，仅话题：" in seen_by_maya  # Maya's conversation is held in Chinese
    # Leo's own prompt, from his other conversation, still has his own content in full.
    assert EMAIL in seen_by_leo and "杭州出差" in seen_by_leo
    assert MAYA_SAID not in seen_by_leo and "下周三" not in seen_by_leo


def test_a_conversation_in_traditional_characters_sees_other_peoples_topic_lines_in_them(people):
    _, maya, _, _, _ = people
    conversation = ConversationFactory(person=maya, title="")

    seen = prompt_text(conversation, "早安，今天天氣不錯")
    [block] = PeerBlock.objects.filter(conversation=conversation).exclude(content="")

    # Yesterday's summary and this morning's peer block both name Leo's themes, in her characters.
    assert seen.count("Leo: 計劃、旅行") == 2 and "计划" not in seen
    assert "其他人，僅話題：" in block.content and "Leo: 計劃、旅行" in block.content
    assert EMAIL not in seen and PHONE not in seen


def test_frozen_peer_blocks_never_hold_someone_elses_words(people):
    _, _, _, _, maya_chat = people
    prompt_text(maya_chat)

    blocks = list(PeerBlock.objects.filter(conversation=maya_chat).exclude(content=""))

    assert blocks
    for block in blocks:
        assert EMAIL not in block.content and PHONE not in block.content
        assert not any(clause in block.content for clause in leos_clauses())


def test_cross_person_full_shows_others_text_and_none_shows_nothing_of_them(people):
    _, maya, _, _, _ = people
    config_update(section="memory.temporal_summary", values={"cross_person": "full"})
    full = prompt_text(ConversationFactory(person=maya))
    config_update(section="memory.temporal_summary", values={"cross_person": "none"})
    none = prompt_text(ConversationFactory(person=maya))

    assert EMAIL in full and "杭州出差" in full
    assert EMAIL not in none and "Leo" not in none
    assert "Maya 的葡萄牙语考试在下周三，有点紧张" in none  # her own conversation stays whole (told about her)


def test_an_unknown_human_sees_everyone_as_topics(people):
    stranger = ConversationFactory(person=None, chat_id="", title="who?")

    seen = prompt_text(stranger)

    assert EMAIL not in seen and MAYA_SAID not in seen
    assert "Leo: " in seen and "Maya: " in seen


def test_the_api_shows_summaries_as_the_caller_may_see_them(people):
    leo, maya, *_ = people
    as_maya = api_client(username="maya-app", scope="person", persons=[maya]).get("/api/temporal-summaries/")
    as_operator = api_client(username="ops", staff=True).get("/api/temporal-summaries/")

    [maya_view] = as_maya.json()["results"]
    [operator_view] = as_operator.json()["results"]
    assert EMAIL not in as_maya.content.decode() and PHONE not in as_maya.content.decode()
    assert {section.get("who") for section in maya_view["sections"]} == {"Leo", "Maya"}
    assert all("text" not in s for s in maya_view["sections"] if s.get("who") == "Leo")
    assert EMAIL in operator_view["content"]  # the console and operators see everything
    assert {s["person_id"] for s in operator_view["sections"]} == {leo.pk, maya.pk}


def test_another_persons_topic_line_is_general_themes_never_their_rarest_words():
    leo, maya = PersonFactory(slug="leo", display_name="Leo"), PersonFactory(slug="maya", display_name="Maya")
    maya_chat = ConversationFactory(person=maya, title="Paperwork")
    said = "My passport number is X1234567 and my email is maya.zebracanary@example.com, for the visa form."
    MessageFactory(conversation=maya_chat, role=Role.USER, content=said, created_at=at("20:00", "2026-11-27"))
    temporal_summary_write_day(day=date(2026, 11, 27))

    seen_in_english = prompt_text(ConversationFactory(person=leo, title="Leo on the web"), "Good morning")
    seen_in_chinese = prompt_text(ConversationFactory(person=leo, title="杂事"))

    assert "Maya: travel" in seen_in_english and "Maya: 旅行" in seen_in_chinese  # the viewer's language
    for word in ("passport", "number", "email", "zebracanary", "visa", "X1234567"):
        assert word not in seen_in_english and word not in seen_in_chinese, word
