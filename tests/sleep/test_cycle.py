from __future__ import annotations

import datetime as dt
import json
import zoneinfo

import pytest
from django.utils import timezone

from anima.core.llm.offline import offline_handler_get
from anima.core.llm.providers import Completion, LlmRequest, provider_override
from anima.core.models import BlockTag, Component, Entity
from memory.models import SelfBlock, SelfLayerBlock, SemanticMemory
from sleep import steps
from sleep.cycle import SLEEP_CYCLE, SleepCycleBusy, sleep_cycle_default_day, sleep_cycle_mode
from sleep.models import PipelineRun, RunStatus
from sleep.pipeline import PipelineError, pipeline_lock
from sleep.services import sleep_cycle_missed_days, sleep_cycle_run
from tests.factories import (
    ContentBlockFactory,
    ConversationFactory,
    DiaryEntryFactory,
    MessageFactory,
    PersonFactory,
    PipelineRunFactory,
    RuntimeConfigFactory,
)

DAY = dt.date(2026, 11, 20)  # a Friday
STEP_FUNCTIONS = [
    "conversation_cleanup",
    "light_sleep",
    "deep_sleep",
    "dream",
    "self_layer_refresh",
    "memory_ref_sync",
    "temporal_summary_day",
    "temporal_summary_cascade",
]


@pytest.fixture
def quiet_steps(monkeypatch):
    """Replace the real steps with ones that only report the day they ran for."""
    for name in STEP_FUNCTIONS:
        monkeypatch.setattr(steps, name, lambda ctx, name=name: {"step": name, "day": ctx.day, "mode": ctx.mode})


def message_on(day: dt.date):
    local_noon = dt.datetime.combine(day, dt.time(12), tzinfo=zoneinfo.ZoneInfo("Asia/Shanghai"))
    return MessageFactory(created_at=local_noon)


def full_runs(**filters) -> list[tuple[dt.date, str, str]]:
    return list(PipelineRun.objects.filter(**filters).order_by("id").values_list("day", "trigger", "status"))


def test_the_dag_is_the_one_of_the_seeds():
    assert {step.name: step.depends_on for step in SLEEP_CYCLE.steps} == {
        "conversation-cleanup": (),
        "light-sleep": ("conversation-cleanup",),
        "deep-sleep": ("light-sleep",),
        "dream": ("light-sleep",),
        "self-layer-refresh": ("light-sleep",),
        "temporal-summary-day": ("light-sleep",),
        "emotional-tendency": ("light-sleep",),
        "memory-ref-sync": ("deep-sleep",),
        "temporal-summary-cascade": ("deep-sleep",),
        "subjects": ("deep-sleep",),
    }
    for step in SLEEP_CYCLE.steps:
        assert callable(step.resolve())


@pytest.mark.parametrize(
    ("day", "trigger", "mode"),
    [
        (dt.date(2026, 11, 22), "cron", "full"),  # Sunday, slept by the Monday 02:00 run
        (dt.date(2026, 11, 23), "cron", "incremental"),
        (DAY, "cron", "incremental"),
        (dt.date(2026, 11, 22), "catch-up", "full"),
        (DAY, "manual", "full"),
    ],
)
def test_scheduled_runs_are_full_on_mondays_and_manual_runs_are_full(day, trigger, mode):
    assert sleep_cycle_mode(day=day, trigger=trigger) == mode


def test_the_default_day_is_yesterday_in_the_companions_time_zone():
    assert sleep_cycle_default_day() == timezone.localdate() - dt.timedelta(days=1)


def test_a_manual_cycle_runs_the_real_steps_in_order_with_the_configured_budget():
    RuntimeConfigFactory(section="sleep", values={"token_budget": 12_345})

    run = sleep_cycle_run(day=DAY)

    assert (run.day, run.trigger, run.mode) == (DAY, "manual", "full")
    assert run.options["token_budget"] == 12_345
    rows = list(run.steps.values_list("step", "status"))
    assert [step for step, _ in rows] == [
        "conversation-cleanup",
        "light-sleep",
        "deep-sleep",
        "dream",
        "self-layer-refresh",
        "temporal-summary-day",
        "emotional-tendency",
        "memory-ref-sync",
        "temporal-summary-cascade",
        "subjects",
    ]
    assert run.status == "succeeded", run.steps.exclude(status="succeeded").values("step", "error")


