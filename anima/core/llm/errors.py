"""Errors of the LLM layer; callers catch these, never provider-specific ones."""

from __future__ import annotations


class LlmError(Exception):
    """Any failure of a background LLM call."""


class LlmTransientError(LlmError):
    """Network error, timeout, 429 or 5xx that persisted through the retries."""


class LlmInvalidOutput(LlmError):
    """The answer was not JSON, broke the schema, or was cut off at max_tokens."""


class LlmBudgetExceeded(LlmError):
    """The run's token budget is spent; the model was not called."""


class LlmBudgetReserved(LlmBudgetExceeded):
    """What is left of the budget is reserved by calls in flight; once they return, there may be room again."""


class LlmDeadlineExceeded(LlmTransientError):
    """The call's total deadline passed (across its retries, repair round and truncation retry)."""


class LlmRepairFailed(LlmInvalidOutput):
    """The answer broke the schema, and so did the one the model gave when shown what was wrong."""


class LlmTruncated(LlmInvalidOutput):
    """The answer was cut off at max_tokens, also after the one retry with a larger budget the stage allows."""
