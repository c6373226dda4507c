from __future__ import annotations

import datetime as dt
import json

import pytest
from django.utils import timezone

from anima.core.config import config_update
from anima.core.llm.testing import scripted
from conversations.models import Platform, Role
from sleep.context import StepContext
from sleep.steps import temporal_summary_cascade, temporal_summary_day
from temporal.models import TemporalSummary
from temporal.privacy import TOPIC_RULE
from temporal.services import MIN_SECTION_CHARS, summary_clean, temporal_summary_write_day
from tests.factories import ConversationFactory, MessageFactory, PersonFactory, TemporalSummaryFactory

DAY = dt.date(2026, 11, 26)


def _ctx(day: dt.date) -> StepContext:
    return StepContext(run_id=0, day=day, mode="full", force=False, run_key="test", token_budget=None)


def _talk(day: dt.date, lines, *, platform: str = Platform.WEB, title: str = "Exam day"):
    conversation = ConversationFactory(platform=platform, title=title, person=PersonFactory(slug="maya"))
    for minute, (role, content) in enumerate(lines):
        MessageFactory(
            conversation=conversation,
            role=role,
            content=content,
            created_at=timezone.make_aware(dt.datetime.combine(day, dt.time(9, minute))),
        )
    return conversation


def test_day_summary_covers_user_facing_conversations_and_is_overwritten_on_rerun():
    _talk(DAY, [(Role.USER, "My Portuguese exam is at 2 pm today and I'm so nervous."), (Role.ASSISTANT, "Good luck!")])
    _talk(DAY, [(Role.USER, "[nightly-report] usage report for the datacenter")], platform=Platform.CRON)

    first = temporal_summary_day(_ctx(DAY))
    second = temporal_summary_day(_ctx(DAY))

    summary = TemporalSummary.objects.get()
    [section] = summary.body["sections"]
    assert (summary.body["window"], summary.body["period_start"]) == ("day", "2026-11-26")
    assert (section["who"], section["channel"], section["title"]) == ("Maya", "web", "Exam day")
    assert first["summary_id"] == second["summary_id"] == summary.pk
    assert "Portuguese" in section["text"] and "Portuguese" in summary.content
    assert section["topic"] and not any(ch.isdigit() for ch in section["topic"])
    assert "datacenter" not in summary.content


def test_the_conversations_of_a_day_share_its_cap():
    config_update(section="memory.temporal_summary", values={"day_chars": 120})
    long_line = "we planned a very long trip across Portugal and Spain by train, city after city, week after week."
    _talk(DAY, [(Role.USER, f"Topic alone: {long_line * 3}")])
    temporal_summary_day(_ctx(DAY))
    [alone] = TemporalSummary.objects.get().body["sections"]
    for n in range(5):
        _talk(DAY, [(Role.USER, f"Topic {n}: {long_line * 3}")])
    temporal_summary_day(_ctx(DAY))
    sections = TemporalSummary.objects.get().body["sections"]

    assert len(alone["text"]) <= 120
    # Six conversations: each gets its share, never less than MIN_SECTION_CHARS.
    assert len(sections) == 6 and all(len(section["text"]) <= MIN_SECTION_CHARS for section in sections)


def test_day_summary_sends_no_internal_ids_or_tool_output():
    conversation = _talk(DAY, [(Role.USER, "What's the weather tomorrow in Lisbon?")])
    MessageFactory(
        conversation=conversation,
        role=Role.TOOL,
        content='{"tool": "weather", "call_id": "call-XYZ"}',
        created_at=timezone.make_aware(dt.datetime(2026, 11, 26, 9, 30)),
    )
    answer = {
        "sections": [{"conversation": 0, "topic": "weather", "summary": "Maya asked about the weather in Lisbon."}]
    }
    with scripted({"temporal.day": [answer]}) as provider:
        temporal_summary_write_day(day=DAY, run_key="test")
    payload = provider.calls[0].payload
    assert "call-XYZ" not in str(payload)
    assert not [key for key in _keys(payload) if key == "id" or key.endswith("_id")]


