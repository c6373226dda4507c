"""Sleep steps that write the global temporal summaries (logic lives in temporal.services)."""

from __future__ import annotations

from datetime import timedelta

from sleep.context import StepContext
from temporal.services import temporal_summary_write_day, temporal_summary_write_month, temporal_summary_write_year


def temporal_summary_day(ctx: StepContext) -> dict:
    return temporal_summary_write_day(day=ctx.day, run_key=ctx.run_key, token_budget=ctx.token_budget)


def temporal_summary_cascade(ctx: StepContext) -> dict:
    """The month on its last day, the year on Dec 31; any other day has nothing to do."""
    output: dict = {}
    if (ctx.day + timedelta(days=1)).day == 1:
        output["month"] = temporal_summary_write_month(day=ctx.day, run_key=ctx.run_key, token_budget=ctx.token_budget)
    if ctx.day.month == 12 and ctx.day.day == 31:
        output["year"] = temporal_summary_write_year(day=ctx.day, run_key=ctx.run_key, token_budget=ctx.token_budget)
    return output or {"skipped_reason": "not_period_end"}
