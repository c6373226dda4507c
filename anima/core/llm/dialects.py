"""How a server is told the answer's schema: the structured-output dialect it enforces.

- ``json_schema``: ``response_format: {"type": "json_schema", "json_schema": {"name", "strict": true,
  "schema"}}`` (OpenAI, vLLM, SGLang, Ollama's OpenAI-compatible endpoint).
- ``json_object_schema``: ``response_format: {"type": "json_object", "schema": …}``, which
  llama-cpp-python's server compiles to a grammar (its ``json_schema`` form answers HTTP 500).
- ``ollama_format``: Ollama's native ``POST /api/chat`` with the schema in ``format``.
- ``json_object``: ``response_format: {"type": "json_object"}`` with the schema in the prompt; the
  last resort, where nothing but the answer's validation enforces it.

``auto`` asks the server once per (base URL, model), with a tiny request only an enforcing server
can answer right, and remembers the first dialect that worked (in the process and in the cache).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable

from django.core.cache import cache

JSON_SCHEMA = "json_schema"
JSON_OBJECT_SCHEMA = "json_object_schema"
OLLAMA_FORMAT = "ollama_format"
JSON_OBJECT = "json_object"
AUTO = "auto"
DIALECTS = (JSON_SCHEMA, JSON_OBJECT_SCHEMA, OLLAMA_FORMAT, JSON_OBJECT)
SETTING_CHOICES = (AUTO, *DIALECTS)
# What ``auto`` tries, in order; Ollama is reached through its OpenAI-compatible json_schema.
PROBED = (JSON_SCHEMA, JSON_OBJECT_SCHEMA)

# A server is upgraded now and then: its answer is asked again after a day.
PROBE_CACHE_SECONDS = 24 * 3600
PROBE_ANSWER = "anima-probe-ok"
# An enum value the prompt never mentions: only a server that enforces the schema writes it.
PROBE_SCHEMA = {
    "type": "object",
    "properties": {"probe": {"type": "string", "enum": [PROBE_ANSWER]}},
    "required": ["probe"],
    "additionalProperties": False,
}
PROBE_MESSAGES = [{"role": "user", "content": "Answer with a JSON object."}]
PROBE_MAX_TOKENS = 20

_known: dict[tuple[str, str], str] = {}
_lock = threading.Lock()


def response_format(*, dialect: str, name: str, schema: dict) -> dict:
    """The ``response_format`` of a chat-completions request in ``dialect`` (Ollama's native call has none)."""
    if dialect == JSON_SCHEMA:
        return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}
    if dialect == JSON_OBJECT_SCHEMA:
        return {"type": "json_object", "schema": schema}
    return {"type": "json_object"}


def schema_instructions(schema: dict) -> str:
    """The schema as the prompt states it where the server does not enforce it."""
    return "Answer with one JSON value matching this JSON Schema:\n" + json.dumps(schema, ensure_ascii=False)


def schema_name(purpose: str) -> str:
    """A name OpenAI accepts for a schema (letters, digits, ``_`` and ``-``, at most 64)."""
    return "".join(char if char.isalnum() or char in "_-" else "_" for char in purpose)[:64] or "answer"


def probe_answered(text: str) -> bool:
    """Whether a probe's answer is what only an enforcing server writes."""
    try:
        return json.loads(text) == {"probe": PROBE_ANSWER}
    except ValueError:
        return False


def dialect_resolved(*, setting: str, base_url: str, model: str, probe: Callable[[str], bool]) -> str:
    """The dialect to use for (``base_url``, ``model``): the setting, or for ``auto`` the remembered probe answer.

    ``probe(dialect)`` sends the probe in that dialect and says whether the server enforced it.
    """
    if setting != AUTO:
        return setting
    known = dialect_known(base_url=base_url, model=model)
    if known is None:
        known = next((dialect for dialect in PROBED if probe(dialect)), JSON_OBJECT)
        cache.set(_cache_key(base_url, model), known, PROBE_CACHE_SECONDS)
    with _lock:
        _known[(base_url, model)] = known
    return known


def dialect_known(*, base_url: str, model: str) -> str | None:
    """What a probe found for (``base_url``, ``model``), None while none has answered; never asks the server."""
    with _lock:
        known = _known.get((base_url, model))
    if known is None:
        known = cache.get(_cache_key(base_url, model))
    return known if known in DIALECTS else None


def _cache_key(base_url: str, model: str) -> str:
    return "anima:llm-dialect:" + hashlib.sha256(f"{base_url}\n{model}".encode()).hexdigest()[:32]


def dialects_forget() -> None:
    """Forget what this process learned (the cache keeps its copy until it expires); for tests."""
    with _lock:
        _known.clear()
