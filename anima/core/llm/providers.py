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
from anima.core.llm.dialects import (
    AUTO,
    OLLAMA_FORMAT,
    PROBE_MAX_TOKENS,
    PROBE_MESSAGES,
    PROBE_SCHEMA,
    dialect_resolved,
    probe_answered,
    response_format,
    schema_name,
)
from anima.core.llm.errors import LlmDeadlineExceeded, LlmError, LlmInvalidOutput, LlmTransientError
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
    # The answer's schema in the strict form servers enforce.
    schema: dict
    # time.monotonic() by which the call must have returned, retries included; None: only the timeout.
    deadline: float | None = None


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
    # How the schema reached the model (``anima.core.llm.dialects``); "none" where no server is asked.
    dialect: str

    def complete(self, *, request: LlmRequest) -> Completion: ...


class OfflineProvider:
    name = "offline"
    model = "offline-extractive"
    dialect = "none"

    def complete(self, *, request: LlmRequest) -> Completion:
        handler = offline_handler_get(purpose=request.purpose)
        text = json.dumps(handler(request.payload), ensure_ascii=False)
        prompt = "".join(message["content"] for message in request.messages)
        return Completion(
            text=text, model=self.model, prompt_tokens=estimate_tokens(prompt), completion_tokens=estimate_tokens(text)
        )


class OpenAiProvider:
    """Chat completions on any OpenAI-compatible server, the schema sent in its dialect; transient failures retried
    with backoff within the call's deadline."""

    name = "openai"

    def __init__(
        self, *, base_url: str, api_key: str, model: str, timeout: float, max_retries: int, structured: str = AUTO
    ) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.structured = structured
        self._dialect: str | None = None

    @property
    def dialect(self) -> str:
        if self._dialect is None:
            self._dialect = dialect_resolved(
                setting=self.structured, base_url=self.base_url, model=self.model, probe=self._probe
            )
        return self._dialect

    def complete(self, *, request: LlmRequest) -> Completion:
        # The openai package costs half a second to import: only a process that calls an LLM server pays it.
        import httpx2
        import openai

        dialect = self.dialect
        attempt = 0
        while True:
            timeout = _attempt_timeout(request, self.timeout)
            try:
                return self._send(request, dialect=dialect, timeout=timeout)
            except (openai.APITimeoutError, httpx2.TimeoutException) as exc:
                # Not retried: a server that does not notice the client leaving goes on generating the
                # abandoned answer, and a retry would queue behind it.
                if timeout < self.timeout:
                    raise LlmDeadlineExceeded(
                        f"{request.purpose}: the call's deadline passed while the server was answering"
                    ) from exc
                raise LlmTransientError(f"{request.purpose}: LLM request timed out after {timeout:.0f} s") from exc
            except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as exc:
                problem, error, cause = _describe(exc), LlmTransientError, exc
            except _TransientStatus as exc:
                problem, error, cause = str(exc), LlmTransientError, exc
            except httpx2.TransportError as exc:
                problem, error, cause = f"cannot reach the LLM server ({exc})", LlmTransientError, exc
            except (MalformedAnswer, ValueError) as exc:  # ValueError: a body that is not JSON
                problem, error, cause = f"malformed answer from the LLM server: {exc}", LlmInvalidOutput, exc
            except openai.OpenAIError as exc:
                raise LlmError(f"{request.purpose}: {_describe(exc)}") from exc
            if attempt >= self.max_retries:
                raise error(f"{request.purpose}: {problem} (gave up after {attempt + 1} attempts)") from cause
            pause = RETRY_BACKOFF_SECONDS * 2**attempt
            if request.deadline is not None and time.monotonic() + pause >= request.deadline:
                raise error(f"{request.purpose}: {problem} (no time left for a retry)") from cause
            logger.warning("%s: %s; retry %d of %d", request.purpose, problem, attempt + 1, self.max_retries)
            time.sleep(pause)
            attempt += 1

    def _send(self, request: LlmRequest, *, dialect: str, timeout: float) -> Completion:
        if dialect == OLLAMA_FORMAT:
            return _ollama_chat(self, request=request, timeout=timeout)
        response = _openai_client(self.base_url, self.api_key, self.timeout).chat.completions.create(
            model=self.model,
            messages=request.messages,
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            response_format=response_format(dialect=dialect, name=schema_name(request.purpose), schema=request.schema),
            timeout=timeout,
        )
        return _completion_of(response, model=self.model)

    def _probe(self, dialect: str) -> bool:
        """Whether the server enforces a schema sent in ``dialect`` (LlmTransientError: it could not be asked)."""
        import httpx2
        import openai

        request = LlmRequest(
            purpose="llm.probe",
            messages=PROBE_MESSAGES,
            payload={},
            temperature=0.0,
            max_tokens=PROBE_MAX_TOKENS,
            schema=PROBE_SCHEMA,
        )
        try:
            completion = self._send(request, dialect=dialect, timeout=self.timeout)
        except (openai.APIConnectionError, openai.RateLimitError, _TransientStatus, httpx2.TransportError) as exc:
            raise LlmTransientError(
                f"cannot reach the LLM server to ask which structured output it enforces ({exc})"
            ) from exc
        except openai.APIStatusError as exc:
            if exc.status_code in _TRANSIENT_STATUSES:
                raise LlmTransientError(
                    f"cannot reach the LLM server to ask which structured output it enforces ({exc})"
                ) from exc
            enforced = False  # 400 (OpenAI: unknown field) or 500 (llama-cpp-python: json_schema)
        except (MalformedAnswer, ValueError):
            enforced = False
        else:
            enforced = probe_answered(completion.text)
        logger.info(
            "LLM server %s, model %s: %s %s",
            self.base_url,
            self.model,
            dialect,
            "enforced" if enforced else "not enforced",
        )
        return enforced


