"""Reads of the sleep cycle's runs for the console, the API and the commands."""

from __future__ import annotations

from datetime import date

from conversations.models import Conversation
from sleep.cycle import SLEEP_CYCLE
from sleep.models import PipelineRun, StepStatus
from sleep.step_runs import FAILURES


def sleep_run_failures(*, run: PipelineRun) -> list[dict]:
    """What ``run`` left undone: each step that failed, and each item a partial step could not do.

    One entry per failure, ``{"step", "error"}`` plus what the step says of the item (for light sleep
    ``conversation_id``, ``day`` and ``stage``). Only a step's last attempt in the run counts (an
    interrupted attempt that a resumed run redid is not a failure). Reads ``run.steps.all()``, so a
    prefetch serves it.
    """
    last = {}
    for row in sorted(run.steps.all(), key=lambda row: row.pk):
        last[row.step] = row
    failures = []
    for row in last.values():
        if row.status == StepStatus.FAILED:
            failures.append({"step": row.step, "error": row.error})
        elif row.status == StepStatus.PARTIAL:
            failures.extend({"step": row.step, **failure} for failure in row.output.get(FAILURES, []))
    return failures


def sleep_run_last(*, day: date) -> PipelineRun | None:
    """The latest run of the sleep cycle for ``day``."""
    return PipelineRun.objects.filter(pipeline=SLEEP_CYCLE.name, day=day).order_by("-started_at", "-id").first()


def sleep_failure_describe(*, failure: dict) -> str:
    """One failure of ``sleep_run_failures`` as a line: the step, the conversation and its day, the stage, why."""
    where = failure["step"]
    conversation_id = failure.get("conversation_id")
    if conversation_id is not None:
        conversation = Conversation.objects.filter(pk=conversation_id).first()
        title = f" {conversation.title!r}" if conversation is not None and conversation.title else ""
        where += f", conversation #{conversation_id}{title}"
    if failure.get("day"):
        where += f" of {failure['day']}"
    if failure.get("stage"):
        where += f", stage {failure['stage']}"
    return f"{where}: {failure['error']}"
