"""One conversation whose model answers fail never loses the night: the rest is slept, that conversation-day is
marked failed (its watermark unmoved), shown as partial with why, and the next nights retry it."""

from __future__ import annotations

import datetime as dt
import json
import zoneinfo

import pytest
from django.conf import settings

from anima.api.testing import api_client
from anima.core.models import Component, Entity
from memory.models import DreamBlock, LimbicBlock, NarrativeBlock, SemanticMemory
from sleep.cycle import SLEEP_CYCLE
from sleep.models import LightSleepWatermark, RunStatus, StepStatus
from sleep.pipeline import pipeline_fanout_waiting
from sleep.services import sleep_cycle_run, sleep_fanout_join, sleep_item_run
from sleep.testing import offline_responder, sleep_purpose
from tests.factories import ConversationFactory, MessageFactory, PersonFactory

DAY = dt.date(2026, 11, 18)  # a Wednesday: no month or year summary
BROKEN = "Maya at night"


def _talk(conversation, lines: list[str], *, day: dt.date = DAY) -> None:
    for minute, text in enumerate(lines):
        at = dt.datetime.combine(day, dt.time(20, minute), tzinfo=zoneinfo.ZoneInfo(settings.ANIMA_TIME_ZONE))
        MessageFactory(conversation=conversation, role="user", content=text, created_at=at)


@pytest.fixture
def night(llm_stub):
    """Three conversations of DAY and a model over HTTP that answers garbage to the limbic stage of one of them.

    Yields the stub server, the conversations (Leo's two, then the broken one of Maya's) and a switch: clear
    ``broken`` and the model answers every call.
    """
    leo, maya = PersonFactory(slug="leo", display_name="Leo"), PersonFactory(slug="maya", display_name="Maya")
    work = ConversationFactory(person=leo, platform="telegram", title="Leo at work")
    _talk(work, ["我是一名软件工程师，住在杭州。", "今天我升职了，真的太开心了！我们全家去吃了火锅庆祝。"])
    home = ConversationFactory(person=leo, platform="web", title="Leo at home")
    _talk(home, ["我女儿小雨属虎，今年四岁。", "不过明天要出差，我有点担心小雨会想我。"])
    broken = ConversationFactory(person=maya, platform="web", title=BROKEN)
    _talk(broken, ["I'm a nurse and I live in Lisbon.", "I'm so exhausted after the night shift, I could cry."])
    switch = {"broken": True}

    def respond(body: dict):
        payload = json.loads(body["messages"][1]["content"])
        if (
            switch["broken"]
            and sleep_purpose(body) == "light-sleep.limbic"
            and payload["conversation"]["title"] == BROKEN
        ):
            # What a small real model answered: field names as values, required fields missing.
            return {"anchors": [{"kind": "content", "content": "valence"}]}
        return offline_responder(body)

    llm_stub.responder = respond
    return llm_stub, (work, home, broken), switch


def _asked(stub, purpose: str, title: str) -> int:
    asked = [json.loads(body["messages"][1]["content"]) for body in stub.requests if sleep_purpose(body) == purpose]
    return sum(1 for payload in asked if payload["conversation"]["title"] == title)


def test_a_conversation_whose_stage_fails_is_retried_while_the_rest_of_the_night_is_slept(night, admin_client):
    stub, (work, home, broken), switch = night

    run = sleep_cycle_run(day=DAY)

    # Every step ran; light sleep is partial and says for which conversation, at which stage, and why.
    steps = dict(run.steps.values_list("step", "status"))
    assert steps == {step.name: StepStatus.SUCCEEDED for step in SLEEP_CYCLE.steps} | {
        "light-sleep": StepStatus.PARTIAL
    }
    assert run.status == RunStatus.PARTIAL
    assert f"conversation_id {broken.pk} day {DAY} stage limbic: LlmRepairFailed" in run.error
    # The other conversations are consolidated, and the later steps ran on them.
    for conversation in (work, home):
        assert LimbicBlock.objects.filter(source_conversation=conversation).exists()
        assert NarrativeBlock.objects.filter(source_conversation=conversation).exists()
        mark = LightSleepWatermark.objects.get(conversation=conversation, day=DAY)
        assert (mark.last_message_id, mark.error) == (conversation.messages.order_by("id").last().pk, "")
    assert DreamBlock.objects.filter(parent__source_day=DAY).exists()
    day_summary = Entity.objects.get(primary_component=Component.TEMPORAL_SUMMARY, body__window="day")
    # The day summary reads the dialogue, not light sleep: the failed conversation has its section too.
    assert {s["conversation_id"] for s in day_summary.body["sections"]} == {work.pk, home.pk, broken.pk}
    # The failed conversation: its first stage is kept, nothing after it is written, its watermark did not move.
    facts = SemanticMemory.objects.filter(source_conversation=broken)
    assert facts.filter(content="Maya is a nurse").exists()
    facts_written = facts.count()
    assert not LimbicBlock.objects.filter(source_conversation=broken).exists()
    assert not NarrativeBlock.objects.filter(source_conversation=broken).exists()
    mark = LightSleepWatermark.objects.get(conversation=broken, day=DAY)
    assert (mark.last_message_id, mark.failed_stage) == (0, "limbic") and "LlmRepairFailed" in mark.error

    # The API and the console's Sleep page show the night as partial, with the conversation, stage and reason.
    shown = api_client(staff=True).get(f"/api/sleep-runs/{run.pk}/").json()
    assert shown["status"] == "partial"
    [failure] = shown["failures"]
    assert (failure["step"], failure["conversation_id"], failure["day"], failure["stage"]) == (
        "light-sleep",
        broken.pk,
        DAY.isoformat(),
        "limbic",
    )
    assert failure["error"].startswith("LlmRepairFailed: light-sleep.limbic")
    page = admin_client.get("/admin/sleep/dashboard/").content.decode()
    assert '<span class="status-partial">partial</span>' in page
    assert f'data-conversation="{broken.pk}"' in page and "stage limbic: LlmRepairFailed" in page
    assert f'href="/admin/conversations/conversation/{broken.pk}/change/">conversation #{broken.pk}</a>' in page

    # The next night, the model still failing for it: retried, still failed, the watermark still unmoved.
    next_day = DAY + dt.timedelta(days=1)
    _talk(work, ["明天见。"], day=next_day)
    again = sleep_cycle_run(day=next_day)
    assert again.status == RunStatus.PARTIAL and f"conversation_id {broken.pk} day {DAY}" in again.error
    assert LightSleepWatermark.objects.get(conversation=broken, day=DAY).last_message_id == 0

    # Once the model answers, the following night finishes it, without asking again what was done.
    switch["broken"] = False
    semantic_asked = _asked(stub, "light-sleep.semantic", BROKEN)
    later = sleep_cycle_run(day=next_day + dt.timedelta(days=1))

    assert later.status == RunStatus.SUCCEEDED, later.error
    assert LimbicBlock.objects.filter(source_conversation=broken, source_day=DAY).exists()
    assert NarrativeBlock.objects.filter(source_conversation=broken, source_day=DAY).exists()
    mark.refresh_from_db()
    assert (mark.last_message_id, mark.failed_stage, mark.error) == (broken.messages.order_by("id").last().pk, "", "")
    assert _asked(stub, "light-sleep.semantic", BROKEN) == semantic_asked == 1
    assert facts.count() == facts_written

    # Retrying is idempotent: another run of that night asks nothing more for the conversation, writes nothing.
    written = list(Entity.objects.filter(source_conversation=broken).values_list("pk", flat=True))
    limbic_asked = _asked(stub, "light-sleep.limbic", BROKEN)
    assert sleep_cycle_run(day=DAY).status == RunStatus.SUCCEEDED
    assert _asked(stub, "light-sleep.limbic", BROKEN) == limbic_asked
    assert list(Entity.objects.filter(source_conversation=broken).values_list("pk", flat=True)) == written


