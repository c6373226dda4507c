"""emotional-tendency: the 7- and 30-day lean of the limbic anchors, per person and overall."""

from __future__ import annotations

from memory.services import emotional_tendencies_refresh
from sleep.context import StepContext


def emotional_tendency(ctx: StepContext) -> dict:
    return emotional_tendencies_refresh(day=ctx.day)
