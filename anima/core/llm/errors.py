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
