"""Test helpers: a scripted provider and a local OpenAI-compatible stub server."""

from __future__ import annotations

import collections
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from anima.core.llm.dialects import PROBE_ANSWER, PROBE_SCHEMA
from anima.core.llm.errors import LlmError
from anima.core.llm.providers import Completion, LlmRequest, provider_override
from anima.core.llm.usage import estimate_tokens


class ScriptedProvider:
    """Answers each purpose from its queue of canned answers (dicts/lists, raw strings, or exceptions)."""

    name = "scripted"
    model = "scripted"
    dialect = "none"

    def __init__(self, responses: dict[str, list[Any]]) -> None:
        self._queues = {purpose: collections.deque(answers) for purpose, answers in responses.items()}
        self._lock = threading.Lock()
        self.calls: list[LlmRequest] = []

    def complete(self, *, request: LlmRequest) -> Completion:
        with self._lock:
            self.calls.append(request)
            queue = self._queues.get(request.purpose)
            if not queue:
                raise LlmError(f"scripted provider: no answer queued for purpose {request.purpose!r}")
            answer = queue.popleft()
        if isinstance(answer, BaseException):
            raise answer
        text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
        prompt = "".join(message["content"] for message in request.messages)
        return Completion(
            text=text, model=self.model, prompt_tokens=estimate_tokens(prompt), completion_tokens=estimate_tokens(text)
        )

    def purposes(self) -> list[str]:
        return [call.purpose for call in self.calls]


@contextlib.contextmanager
def scripted(responses: dict[str, list[Any]]) -> Iterator[ScriptedProvider]:
    """Within the block every ``llm_json`` call is answered from ``responses`` and recorded."""
    provider = ScriptedProvider(responses)
    with provider_override(provider):
        yield provider


GATE_SECONDS = 10


@dataclass
class StubReply:
    status: int = 200
    content: str = "{}"
    finish_reason: str = "stop"
    prompt_tokens: int = 10
    completion_tokens: int = 5
    # A whole body sent as is (HTML from a proxy, broken JSON), with its content type.
    raw: bytes | None = None
    content_type: str = "application/json"
    # A streamed answer (``stream: true``): the content in these pieces; None sends it as one piece.
    pieces: list[str] | None = None
    # Drop the connection after this many pieces, before the finish chunk and ``[DONE]``.
    cut_after: int | None = None
    # Sent the first piece, wait for this before the rest (a client that got it sets it).
    gate: threading.Event | None = None


# How each kind of server treats a structured-output request, as the real ones do:
# - lenient: takes every form and enforces none (an old or minimal server);
# - openai: json_schema must be strict and strict-valid, else 400; an unknown response_format field is 400;
#   json_object needs the word "json" in the messages, else 400;
# - llama_cpp (llama-cpp-python): json_schema is HTTP 500; json_object + schema is compiled to a grammar,
#   and a length or pattern constraint makes its compiler fail (HTTP 500);
# - vllm: json_schema enforced (strict not checked); a schema beside json_object is ignored;
# - ollama: json_schema enforced on /v1; native /api/chat enforces ``format``.
PERSONAS = ("lenient", "openai", "llama_cpp", "vllm", "ollama")


