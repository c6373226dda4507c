"""A model call whose failure is one item of a step's work, not the whole step's.

A step that asks the model several things (a deep-sleep round, a language of the self layer, the day's
dream) lists each call that failed under ``failures``: the step is then partial, the steps after it run
on what it did, and the night goes on (``sleep.pipeline``). A spent token budget still ends the step:
nothing after it could call the model either.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from anima.core.llm import LlmBudgetExceeded, LlmError

logger = logging.getLogger(__name__)

T = TypeVar("T")


def answer_or_failure(ask: Callable[[], T], /, *, failures: list[dict], **item: str) -> T | None:
    """What ``ask`` returns, or None with the failure appended to ``failures`` as ``{**item, "error"}``."""
    try:
        return ask()
    except LlmBudgetExceeded:
        raise
    except LlmError as exc:
        error = f"{type(exc).__name__}: {exc}"
        logger.warning("%s failed: %s", " ".join(f"{key} {value}" for key, value in item.items()), error)
        failures.append({**item, "error": error})
        return None