def _keys(value) -> list[str]:
    if isinstance(value, dict):
        return [*value, *(key for item in value.values() for key in _keys(item))]
    if isinstance(value, list):
        return [key for item in value for key in _keys(item)]
    return []
    assert TemporalSummary.objects.get().content == "- Maya (web) “Exam day”: Maya asked about the weather in Lisbon."


def test_a_day_without_conversations_writes_nothing():
    assert temporal_summary_day(_ctx(DAY))["skipped_reason"] == "no_conversations"
    assert not TemporalSummary.objects.exists()


def _day_summary(day: dt.date, text: str):
    return TemporalSummaryFactory(source_day=day, content=text, body={"window": "day", "period_start": day.isoformat()})


def test_month_summary_is_written_only_on_the_months_last_day():
    _day_summary(dt.date(2026, 11, 26), "- Leo prepared the launch.")
    _day_summary(dt.date(2026, 11, 28), "- The launch went well; Maya passed her exam.")

    assert temporal_summary_cascade(_ctx(dt.date(2026, 11, 29))) == {"skipped_reason": "not_period_end"}
    assert not TemporalSummary.objects.filter(body__window="month").exists()

    output = temporal_summary_cascade(_ctx(dt.date(2026, 11, 30)))

    month = TemporalSummary.objects.get(body__window="month")
    assert (month.body["window"], month.body["period_start"]) == ("month", "2026-11-01")
    assert output["month"]["summary_id"] == month.pk
    assert "launch" in month.content and "Maya passed" in month.content
    assert len(month.content) <= 2000


def test_year_summary_is_written_on_december_31_from_the_months():
    TemporalSummaryFactory(
        source_day=dt.date(2026, 11, 1),
        content="- November: the launch.",
        body={"window": "month", "period_start": "2026-11-01"},
    )
    output = temporal_summary_cascade(_ctx(dt.date(2026, 12, 31)))
    year = TemporalSummary.objects.get(body__window="year")
    assert (year.body["window"], year.body["period_start"]) == ("year", "2026-01-01")
    assert "the launch" in year.content
    assert set(output) == {"month", "year"}


def test_a_summary_answer_loses_its_preamble_and_nul_before_it_is_stored():
    assert summary_clean("好的，\x00今天 Leo 上线成功。", max_chars=800) == "今天 Leo 上线成功。"
    assert summary_clean("當然，以下是今天的摘要：Leo 上線成功。", max_chars=800) == "Leo 上線成功。"
    assert summary_clean("Here\u2019s the summary: Maya passed.", max_chars=800) == "Maya passed."


def test_a_month_keeps_a_section_per_conversation_with_its_owner():
    leo_chat = _talk(dt.date(2026, 11, 3), [(Role.USER, "I started training for the Lisbon marathon.")], title="Run")
    maya_chat = _talk(dt.date(2026, 11, 3), [(Role.USER, "Mein Deutschkurs beginnt morgen.")], title="German")
    leo_chat.person = PersonFactory(slug="leo")
    leo_chat.save()
    MessageFactory(
        conversation=leo_chat,
        content="The marathon training went well this week.",
        created_at=timezone.make_aware(dt.datetime(2026, 11, 20, 9)),
    )
    temporal_summary_write_day(day=dt.date(2026, 11, 3))
    temporal_summary_write_day(day=dt.date(2026, 11, 20))

    temporal_summary_cascade(_ctx(dt.date(2026, 11, 30)))

    month = TemporalSummary.objects.get(body__window="month")
    by_conversation = {section["conversation_id"]: section for section in month.body["sections"]}
    assert set(by_conversation) == {leo_chat.pk, maya_chat.pk}
    leo = by_conversation[leo_chat.pk]
    assert leo["person_id"] == leo_chat.person_id and by_conversation[maya_chat.pk]["person_id"] == maya_chat.person_id
    assert "2026-11-03" in leo["text"] and "2026-11-20" in leo["text"]