def test_fanned_out_the_failed_conversation_is_one_partial_item_and_the_join_carries_the_night_on(night):
    _, (work, home, broken), _ = night

    run = sleep_cycle_run(day=DAY, fan_out=True)
    row, pending = pipeline_fanout_waiting(run=run)
    items = {item: sleep_item_run(step_run_id=row.pk, item=item) for item in pending}
    run = sleep_fanout_join(run_id=run.pk)

    assert {item: ledger.status for item, ledger in items.items()} == {
        work.pk: StepStatus.SUCCEEDED,
        home.pk: StepStatus.SUCCEEDED,
        broken.pk: StepStatus.PARTIAL,
    }
    assert items[broken.pk].error.startswith(f"conversation_id {broken.pk} day {DAY} stage limbic: LlmRepairFailed")
    assert run.status == RunStatus.PARTIAL and f"conversation_id {broken.pk}" in run.error
    assert run.steps.get(step="light-sleep").status == StepStatus.PARTIAL
    assert set(run.steps.exclude(step="light-sleep").values_list("status", flat=True)) == {StepStatus.SUCCEEDED}
    assert LightSleepWatermark.objects.get(conversation=broken, day=DAY).last_message_id == 0


# The calls of the night made once a day (or once per group, batch or language), not per conversation.
DAY_LEVEL = {
    "deep-sleep.contradiction",
    "deep-sleep.split",
    "deep-sleep.merge",
    "deep-sleep.pins",
    "dream",
    "self-layer",
    "temporal.day",
    "light-sleep.outline",
}


def test_day_level_calls_the_model_cannot_answer_leave_the_night_partial_and_every_step_run(night):
    stub, (work, _, broken), switch = night
    switch["broken"] = False
    answered = stub.responder

    def respond(body: dict):
        # Every answer off the schema, the repaired one too: what a too-small model did all night.
        return {"content": "valence"} if sleep_purpose(body) in DAY_LEVEL else answered(body)

    stub.responder = respond
    run = sleep_cycle_run(day=DAY)

    steps = dict(run.steps.values_list("step", "status"))
    assert set(steps) == set(SLEEP_CYCLE.step_names)  # nothing skipped: a failed call fails no dependant
    partial = {name for name, status in steps.items() if status == StepStatus.PARTIAL}
    assert partial == {"light-sleep", "deep-sleep", "dream", "self-layer-refresh", "temporal-summary-day"}
    assert set(steps.values()) <= {StepStatus.SUCCEEDED, StepStatus.PARTIAL}
    assert run.status == RunStatus.PARTIAL
    for step in ("deep-sleep", "dream", "self-layer-refresh", "temporal-summary-day"):
        assert f"{step}: " in run.error and "LlmRepairFailed" in run.steps.get(step=step).error
    # What the per-conversation stages wrote is kept, and the steps after the failed ones ran on it.
    assert LimbicBlock.objects.filter(source_conversation=broken).exists()
    assert SemanticMemory.objects.filter(source_conversation=work).exists()
    assert not DreamBlock.objects.filter(parent__source_day=DAY).exists()
    assert steps["memory-ref-sync"] == steps["temporal-summary-cascade"] == StepStatus.SUCCEEDED

    # Once the model answers, a retry of the night dreams and writes the day summary.
    stub.responder = answered
    assert sleep_cycle_run(day=DAY).status == RunStatus.SUCCEEDED
    assert DreamBlock.objects.filter(parent__source_day=DAY).exists()
    assert Entity.objects.filter(primary_component=Component.TEMPORAL_SUMMARY, body__window="day").exists()
