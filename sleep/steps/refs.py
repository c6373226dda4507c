"""memory-ref-sync: recalibrate reference counts from the messages."""

from __future__ import annotations

from memory.citations import memory_ref_sync as references_rebuild
from sleep.context import StepContext


def memory_ref_sync(ctx: StepContext) -> dict:
    return references_rebuild()