# Statuses that say "not now" rather than "not this request".
_TRANSIENT_STATUSES = frozenset({408, 429, 502, 503, 504})


class _TransientStatus(Exception):
    """Ollama's native endpoint answered a status worth retrying."""


def _attempt_timeout(request: LlmRequest, timeout: float) -> float:
    """The attempt's timeout: the configured one, or less when the call's deadline is nearer."""
    if request.deadline is None:
        return timeout
    remaining = request.deadline - time.monotonic()
    if remaining <= 0:
        raise LlmDeadlineExceeded(f"{request.purpose}: the call's deadline passed before the server answered")
    return min(timeout, remaining)


def _ollama_chat(provider: OpenAiProvider, *, request: LlmRequest, timeout: float) -> Completion:
    """One call of Ollama's native ``/api/chat`` (next to its ``/v1``) with the schema in ``format``."""
    import httpx2

    root = provider.base_url.rstrip("/").removesuffix("/v1")
    body = {
        "model": provider.model,
        "messages": request.messages,
        "stream": False,
        "format": request.schema,
        "options": {"temperature": request.temperature, "num_predict": request.max_tokens},
    }
    headers = {"Authorization": f"Bearer {provider.api_key}"}
    response = httpx2.post(f"{root}/api/chat", json=body, headers=headers, timeout=timeout)
    if response.status_code in _TRANSIENT_STATUSES or response.status_code >= 500:
        raise _TransientStatus(f"LLM server answered HTTP {response.status_code}: {response.text[:200]}")
    if response.status_code != 200:
        raise LlmError(f"{request.purpose}: LLM server answered HTTP {response.status_code}: {response.text[:200]}")
    answer = response.json()
    message = answer.get("message") if isinstance(answer, dict) else None
    if not isinstance(message, dict) or not isinstance(message.get("content"), str):
        raise MalformedAnswer(f"not an Ollama chat answer: {response.text[:200]!r}")
    if unstorable(message["content"]):
        raise MalformedAnswer(f"the answer holds a NUL character or a lone surrogate: {message['content'][:200]!r}")
    return Completion(
        text=message["content"],
        model=answer.get("model") or provider.model,
        finish_reason="length" if answer.get("done_reason") == "length" else "stop",
        prompt_tokens=_reported(answer.get("prompt_eval_count")),
        completion_tokens=_reported(answer.get("eval_count")),
    )


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
            structured=settings.ANIMA_LLM_STRUCTURED,
        )
    return OfflineProvider()
