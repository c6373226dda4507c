"""Run the nightly sleep cycle, or one step of it, for a day and print what each step did."""

from __future__ import annotations

import datetime as dt
import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from anima.core.commands import date_arg
from sleep.cycle import SLEEP_CYCLE
from sleep.models import DeepSleepMode, PipelineRun, RunStatus, StepStatus
from sleep.pipeline import PipelineError
from sleep.selectors import sleep_failure_describe, sleep_run_failures
from sleep.services import sleep_cycle_run

OUTPUT_WIDTH = 70
# Exit status of a partial night: not a failure of the command, but not a night fully slept either.
PARTIAL_EXIT = 2


class Command(BaseCommand):
    help = (
        "Run the sleep cycle (default: yesterday, full mode) or one step of it; exits 1 if a step failed, "
        "2 if the night is partial (a conversation failed; the next nights retry it)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--day", type=date_arg, help="local day to sleep, YYYY-MM-DD (default: yesterday)")
        parser.add_argument("--step", choices=SLEEP_CYCLE.step_names, help="run only this step (a manual retry)")
        parser.add_argument("--force", action="store_true", help="skip the dependency check of --step")
        parser.add_argument("--mode", choices=DeepSleepMode.values, help="deep-sleep mode (default: full)")
        parser.add_argument("--json", action="store_true", help="end with one JSON line describing the run")

    def handle(self, *args, day: dt.date | None, step: str | None, force: bool, mode: str | None, **options) -> None:
        try:
            run = sleep_cycle_run(day=day, step=step, force=force, mode=mode)
        except PipelineError as exc:
            raise CommandError(str(exc)) from exc
        rows = list(run.steps.order_by("id"))
        self.stdout.write(f"sleep cycle run #{run.pk} for {run.day} ({run.mode}, {run.trigger}): {run.status}")
        self.stdout.write(f"{'step':<26} {'status':<10} {'try':>3} {'seconds':>8}  what it wrote")
        for row in rows:
            duration = f"{row.duration_seconds:.2f}" if row.duration_seconds is not None else "-"
            # A partial step's failures are listed below, one a line.
            summary = row.error if row.status == StepStatus.FAILED else _render(row.output)
            self.stdout.write(f"{row.step:<26} {row.status:<10} {row.attempt:>3} {duration:>8}  {summary}")
        failures = sleep_run_failures(run=run)
        for failure in failures:
            self.stdout.write(f"not done: {sleep_failure_describe(failure=failure)}")
        if options["json"]:
            self.stdout.write(json.dumps({**_run_json(run, rows), "failures": failures}, ensure_ascii=False))
        if run.status == RunStatus.FAILED:
            raise CommandError(f"sleep cycle run #{run.pk} failed: {run.error}")
        if run.status == RunStatus.PARTIAL:
            raise CommandError(f"sleep cycle run #{run.pk} {run.error}", returncode=PARTIAL_EXIT)


def _render(output: dict) -> str:
    """A one-line rendering of a step's output: its scalar fields, lists as their length."""
    parts = []
    for key, value in output.items():
        if isinstance(value, list | dict):
            value = len(value)
        parts.append(f"{key}={value}")
    text = ", ".join(parts) or "-"
    return text if len(text) <= OUTPUT_WIDTH else text[: OUTPUT_WIDTH - 1] + "…"


def _run_json(run: PipelineRun, rows: list) -> dict:
    return {
        "run_id": run.pk,
        "day": run.day.isoformat(),
        "status": run.status,
        "steps": [
            {"step": row.step, "status": row.status, "attempt": row.attempt, "output": row.output, "error": row.error}
            for row in rows
        ],
    }
