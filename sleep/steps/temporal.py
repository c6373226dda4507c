"""Sleep steps that write the global temporal summaries (logic lives in temporal.services)."""

from __future__ import annotations

from datetime import timedelta

from sleep.context import StepContext
from sleep.step_runs import FAILURES
from sleep.steps.outcome import answer_or_failure
from temporal.services import temporal_summary_write_day, temporal_summary_write_month, temporal_summary_write_year

# A summary the model could not write is listed in the step's failures (the step is partial, the night goes
# on); the stored one, if any, stays, and a retry of the step writes it.


def temporal_summary_day(ctx: StepContext) -> dict:
    failures: list[dict] = []
    output = answer_or_failure(
        lambda: temporal_summary_write_day(day=ctx.day, run_key=ctx.run_key, token_budget=ctx.token_budget),
        failures=failures,
        window="day",
    )
    return output if output is not None else {"skipped_reason": "failed", FAILURES: failures}


def temporal_summary_cascade(ctx: StepContext) -> dict:
    """The month on its last day, the year on Dec 31; any other day has nothing to do."""
    output: dict = {}
    failures: list[dict] = []
    periods = {"month": (ctx.day + timedelta(days=1)).day == 1, "year": ctx.day.month == 12 and ctx.day.day == 31}
    writers = {"month": temporal_summary_write_month, "year": temporal_summary_write_year}
    for window, due in periods.items():
        if due:
            written = answer_or_failure(
                lambda write=writers[window]: write(day=ctx.day, run_key=ctx.run_key, token_budget=ctx.token_budget),
                failures=failures,
                window=window,
            )
            output[window] = written if written is not None else {"skipped_reason": "failed"}
    if failures:
        output[FAILURES] = failures
    return output or {"skipped_reason": "not_period_end"}
