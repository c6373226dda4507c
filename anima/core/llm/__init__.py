"""Background LLM calls that answer JSON: identity context, validation, retries, budget, audit.

Every call goes through ``llm_json``; it is the one place that prepends the identity context
(self layer + resident memory) and writes the ``AutoLlmRun`` audit row.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings

from anima.core.jsonvalue import storable, too_deep_path, unstorable
from anima.core.llm.budget import budget_reserve, budget_settle
from anima.core.llm.dialects import JSON_OBJECT, schema_instructions
from anima.core.llm.errors import (
    LlmBudgetExceeded,
    LlmBudgetReserved,
    LlmDeadlineExceeded,
    LlmError,
    LlmInvalidOutput,
    LlmRepairFailed,
    LlmTransientError,
    LlmTruncated,
)
from anima.core.llm.providers import Completion, LlmRequest, Provider, provider_get
from anima.core.llm.schema import SchemaError, optional_nulls_dropped, schema_strict, schema_validate
from anima.core.llm.usage import tokens_counted
from anima.core.logs import log_context
from anima.core.models import AutoLlmRun

__all__ = [
    "LlmBudgetExceeded",
    "LlmBudgetReserved",
    "LlmDeadlineExceeded",
    "LlmError",
    "LlmInvalidOutput",
    "LlmRepairFailed",
    "LlmTransientError",
    "LlmTruncated",
    "llm_json",
]

logger = logging.getLogger(__name__)

_FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.DOTALL)
_JSON_START = re.compile(r"[\[{]")


# What a stage that states no budget may write.
DEFAULT_MAX_TOKENS = 2000
# AutoLlmRun.attempt: the first ask, the repair round, the retry with a larger budget.
FIRST, REPAIR, LONGER = "", "repair", "longer"
ABANDONED = "abandoned: the process ended before the call returned"


def llm_json(
    *,
    purpose: str,
    instructions: str,
    payload: dict,
    schema: dict,
    run_key: str = "",
    token_budget: int | None = None,
    temperature: float = 0.2,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    longer_retry: bool = True,
    identity: bool = True,
) -> dict:
    """Ask the configured model for a JSON answer to ``payload`` and return it validated against ``schema``.

    ``max_tokens`` is the stage's budget for what it must write (``ANIMA_LLM_MAX_TOKENS`` may replace it);
    an answer cut off there is asked once more with twice the budget when ``longer_retry``. An answer
    that breaks the schema is sent back once with what is wrong with it. Then LlmTruncated or
    LlmRepairFailed; every attempt is one audited call, and all of them share one deadline.
    """
    wire = schema_strict(schema)  # ValueError: a stage's schema no strict server would take
    deadline = time.monotonic() + settings.ANIMA_LLM_DEADLINE
    provider = provider_get()
    system = f"{identity_context()}\n\n---\n\n{instructions}" if identity else instructions
    if _dialect(provider, purpose=purpose, run_key=run_key) == JSON_OBJECT:
        system = f"{system}\n\n{schema_instructions(wire)}"
    user = json.dumps(payload, ensure_ascii=False)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    budget = settings.ANIMA_LLM_MAX_TOKENS.get(purpose, max_tokens)
    call = _Call(purpose=purpose, payload=json.loads(user), temperature=temperature, schema=wire, deadline=deadline)
    attempt, repaired, lengthened = FIRST, False, False
    while True:
        try:
            return call.ask(
                provider,
                messages=messages,
                max_tokens=budget,
                attempt=attempt,
                run_key=run_key,
                token_budget=token_budget,
                parse=lambda text, truncated: _parse(text=text, schema=schema, purpose=purpose, truncated=truncated),
            )
        except LlmTruncated:
            if lengthened or not longer_retry:
                raise
            lengthened, attempt, budget = True, LONGER, budget * 2
        except LlmInvalidOutput as exc:
            if repaired:
                raise LlmRepairFailed(f"{exc} (also after a repair round)") from exc
            if call.answer is None:  # the server's reply was no answer at all: nothing to repair
                raise
            repaired, attempt = True, REPAIR
            messages = [
                *messages,
                {"role": "assistant", "content": storable(call.answer)},
                {"role": "user", "content": _repair(exc)},
            ]


def _dialect(provider: Provider, *, purpose: str, run_key: str) -> str:
    """The provider's dialect; a server that could not be asked for it is audited like a failed call."""
    try:
        return provider.dialect
    except LlmError as exc:
        AutoLlmRun.objects.create(
            purpose=purpose,
            provider=provider.name,
            model=provider.model,
            run_key=run_key,
            error=f"{type(exc).__name__}: {exc}",
        )
        raise


def _repair(error: Exception) -> str:
    return f"Your answer cannot be used: {error}. Answer again with the corrected JSON only, keeping what was right."


