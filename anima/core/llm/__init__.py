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

from anima.core.jsonvalue import storable, too_deep_path, unstorable
from anima.core.llm.budget import budget_reserve, budget_settle
from anima.core.llm.errors import LlmBudgetExceeded, LlmBudgetReserved, LlmError, LlmInvalidOutput, LlmTransientError
from anima.core.llm.providers import Completion, LlmRequest, provider_get
from anima.core.llm.schema import SchemaError, schema_validate
from anima.core.llm.usage import tokens_counted
from anima.core.logs import log_context
from anima.core.models import AutoLlmRun

__all__ = ["LlmBudgetExceeded", "LlmBudgetReserved", "LlmError", "LlmInvalidOutput", "LlmTransientError", "llm_json"]

logger = logging.getLogger(__name__)

_FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.DOTALL)
_JSON_START = re.compile(r"[\[{]")


def llm_json(
    *,
    purpose: str,
    instructions: str,
    payload: dict,
    schema: dict,
    run_key: str = "",
    token_budget: int | None = None,
    temperature: float = 0.2,
    max_tokens: int = 2000,
    identity: bool = True,
) -> dict:
    """Ask the configured model for a JSON answer to ``payload`` and return it validated against ``schema``."""
    system = f"{identity_context()}\n\n---\n\n{instructions}" if identity else instructions
    user = json.dumps(payload, ensure_ascii=False)
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    reserved = 0
    if token_budget is not None:
        # The most this call can cost: a byte-level tokenizer never makes more tokens than bytes, plus a full answer.
        reserved = len((system + user).encode()) + max_tokens
        budget_reserve(run_key=run_key, budget=token_budget, tokens=reserved, purpose=purpose)
    request = LlmRequest(
        purpose=purpose, messages=messages, payload=json.loads(user), temperature=temperature, max_tokens=max_tokens
    )
    provider = provider_get()
    audit = AutoLlmRun(purpose=purpose, provider=provider.name, model=provider.model, prompt=messages, run_key=run_key)
    started = time.monotonic()
    with log_context(run_key=run_key, llm_purpose=purpose):
        try:
            completion = provider.complete(request=request)
            _audit_completion(audit, completion, prompt=system + user)
            return _parse(completion=completion, schema=schema, purpose=purpose)
        except Exception as exc:
            audit.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            audit.latency_ms = round((time.monotonic() - started) * 1000)
            audit.save()
            if token_budget is not None:
                budget_settle(run_key=run_key, reserved=reserved, spent=audit.total_tokens)
            logger.info(
                "llm call %s: %s, %d tokens in %d ms",
                purpose,
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


def _parse(*, completion: Completion, schema: dict, purpose: str) -> dict:
    if completion.finish_reason == "length":
        raise LlmInvalidOutput(f"{purpose}: answer truncated at max_tokens (finish_reason=length)")
    if unstorable(completion.text):
        raise LlmInvalidOutput(
            f"{purpose}: answer holds a NUL character or a lone surrogate: {completion.text[:200]!r}"
        )
    value = json_extract(completion.text)
    if too_deep_path(value) is not None:
        raise LlmInvalidOutput(f"{purpose}: answer nested too deeply to be a structured answer")
    value = stripped(value)
    try:
        schema_validate(value=value, schema=schema)
    except SchemaError as exc:
        raise LlmInvalidOutput(f"{purpose}: answer does not match the schema: {exc}") from exc
    return value