def test_a_second_cycle_while_one_runs_is_refused_with_sleep_cycle_busy(quiet_steps):
    with pipeline_lock(pipeline=SLEEP_CYCLE):  # another session holds the cycle's lock
        with pytest.raises(SleepCycleBusy, match="sleep-cycle is already running"):
            sleep_cycle_run(day=DAY)
    assert PipelineRun.objects.count() == 0

    assert sleep_cycle_run(day=DAY).status == "succeeded"


def test_bad_requests_are_refused_before_anything_runs(quiet_steps):
    with pytest.raises(PipelineError, match="unknown step 'rem-sleep'"):
        sleep_cycle_run(day=DAY, step="rem-sleep")
    with pytest.raises(PipelineError, match="unknown mode 'deep'"):
        sleep_cycle_run(day=DAY, mode="deep")
    with pytest.raises(PipelineError, match="light-sleep has not succeeded"):
        sleep_cycle_run(day=DAY, step="dream")
    assert PipelineRun.objects.count() == 0


def test_the_scheduled_run_first_catches_up_the_days_missed_during_downtime(quiet_steps):
    message_on(DAY - dt.timedelta(days=30))
    PipelineRunFactory(day=DAY - dt.timedelta(days=5), trigger="cron", status="succeeded")
    PipelineRunFactory(day=DAY - dt.timedelta(days=3), trigger="manual", status="succeeded")
    earlier = PipelineRunFactory(day=DAY - dt.timedelta(days=2), trigger="cron", status="failed")

    sleep_cycle_run(day=DAY, trigger="cron")

    assert full_runs(id__gt=earlier.pk) == [
        (DAY - dt.timedelta(days=4), "catch-up", "succeeded"),
        (DAY - dt.timedelta(days=2), "catch-up", "succeeded"),
        (DAY - dt.timedelta(days=1), "catch-up", "succeeded"),
        (DAY, "cron", "succeeded"),
    ]
    catch_up = PipelineRun.objects.get(day=DAY - dt.timedelta(days=1), trigger="catch-up")
    assert catch_up.steps.get(step="light-sleep").output["day"] == "2026-11-19"
    assert sleep_cycle_missed_days(day=DAY + dt.timedelta(days=1)) == []


def test_catch_up_looks_back_at_most_a_week():
    message_on(DAY - dt.timedelta(days=30))

    assert sleep_cycle_missed_days(day=DAY) == [DAY - dt.timedelta(days=n) for n in range(7, 0, -1)]


def test_catch_up_never_reaches_before_the_first_message():
    message_on(DAY - dt.timedelta(days=2))

    assert sleep_cycle_missed_days(day=DAY) == [DAY - dt.timedelta(days=2), DAY - dt.timedelta(days=1)]


def test_nothing_is_caught_up_without_messages_or_for_manual_runs(quiet_steps):
    assert sleep_cycle_missed_days(day=DAY) == []

    message_on(DAY - dt.timedelta(days=3))
    sleep_cycle_run(day=DAY)

    assert full_runs() == [(DAY, "manual", "succeeded")]


def test_a_partial_night_counts_as_slept_its_failed_conversations_are_retried_by_light_sleep():
    message_on(DAY - dt.timedelta(days=3))
    PipelineRunFactory(day=DAY - dt.timedelta(days=2), trigger="cron", status="succeeded")
    PipelineRunFactory(day=DAY - dt.timedelta(days=1), trigger="cron", status="partial")

    assert sleep_cycle_missed_days(day=DAY) == []


def test_single_step_runs_do_not_count_as_a_slept_day(quiet_steps):
    message_on(DAY - dt.timedelta(days=1))
    sleep_cycle_run(day=DAY - dt.timedelta(days=1), step="conversation-cleanup")

    assert sleep_cycle_missed_days(day=DAY) == [DAY - dt.timedelta(days=1)]


# --- Blank answers: nothing empty is stored, and nothing stored blocks a later night ----------------

# Answer fields that are choices, not free text: a model that blanks its texts still picks these.
_CHOICES = {"memory_type", "kind", "significance", "occurred_at"}


