"""emotional-imprint: strong feelings about one matter that recur on three days become one imprint, per person."""

from __future__ import annotations

from memory.imprints import imprints_refresh
from sleep.context import StepContext


def emotional_imprint(ctx: StepContext) -> dict:
    return imprints_refresh(day=ctx.day)
