"""LLM providers: the deterministic offline one and any OpenAI-compatible HTTP server.

A provider turns one request into raw answer text plus token usage; parsing, validation
and auditing happen once, in ``anima.core.llm.llm_json``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from django.conf import settings

from anima.core.jsonvalue import unstorable
from anima.core.llm.errors import LlmError, LlmInvalidOutput, LlmTransientError
from anima.core.llm.offline import offline_handler_get
from anima.core.llm.usage import estimate_tokens

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

# Seconds before the first retry; doubled on each further one.
RETRY_BACKOFF_SECONDS = 0.5


@dataclass(frozen=True)
class LlmRequest:
    purpose: str
    messages: list[dict]
    payload: dict
    temperature: float
    max_tokens: int


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    finish_reason: str = "stop"
    # The usage the server reported, None when it reported none (``llm_json`` decides what is counted).
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class Provider(Protocol):
    name: str
    model: str

    def complete(self, *, request: LlmRequest) -> Completion: ...


class OfflineProvider:
    name = "offline"
    model = "offline-extractive"

    def complete(self, *, request: LlmRequest) -> Completion:
        handler = offline_handler_get(purpose=request.purpose)
        text = json.dumps(handler(request.payload), ensure_ascii=False)
        prompt = "".join(message["content"] for message in request.messages)
        return Completion(
            text=text, model=self.model, prompt_tokens=estimate_tokens(prompt), completion_tokens=estimate_tokens(text)
        )


class OpenAiProvider:
    """Chat completions on any OpenAI-compatible server; transient failures retried with backoff."""

    name = "openai"

    def __init__(self, *, base_url: str, api_key: str, model: str, timeout: float, max_retries: int) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries

    def complete(self, *, request: LlmRequest) -> Completion:
        # The openai package costs half a second to import: only a process that calls an LLM server pays it.
        import openai

        client = _openai_client(self.base_url, self.api_key, self.timeout)
        attempt = 0
        while True:
            try:
                response = client.chat.completions.create(
                    model=self.model,
                    messages=request.messages,
                    temperature=request.temperature,
                    max_tokens=request.max_tokens,
                    response_format={"type": "json_object"},
                )
                return _completion_of(response, model=self.model)
            except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as exc:
                problem, error, cause = _describe(exc), LlmTransientError, exc
            except (MalformedAnswer, ValueError) as exc:  # ValueError: a body that is not JSON
                problem, error, cause = f"malformed answer from the LLM server: {exc}", LlmInvalidOutput, exc
            except openai.OpenAIError as exc:
                raise LlmError(f"{request.purpose}: {_describe(exc)}") from exc
            if attempt >= self.max_retries:
                raise error(f"{request.purpose}: {problem} (gave up after {attempt + 1} attempts)") from cause
            logger.warning("%s: %s; retry %d of %d", request.purpose, problem, attempt + 1, self.max_retries)
            time.sleep(RETRY_BACKOFF_SECONDS * 2**attempt)
            attempt += 1


class MalformedAnswer(Exception):
    """A 200 answer that is not a usable chat completion (HTML, no choices, unstorable text)."""


def _completion_of(response: object, *, model: str) -> Completion:
    """The completion in a chat-completions response, or MalformedAnswer saying what is wrong with it."""
    try:
        choice = response.choices[0]
        text = choice.message.content
        finish_reason = choice.finish_reason
        usage = response.usage
    except (AttributeError, IndexError, KeyError, TypeError):
        shown = str(response)[:200]
        raise MalformedAnswer(f"not a chat completion ({type(response).__name__}: {shown!r})") from None
    if text is not None and not isinstance(text, str):
        raise MalformedAnswer(f"message content is {type(text).__name__}, not text")
    if text and unstorable(text):
        raise MalformedAnswer(f"the answer holds a NUL character or a lone surrogate: {text[:200]!r}")
    return Completion(
        text=text or "",
        model=getattr(response, "model", None) or model,
        finish_reason=finish_reason or "stop",
        prompt_tokens=_reported(getattr(usage, "prompt_tokens", None)),
        completion_tokens=_reported(getattr(usage, "completion_tokens", None)),
    )


def _reported(value: object) -> int | None:
    """A usage figure as the server sent it when it is an integer (sign and size are judged when counting)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@functools.lru_cache(maxsize=4)
def _openai_client(base_url: str, api_key: str, timeout: float) -> openai.OpenAI:
    import openai

    # Retries are ours (counted and logged above), so the client's own are off.
    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)


def _describe(exc: openai.OpenAIError) -> str:
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return "LLM request timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"cannot reach the LLM server ({exc})"
    if isinstance(exc, openai.APIStatusError):
        return f"LLM server answered HTTP {exc.status_code}: {exc.message}"
    return f"LLM call failed: {exc}"


_override_lock = threading.Lock()
_override: Provider | None = None


@contextlib.contextmanager
def provider_override(provider: Provider) -> Iterator[Provider]:
    """Use ``provider`` for every call (all threads) inside the block; for tests."""
    global _override
    with _override_lock:
        previous, _override = _override, provider
    try:
        yield provider
    finally:
        with _override_lock:
            _override = previous


def provider_get() -> Provider:
    if _override is not None:
        return _override
    if settings.ANIMA_LLM_PROVIDER == "openai":
        return OpenAiProvider(
            base_url=settings.ANIMA_LLM_BASE_URL,
            api_key=settings.ANIMA_LLM_API_KEY or "not-needed",
            model=settings.ANIMA_LLM_MODEL,
            timeout=settings.ANIMA_LLM_TIMEOUT,
            max_retries=settings.ANIMA_LLM_MAX_RETRIES,
        )
    return OfflineProvider()