@pytest.mark.parametrize(
    "leaky_topic",
    [
        "Leo 的联系方式：ｌｅｏ＠ｅｘａｍｐｌｅ．ｃｏｍ",  # fullwidth, as a model once stored it
        "leo dot chen at example dot com, one three eight zero zero",
        "Leo 的电话 ①③⑧⓪⓪①③⑧⓪⓪⓪，他说“顺便记一下”",
    ],
)
def test_a_models_topic_line_is_stored_as_themes_of_the_closed_vocabulary_only(llm_stub, leaky_topic):
    said = "顺便记一下，我的邮箱是 leo@example.com，电话 13800138000。下周去杭州出差。"
    _talk(DAY, [(Role.USER, said), (Role.ASSISTANT, "好的，记下了。")], title="杂事")
    own_text = "Leo 留下了邮箱 leo@example.com 和电话 13800138000。"
    llm_stub.reply({"sections": [{"conversation": 0, "topic": leaky_topic, "summary": own_text}]})

    temporal_summary_write_day(day=DAY)

    request = llm_stub.requests[0]
    system, user = request["messages"][0]["content"], json.loads(request["messages"][1]["content"])
    assert TOPIC_RULE in system and '"sections"' in system  # the model is given the vocabulary
    assert user["conversations"][0]["conversation"] == 0
    [section] = TemporalSummary.objects.get().body["sections"]
    assert section["text"] == own_text  # the person's own section keeps everything
    # Nothing the model wrote is kept: the themes of what was said, from the vocabulary.
    assert section["topic"] == "travel, plans"


def test_a_section_the_model_left_out_or_invented_is_not_stored():
    _talk(DAY, [(Role.USER, "We fixed the boiler together.")], title="Home")
    _talk(DAY, [(Role.USER, "The cat is at the vet.")], title="Cat")
    answer = {"sections": [{"conversation": 1, "topic": "vet", "summary": "The cat went to the vet."}]}
    answer["sections"].append({"conversation": 7, "topic": "x", "summary": "invented"})
    with scripted({"temporal.day": [answer]}):
        output = temporal_summary_write_day(day=DAY)

    assert (output["sections"], output["unanswered"]) == (1, 1)
    assert [section["title"] for section in TemporalSummary.objects.get().body["sections"]] == ["Cat"]


def test_a_rerun_whose_answer_leaves_a_conversation_out_keeps_its_earlier_section():
    _talk(DAY, [(Role.USER, "We fixed the boiler together.")], title="Home")
    _talk(DAY, [(Role.USER, "The cat is at the vet.")], title="Cat")
    temporal_summary_write_day(day=DAY)
    [home, _] = TemporalSummary.objects.get().body["sections"]
    # Late messages: the day is written again, and this time the model answers for the cat only.
    answer = {"sections": [{"conversation": 1, "topic": "vet", "summary": "The cat came home from the vet."}]}
    with scripted({"temporal.day": [answer]}):
        output = temporal_summary_write_day(day=DAY)

    sections = TemporalSummary.objects.get().body["sections"]
    assert [section["title"] for section in sections] == ["Home", "Cat"]
    assert sections[0] == home and sections[1]["text"] == "The cat came home from the vet."
    assert (output["sections"], output["kept"], output["unanswered"]) == (1, 1, 1)


def test_a_rerun_with_no_section_answered_leaves_the_stored_summary_as_it_was():
    _talk(DAY, [(Role.USER, "We fixed the boiler together.")], title="Home")
    temporal_summary_write_day(day=DAY)
    before = TemporalSummary.objects.get()
    with scripted({"temporal.day": [{"sections": [{"conversation": 0, "topic": "x", "summary": "好的，"}]}]}):
        output = temporal_summary_write_day(day=DAY)

    assert output["skipped_reason"] == "empty_summary"
    after = TemporalSummary.objects.get()
    assert (after.body, after.content) == (before.body, before.content)
