"""A job's token budget, held across every process that calls the model for it.

Checking what was spent and then calling lets every worker that checks at the same moment call
too. Instead a call first reserves its largest possible cost (its prompt plus ``max_tokens``) with
one conditional UPDATE of the job's row, admitted only while spent + reserved is under the budget;
so however many workers call at once, what a job spends stays within its budget plus one call.
A call refused only because calls in flight hold the rest raises ``LlmBudgetReserved``: its caller
may try again once they have returned.
"""

from __future__ import annotations

from django.db import connection

from anima.core.llm.errors import LlmBudgetExceeded, LlmBudgetReserved

_ENSURE = (
    "INSERT INTO llm_token_budgets (run_key, spent, reserved)"
    " SELECT %(key)s, COALESCE(SUM(total_tokens), 0), 0 FROM auto_llm_runs WHERE run_key = %(key)s"
    " ON CONFLICT (run_key) DO NOTHING"
)
_CLAIM = (
    "UPDATE llm_token_budgets SET reserved = reserved + %(tokens)s"
    " WHERE run_key = %(key)s AND spent + reserved < %(budget)s RETURNING run_key"
)
_SETTLE = (
    "UPDATE llm_token_budgets SET reserved = GREATEST(reserved - %(tokens)s, 0), spent = spent + %(spent)s"
    " WHERE run_key = %(key)s"
)


def budget_reserve(*, run_key: str, budget: int, tokens: int, purpose: str) -> None:
    """Reserve ``tokens`` of ``run_key``'s ``budget`` for one call, or raise LlmBudgetExceeded (nothing reserved).

    The row starts from the tokens already audited under ``run_key``, so calls made before it
    existed count too.
    """
    params = {"key": run_key, "budget": budget, "tokens": tokens}
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM, params)
        if cursor.fetchone() is not None:
            return
        held = _held(cursor, run_key=run_key)
        if held is None:  # the job's first call: only then are its audited tokens summed
            cursor.execute(_ENSURE, params)
            cursor.execute(_CLAIM, params)
            if cursor.fetchone() is not None:
                return
            held = _held(cursor, run_key=run_key)
    spent, reserved = held
    in_flight = f" (and {reserved} reserved by calls in flight)" if reserved else ""
    error = LlmBudgetReserved if spent < budget else LlmBudgetExceeded
    raise error(
        f"token budget exhausted: {run_key or 'this run'} has spent {spent} of {budget} tokens{in_flight}; "
        f"{purpose} was not sent"
    )


def _held(cursor, *, run_key: str) -> tuple[int, int] | None:
    """(spent, reserved) of ``run_key``'s row, None before its first call."""
    cursor.execute("SELECT spent, reserved FROM llm_token_budgets WHERE run_key = %s", [run_key])
    return cursor.fetchone()


def budget_settle(*, run_key: str, reserved: int, spent: int) -> None:
    """Replace a call's reservation by what it spent."""
    with connection.cursor() as cursor:
        cursor.execute(_SETTLE, {"key": run_key, "tokens": reserved, "spent": spent})
