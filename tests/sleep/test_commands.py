from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from sleep import steps
from sleep.cycle import SLEEP_CYCLE
from sleep.models import PipelineRun
from tests.factories import ConversationFactory


def sleep_cycle(*args: str) -> str:
    out = io.StringIO()
    call_command("sleep_cycle", *args, stdout=out)
    return out.getvalue()


def test_a_run_prints_a_table_of_steps_and_ends_with_one_json_line():
    output = sleep_cycle("--day", "2026-11-20", "--json")

    lines = output.strip().splitlines()
    report = json.loads(lines[-1])
    run = PipelineRun.objects.get()
    assert report["run_id"] == run.pk and report["day"] == "2026-11-20" and report["status"] == "succeeded"
    assert [step["step"] for step in report["steps"]][:2] == ["conversation-cleanup", "light-sleep"]
    assert len(report["steps"]) == len(SLEEP_CYCLE.steps)
    assert set(report["steps"][0]) == {"step", "status", "attempt", "output", "error"}
    table = "\n".join(lines[:-1])
    assert "light-sleep" in table and "succeeded" in table
    assert run.mode == "full" and run.trigger == "manual"


def test_a_failed_step_is_shown_and_exits_non_zero(monkeypatch):
    def broken(ctx):
        raise RuntimeError("the dream machine is broken")

    monkeypatch.setattr(steps, "dream", broken)
    out = io.StringIO()

    with pytest.raises(CommandError, match="failed: failed steps: dream"):
        call_command("sleep_cycle", "--day", "2026-11-20", "--json", stdout=out)

    lines = out.getvalue().strip().splitlines()
    assert "RuntimeError: the dream machine is broken" in "\n".join(lines[:-1])
    report = json.loads(lines[-1])
    assert report["status"] == "failed"
    assert {step["step"]: step["status"] for step in report["steps"]}["deep-sleep"] == "succeeded"


def test_a_partial_night_lists_what_was_not_done_and_exits_2(monkeypatch):
    conversation = ConversationFactory(title="Exam day nerves")
    failure = {"conversation_id": conversation.pk, "day": "2026-11-20", "stage": "limbic"}
    failure["error"] = "LlmInvalidOutput: x"
    monkeypatch.setattr(steps, "light_sleep", lambda ctx: {"conversations": [], "failures": [failure]})
    out = io.StringIO()

    with pytest.raises(CommandError, match=r"run #\d+ partial: light-sleep: conversation_id") as caught:
        call_command("sleep_cycle", "--day", "2026-11-20", "--json", stdout=out)

    assert caught.value.returncode == 2
    lines = out.getvalue().strip().splitlines()
    assert (
        f"not done: light-sleep, conversation #{conversation.pk} 'Exam day nerves' of 2026-11-20, stage limbic: "
        "LlmInvalidOutput: x"
    ) in lines
    report = json.loads(lines[-1])
    assert report["status"] == "partial" and report["failures"] == [{"step": "light-sleep", **failure}]
    assert {step["status"] for step in report["steps"] if step["step"] != "light-sleep"} == {"succeeded"}


def test_one_step_with_force_and_mode():
    output = sleep_cycle("--day", "2026-11-20", "--step", "deep-sleep", "--force", "--mode", "incremental", "--json")

    report = json.loads(output.strip().splitlines()[-1])
    assert [(step["step"], step["attempt"]) for step in report["steps"]] == [("deep-sleep", 1)]
    assert PipelineRun.objects.get().mode == "incremental"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--day", "20/11/2026"], "expected a date as YYYY-MM-DD"),
        (["--step", "rem-sleep"], "invalid choice: 'rem-sleep'"),
        (["--mode", "deep"], "invalid choice: 'deep'"),
        (["--day", "2026-11-20", "--step", "dream"], "light-sleep has not succeeded"),
    ],
)
def test_bad_arguments_are_clear_errors(args, message):
    with pytest.raises(CommandError, match=message):
        sleep_cycle(*args)
    assert PipelineRun.objects.count() == 0