# Texts a model may leave blank while its facts and feelings still come through.
_TITLES_AND_SUMMARIES = {"title", "turning_points", "milestones", "recent_narratives", "summary", *SelfBlock.values}


def _blanked(value, fields: set[str] | None, key=None):
    if isinstance(value, dict):
        return {name: _blanked(item, fields, name) for name, item in value.items()}
    if isinstance(value, list):
        return [_blanked(item, fields, key) for item in value]
    if isinstance(value, str) and key not in _CHOICES and (fields is None or key in fields):
        return "   "
    return value


class BlankTextProvider:
    """Answers like the offline provider, with free texts whitespace: those of ``fields``, or all."""

    name = "blank"
    model = "blank"
    dialect = "none"

    def __init__(self, fields: set[str] | None = None) -> None:
        self.fields = fields

    def complete(self, *, request: LlmRequest) -> Completion:
        answer = offline_handler_get(purpose=request.purpose)(request.payload)
        return Completion(text=json.dumps(_blanked(answer, self.fields)), model=self.model)


def _a_day_worth_remembering(day: dt.date) -> None:
    leo = PersonFactory(slug="leo")
    conversation = ConversationFactory(person=leo, platform="telegram")
    lines = [
        "我是一名软件工程师，住在杭州。我女儿小雨属虎，今年四岁。",
        "今天我升职了，真的太开心了！我们全家去吃了火锅庆祝。",
        "不过明天要出差，我有点担心小雨会想我。",
    ]
    for minute, text in enumerate(lines):
        local = dt.datetime.combine(day, dt.time(20, minute), tzinfo=zoneinfo.ZoneInfo("Asia/Shanghai"))
        MessageFactory(conversation=conversation, role="user", content=text, created_at=local)


def _blank_rows() -> list[str]:
    found = [
        f"entity #{row.pk} ({row.primary_component} {row.tag or row.memory_type})"
        for row in Entity.objects.exclude(primary_component=Component.DIARY_ENTRY)
        if not row.content.strip() or (row.tag in (BlockTag.NARRATIVE, BlockTag.DREAM) and not row.title.strip())
    ]
    for block in SelfLayerBlock.objects.all():
        if (block.content and not block.content.strip()) or any(
            line.strip() in ("-", "#", "##") for line in block.content.splitlines()
        ):
            found.append(f"self-layer block {block.key}: {block.content!r}")
    return found


@pytest.mark.parametrize("fields", [None, _TITLES_AND_SUMMARIES], ids=["every-text", "titles-and-summaries"])
def test_blank_answers_store_nothing_empty_and_the_next_nights_run_normally(fields):
    _a_day_worth_remembering(DAY)

    with provider_override(BlankTextProvider(fields)):
        sleep_cycle_run(day=DAY)

    assert _blank_rows() == []
    if fields is None:
        assert not SemanticMemory.objects.exists()  # the blank night consolidated nothing

    again = sleep_cycle_run(day=DAY)  # a working model retries the day
    _a_day_worth_remembering(DAY + dt.timedelta(days=1))
    next_night = sleep_cycle_run(day=DAY + dt.timedelta(days=1))

    assert (again.status, next_night.status) == (RunStatus.SUCCEEDED, RunStatus.SUCCEEDED), [
        (step.step, step.error) for step in again.steps.all() if step.error
    ]
    assert SemanticMemory.objects.filter(source_day=DAY, content__contains="杭州").exists()
    assert _blank_rows() == []


def test_a_blank_narrative_already_stored_does_not_block_the_outline():
    diary = DiaryEntryFactory(source_day=DAY)
    ContentBlockFactory(parent=diary, tag=BlockTag.NARRATIVE, title="学会耐心", content="那一天我学会了耐心", body={})
    blank = ContentBlockFactory(parent=diary, tag=BlockTag.NARRATIVE, title="x", content="y", body={})
    Entity.objects.filter(pk=blank.pk).update(title="", content="   ")  # written before answers were checked
    _a_day_worth_remembering(DAY)

    run = sleep_cycle_run(day=DAY)

    assert run.status == RunStatus.SUCCEEDED, [(step.step, step.error) for step in run.steps.all() if step.error]
    outline = SelfLayerBlock.objects.get(key="autobiography_summary").content
    assert "- 学会耐心" in outline and "- \n" not in outline + "\n"
