"""What a sleep-cycle step function receives."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date


@dataclass(frozen=True)
class StepContext:
    run_id: int
    day: date  # the local (ANIMA_TIME_ZONE) calendar day being slept
    mode: str  # deep-sleep mode: "full" | "incremental"
    force: bool
    run_key: str  # correlates this run's AutoLlmRun rows, e.g. "sleep-run:42"
    token_budget: int | None  # LLM tokens this run may still spend in total (None = unlimited)
