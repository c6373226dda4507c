"""How one execution of a pipeline step, or of one item of a fanned-out step, is recorded on its row.

The work's output is stored as JSON, a step that did part of its work (``FAILURES`` in its output) is ``partial``,
and a failure is kept as its error rather than raised: the runner (``sleep.pipeline``) decides what follows.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import date

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Max
from django.utils import timezone

from anima.core.llm import LlmBudgetExceeded
from sleep.models import PipelineItemRun, PipelineStepRun, StepStatus

logger = logging.getLogger(__name__)

BUDGET_EXHAUSTED = "token budget exhausted"
# The output key of a step that did part of its work: a list of {..., "error"}, one per item it could not do.
FAILURES = "failures"


def step_attempt_next(*, pipeline_name: str, day: date, step: str) -> int:
    """Attempts count per (day, step) across runs: re-running a step of a day is a retry."""
    previous = PipelineStepRun.objects.filter(run__pipeline=pipeline_name, run__day=day, step=step).aggregate(
        attempt=Max("attempt")
    )["attempt"]
    return (previous or 0) + 1


def _failures(output: dict, *, what: str) -> str:
    """The failures a step's output lists, as one line ("" when it did all its work).

    Each names its item by its fields in key order: a JSONB column (an item's output) keeps no order of its own.
    """
    failures = output.get(FAILURES) or []
    if not isinstance(failures, list) or not all(isinstance(f, dict) and f.get("error") for f in failures):
        raise TypeError(f"{what}: {FAILURES} must be a list of objects, each with an error")
    return "; ".join(
        " ".join(f"{key} {value}" for key, value in sorted(failure.items()) if key != "error") + f": {failure['error']}"
        for failure in failures
    )


def step_work_record(
    row: PipelineStepRun | PipelineItemRun,
    what: str,
    work: Callable[[], dict],
    *,
    keep: dict | None = None,
    passes: tuple[type[Exception], ...] = (),
) -> None:
    """Run ``work`` and record on ``row`` how it went: its output (after ``keep``), or why it failed.

    An exception in ``passes`` is raised to the caller, ``row`` left as it was.
    """
    try:
        output = work()
        if not isinstance(output, dict):
            raise TypeError(f"{what} returned {type(output).__name__}, expected a dict")
        # Round-trip so dates and decimals in an output are stored as JSON strings, not refused.
        row.output = {**(keep or {}), **json.loads(json.dumps(output, cls=DjangoJSONEncoder))}
        row.status = StepStatus.SUCCEEDED
        failures = _failures(row.output, what=what)
        if failures:
            row.status = StepStatus.PARTIAL
            row.error = failures
    except passes:
        raise
    except LlmBudgetExceeded as exc:
        logger.warning("%s: %s", what, exc)
        row.status = StepStatus.FAILED
        row.error = f"{BUDGET_EXHAUSTED}: {exc}"
    except Exception as exc:
        logger.exception("%s failed", what)
        row.status = StepStatus.FAILED
        row.error = f"{type(exc).__name__}: {exc}"
    row.finished_at = timezone.now()
    row.save(update_fields=["status", "output", "error", "finished_at"])
    if isinstance(row, PipelineStepRun):
        logger.info("%s %s in %.1f s", what, row.status, row.duration_seconds)
