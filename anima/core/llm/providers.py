"""LLM providers: the deterministic offline one and any OpenAI-compatible HTTP server.

A provider turns one request into raw answer text plus token usage; parsing, validation
and auditing happen once, in ``anima.core.llm.llm_json``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import openai
from django.conf import settings

from anima.core.llm.errors import LlmError, LlmTransientError
from anima.core.llm.offline import offline_handler_get

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
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Provider(Protocol):
    name: str
    model: str

    def complete(self, *, request: LlmRequest) -> Completion: ...


def estimate_tokens(text: str) -> int:
    """Rough token count (about four characters a token) for providers that report none."""
    return math.ceil(len(text) / 4)


class OfflineProvider:
    name = "offline"
    model = "offline-extractive"

    def complete(self, *, request: LlmRequest) -> Completion:
        handler = offline_handler_get(purpose=request.purpose)
        text = json.dumps(handler(request.payload), ensure_ascii=False)
        prompt_chars = sum(len(message["content"]) for message in request.messages)
        return Completion(
            text=text,
            model=self.model,
            prompt_tokens=math.ceil(prompt_chars / 4),
            completion_tokens=estimate_tokens(text),
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
        client = _openai_client(self.base_url, self.api_key, self.timeout)
        for attempt in range(self.max_retries + 1):
            try:
                response = client.chat.completions.create(
                    model=self.model,
                    messages=request.messages,
                    temperature=request.temperature,
                    max_tokens=request.max_tokens,
                    response_format={"type": "json_object"},
                )
                break
            except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as exc:
                if attempt >= self.max_retries:
                    raise LlmTransientError(
                        f"{request.purpose}: {_describe(exc)} (gave up after {attempt + 1} attempts)"
                    ) from exc
                logger.warning("%s: %s; retry %d of %d", request.purpose, _describe(exc), attempt + 1, self.max_retries)
                time.sleep(RETRY_BACKOFF_SECONDS * 2**attempt)
            except openai.OpenAIError as exc:
                raise LlmError(f"{request.purpose}: {_describe(exc)}") from exc
        choice = response.choices[0]
        usage = response.usage
        return Completion(
            text=choice.message.content or "",
            model=response.model or self.model,
            finish_reason=choice.finish_reason or "stop",
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )


@functools.lru_cache(maxsize=4)
def _openai_client(base_url: str, api_key: str, timeout: float) -> openai.OpenAI:
    # Retries are ours (counted and logged above), so the client's own are off.
    return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)


def _describe(exc: openai.OpenAIError) -> str:
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
