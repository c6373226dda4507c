from __future__ import annotations

import datetime as dt

from django.utils import timezone

from anima.core.config import config_update
from anima.core.llm.testing import scripted
from conversations.models import Platform, Role
from sleep.context import StepContext
from sleep.steps import temporal_summary_cascade, temporal_summary_day
from temporal.models import TemporalSummary
from temporal.services import summary_clean, temporal_summary_write_day
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
    assert summary.body == {"window": "day", "period_start": "2026-11-26"}
    assert first["summary_id"] == second["summary_id"] == summary.pk
    assert "Portuguese" in summary.content
    assert "datacenter" not in summary.content


def test_day_summary_is_cut_to_the_configured_cap():
    config_update(section="memory.temporal_summary", values={"day_chars": 120})
    for n in range(6):
        _talk(DAY, [(Role.USER, f"Topic {n}: we planned a very long trip across Portugal and Spain by train.")])
    temporal_summary_day(_ctx(DAY))
    assert len(TemporalSummary.objects.get().content) <= 120


def test_day_summary_sends_no_internal_ids_or_tool_output():
    conversation = _talk(DAY, [(Role.USER, "What's the weather tomorrow in Lisbon?")])
    MessageFactory(
        conversation=conversation,
        role=Role.TOOL,
        content='{"tool": "weather", "call_id": "call-XYZ"}',
        created_at=timezone.make_aware(dt.datetime(2026, 11, 26, 9, 30)),
    )
    with scripted({"temporal.day": [{"summary": "Maya asked about the weather in Lisbon."}]}) as provider:
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
    assert TemporalSummary.objects.get().content == "Maya asked about the weather in Lisbon."


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
    assert month.body == {"window": "month", "period_start": "2026-11-01"}
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
    assert year.body == {"window": "year", "period_start": "2026-01-01"}
    assert "the launch" in year.content
    assert set(output) == {"month", "year"}


def test_a_summary_answer_loses_its_preamble_and_nul_before_it_is_stored():
    assert summary_clean("好的，\x00今天 Leo 上线成功。", max_chars=800) == "今天 Leo 上线成功。"