class _Call:
    """The attempts of one ``llm_json`` call: each reserves budget, is audited, and meets the same deadline."""

    def __init__(self, *, purpose: str, payload: dict, temperature: float, schema: dict, deadline: float) -> None:
        self.purpose = purpose
        self.payload = payload
        self.temperature = temperature
        self.schema = schema
        self.deadline = deadline
        # The text of the last answer, None while no answer came.
        self.answer: str | None = None

    def ask(
        self,
        provider: Provider,
        *,
        messages: list[dict],
        max_tokens: int,
        attempt: str,
        run_key: str,
        token_budget: int | None,
        parse: Callable[[str, bool], dict],
    ) -> dict:
        prompt = "".join(message["content"] for message in messages)
        reserved = 0
        if token_budget is not None:
            # The most this call can cost: a byte-level tokenizer never makes more tokens than bytes, plus the answer.
            reserved = len(prompt.encode()) + max_tokens
            budget_reserve(run_key=run_key, budget=token_budget, tokens=reserved, purpose=self.purpose)
        request = LlmRequest(
            purpose=self.purpose,
            messages=messages,
            payload=self.payload,
            temperature=self.temperature,
            max_tokens=max_tokens,
            schema=self.schema,
            deadline=self.deadline,
        )
        # Written before the call: a process killed during it leaves a row that says so, never "ok".
        audit = AutoLlmRun.objects.create(
            purpose=self.purpose,
            provider=provider.name,
            model=provider.model,
            dialect=provider.dialect,
            attempt=attempt,
            prompt=messages,
            run_key=run_key,
            error=ABANDONED,
        )
        started = time.monotonic()
        with log_context(run_key=run_key, llm_purpose=self.purpose):
            try:
                self.answer = None
                completion = provider.complete(request=request)
                _audit_completion(audit, completion, prompt=prompt)
                self.answer = completion.text
                value = parse(completion.text, completion.finish_reason == "length")
                audit.error = ""
                return value
            except BaseException as exc:  # KeyboardInterrupt, SystemExit (SIGTERM under Celery) too: failed, never ok
                kind = "interrupted" if not isinstance(exc, Exception) else type(exc).__name__
                audit.error = f"{kind}: {exc}" if str(exc) else kind
                raise
            finally:
                audit.latency_ms = round((time.monotonic() - started) * 1000)
                audit.save()
                if token_budget is not None:
                    budget_settle(run_key=run_key, reserved=reserved, spent=audit.total_tokens)
                logger.info(
                    "llm call %s%s: %s, %d tokens in %d ms",
                    self.purpose,
                    f" ({attempt})" if attempt else "",
                    "failed" if audit.error else "ok",
                    audit.total_tokens,
                    audit.latency_ms,
                    extra={"llm_run_id": audit.pk},
                )


IdentityProvider = Callable[[], str]
_identity_provider: IdentityProvider | None = None


def identity_provider_set(provider: IdentityProvider) -> None:
    """Register who is thinking: the app that owns the self layer and resident memory calls this at start-up."""
    global _identity_provider
    _identity_provider = provider


def identity_context() -> str:
    """The identity context every memory-processing call carries (self layer + resident memory)."""
    if _identity_provider is None:
        raise LlmError("no identity provider registered: the memory app must be installed")
    return _identity_provider()


def json_extract(text: str) -> Any:
    """The JSON value in ``text``: the whole text, a fenced block, or the first object/array in it."""
    # RecursionError: JSON nested past Python's limit is not an answer either.
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        pass
    for block in _FENCE.findall(text):
        try:
            return json.loads(block)
        except (ValueError, RecursionError):
            continue
    decoder = json.JSONDecoder()
    for match in _JSON_START.finditer(text):
        try:
            return decoder.raw_decode(text, match.start())[0]
        except (ValueError, RecursionError):
            continue
    raise LlmInvalidOutput(f"answer is not JSON: {text[:200]!r}")


def _audit_completion(audit: Any, completion: Completion, *, prompt: str) -> None:
    audit.model = completion.model
    audit.response = storable(completion.text)
    # What the budget counts: the server's usage, or the local estimate where that is missing, lower or impossible.
    audit.prompt_tokens = tokens_counted(reported=completion.prompt_tokens, text=prompt)
    audit.completion_tokens = tokens_counted(reported=completion.completion_tokens, text=completion.text)
    audit.total_tokens = audit.prompt_tokens + audit.completion_tokens


def stripped(value: Any) -> Any:
    """``value`` with every string stripped: a text of whitespace is an empty text, refused where one is required."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return [stripped(item) for item in value]
    if isinstance(value, dict):
        return {key: stripped(item) for key, item in value.items()}
    return value


def _parse(*, text: str, schema: dict, purpose: str, truncated: bool) -> dict:
    if truncated:
        raise LlmTruncated(f"{purpose}: answer truncated at max_tokens (finish_reason=length)")
    if unstorable(text):
        raise LlmInvalidOutput(f"{purpose}: answer holds a NUL character or a lone surrogate: {text[:200]!r}")
    value = json_extract(text)
    if too_deep_path(value) is not None:
        raise LlmInvalidOutput(f"{purpose}: answer nested too deeply to be a structured answer")
    value = stripped(value)
    try:
        schema_validate(value=value, schema=schema)
    except SchemaError as exc:
        raise LlmInvalidOutput(f"{purpose}: answer does not match the schema: {exc}") from exc
    return optional_nulls_dropped(value=value, schema=schema)