@dataclass
class StubLlmServer:
    """OpenAI-compatible ``POST /v1/chat/completions`` on 127.0.0.1, answering from a queue.

    Every request body is recorded in ``requests``. With the queue empty it answers from
    ``responder(request body)`` when one is given (a reply, or an answer as for ``reply``); else a
    server that enforces the request's schema (see ``persona``) answers the least instance of it, and
    any other HTTP 500. Every answer comes ``delay`` seconds after its request (requests are served
    concurrently). The dialect probe is answered as ``persona`` would, recorded in ``probes``, and
    takes nothing from the queue.
    """

    requests: list[dict] = field(default_factory=list)
    replies: collections.deque = field(default_factory=collections.deque)
    gates_opened: list[bool] = field(default_factory=list)
    responder: Callable[[dict], Any] | None = None
    delay: float = 0.0
    persona: str = "lenient"
    probes: list[dict] = field(default_factory=list)

    def reply(self, answer: Any, *, finish_reason: str = "stop", prompt_tokens: int = 10, completion_tokens: int = 5):
        content = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
        self.replies.append(StubReply(200, content, finish_reason, prompt_tokens, completion_tokens))

    def stream(self, pieces: list[str], *, cut_after: int | None = None, gate: threading.Event | None = None) -> None:
        """Answer a ``stream: true`` request with these content pieces, one server-sent event each.

        With ``gate``, the pieces after the first wait until it is set (at most ``GATE_SECONDS``);
        ``gates_opened`` records whether it was.
        """
        self.replies.append(StubReply(content="".join(pieces), pieces=pieces, cut_after=cut_after, gate=gate))

    def fail(self, status: int, message: str = "stub failure") -> None:
        self.replies.append(StubReply(status=status, content=message))

    def raw(self, body: str | bytes | dict, *, content_type: str = "application/json", status: int = 200) -> None:
        """Answer with exactly this body (a dict is sent as JSON, without the completion wrapper)."""
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        data = data.encode() if isinstance(data, str) else data
        self.replies.append(StubReply(status=status, raw=data, content_type=content_type))

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> StubLlmServer:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                native = self.path.rstrip("/") == "/api/chat" and stub.persona == "ollama"
                if not native and self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                refused = None if native else _refusal(stub.persona, body)
                enforced = _enforced_schema(stub.persona, body, native=native)
                if _requested_schema(body, native=native) == PROBE_SCHEMA:
                    stub.probes.append(body)
                    if refused:
                        return self._send(refused[0], {"error": {"message": refused[1], "type": "stub"}})
                    answer = {"probe": PROBE_ANSWER} if enforced else {}
                    return self._answer(body, StubReply(content=json.dumps(answer)), native=native)
                stub.requests.append(body)
                time.sleep(stub.delay)
                if refused:
                    return self._send(refused[0], {"error": {"message": refused[1], "type": "stub"}})
                try:
                    reply = stub.replies.popleft()
                except IndexError:
                    if stub.responder is not None:
                        reply = _as_reply(stub.responder(body))
                    elif enforced is not None:
                        reply = StubReply(content=json.dumps(least_instance(enforced)))
                    else:
                        return self._send(500, {"error": {"message": "stub: no reply queued"}})
                self._answer(body, reply, native=native)

            def _answer(self, body: dict, reply: StubReply, *, native: bool) -> None:
                if native and reply.raw is None and reply.status == 200:
                    return self._send(200, _ollama_body(body, reply))
                if reply.raw is not None:
                    return self._send_bytes(reply.status, reply.raw, reply.content_type)
                if reply.status != 200:
                    return self._send(reply.status, {"error": {"message": reply.content, "type": "stub"}})
                if body.get("stream"):
                    return self._send_events(body, reply)
                return self._send(200, _completion_body(body, reply))

            def _send_events(self, request: dict, reply: StubReply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                pieces = reply.pieces if reply.pieces is not None else [reply.content]
                for number, piece in enumerate(pieces):
                    if number == reply.cut_after:
                        return
                    if number == 1 and reply.gate is not None:
                        stub.gates_opened.append(reply.gate.wait(GATE_SECONDS))
                    self._event(_chunk_body(request, reply, {"content": piece}, None))
                if reply.cut_after is not None:
                    return
                self._event(_chunk_body(request, reply, {}, reply.finish_reason))
                self.wfile.write(b"data: [DONE]\n\n")

            def _event(self, chunk: dict) -> None:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()

            def _send(self, status: int, body: dict) -> None:
                self._send_bytes(status, json.dumps(body).encode(), "application/json")

            def _send_bytes(self, status: int, data: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> StubLlmServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _as_reply(answer: Any) -> StubReply:
    if isinstance(answer, StubReply):
        return answer
    return StubReply(content=answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False))


def _completion_body(request: dict, reply: StubReply) -> dict:
    return {
        "id": f"chatcmpl-stub-{id(reply)}",
        "object": "chat.completion",
        "created": 0,
        "model": request.get("model", "stub"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


def _chunk_body(request: dict, reply: StubReply, delta: dict, finish_reason: str | None) -> dict:
    return {
        "id": f"chatcmpl-stub-{id(reply)}",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": request.get("model", "stub"),
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def _requested_schema(body: dict, *, native: bool) -> Any:
    """The schema a request carries, in whichever dialect it came."""
    if native:
        return body.get("format") if isinstance(body.get("format"), dict) else None
    form = body.get("response_format") or {}
    if form.get("type") == "json_schema":
        return (form.get("json_schema") or {}).get("schema")
    return form.get("schema")


def _refusal(persona: str, body: dict) -> tuple[int, str] | None:
    """(status, message) with which ``persona`` refuses the request's structured-output form, None if it takes it."""
    form = body.get("response_format") or {}
    kind = form.get("type")
    if persona == "openai":
        if kind == "json_schema":
            spec = form.get("json_schema") or {}
            if spec.get("strict") is not True:
                return 400, "stub openai: only strict json_schema is enforced here"
            problem = _strict_problem(spec.get("schema"), "$")
            if problem:
                return 400, f"Invalid schema for response_format '{spec.get('name')}': {problem}"
        if kind == "json_object" and set(form) != {"type"}:
            return 400, "Unrecognized request argument supplied: response_format." + ",".join(
                sorted(set(form) - {"type"})
            )
        if kind == "json_object" and "json" not in json.dumps(body.get("messages")).lower():
            return 400, "'messages' must contain the word 'json' in some form to use 'response_format' json_object"
    if persona == "llama_cpp":
        if kind == "json_schema":
            return 500, "stub llama_cpp: json_schema response_format is not supported"
        if kind == "json_object" and form.get("schema") is not None and _grammar_hostile(form["schema"]):
            return 500, "stub llama_cpp: grammar compilation failed"
    return None


def _enforced_schema(persona: str, body: dict, *, native: bool) -> dict | None:
    """The schema ``persona`` constrains the answer to, None when it constrains nothing."""
    form = body.get("response_format") or {}
    kind = form.get("type")
    if native:
        return _requested_schema(body, native=True)
    if kind == "json_schema" and persona in ("openai", "vllm", "ollama"):
        return (form.get("json_schema") or {}).get("schema")
    if kind == "json_object" and persona == "llama_cpp" and isinstance(form.get("schema"), dict):
        return form["schema"]
    return None


def _strict_problem(schema: Any, where: str) -> str | None:
    """What OpenAI's strict mode refuses in ``schema`` (None: nothing)."""
    if not isinstance(schema, dict):
        return f"{where}: not a schema"
    for branch in schema.get("anyOf", []):
        problem = _strict_problem(branch, where)
        if problem:
            return problem
    if schema.get("type") == "object":
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            return f"{where}: 'additionalProperties' is required to be supplied and to be false"
        missing = [name for name in properties if name not in schema.get("required", [])]
        if missing:
            return f"{where}: 'required' is required to include every property; missing {missing}"
        for name, item in properties.items():
            problem = _strict_problem(item, f"{where}.{name}")
            if problem:
                return problem
    if schema.get("type") == "array":
        return _strict_problem(schema.get("items"), f"{where}[]")
    return None


def _grammar_hostile(schema: Any) -> bool:
    if isinstance(schema, dict):
        return bool({"maxLength", "minLength", "pattern"} & set(schema)) or any(
            _grammar_hostile(item) for item in schema.values()
        )
    if isinstance(schema, list):
        return any(_grammar_hostile(item) for item in schema)
    return False


def least_instance(schema: dict) -> Any:
    """The smallest value a grammar-constrained model could write for ``schema`` (first choices, fewest items)."""
    if "anyOf" in schema:
        return least_instance(schema["anyOf"][0])
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object":
        return {name: least_instance(item) for name, item in schema.get("properties", {}).items()}
    if kind == "array":
        return [least_instance(schema["items"]) for _ in range(schema.get("minItems", 0))]
    if kind == "string":
        return "2026-01-01" if schema.get("format") == "date" else "x" * max(1, schema.get("minLength", 1))
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return None


def _ollama_body(request: dict, reply: StubReply) -> dict:
    return {
        "model": request.get("model", "stub"),
        "message": {"role": "assistant", "content": reply.content},
        "done": True,
        "done_reason": reply.finish_reason,
        "prompt_eval_count": reply.prompt_tokens,
        "eval_count": reply.completion_tokens,
    }
