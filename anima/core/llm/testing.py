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

from anima.core.llm.errors import LlmError
from anima.core.llm.providers import Completion, LlmRequest, provider_override
from anima.core.llm.usage import estimate_tokens


class ScriptedProvider:
    """Answers each purpose from its queue of canned answers (dicts/lists, raw strings, or exceptions)."""

    name = "scripted"
    model = "scripted"

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


@dataclass
class StubLlmServer:
    """OpenAI-compatible ``POST /v1/chat/completions`` on 127.0.0.1, answering from a queue.

    Every request body is recorded in ``requests``. With the queue empty it answers from
    ``responder(request body)`` when one is given (a reply, or an answer as for ``reply``), else HTTP 500.
    Every answer comes ``delay`` seconds after its request (requests are served concurrently).
    """

    requests: list[dict] = field(default_factory=list)
    replies: collections.deque = field(default_factory=collections.deque)
    gates_opened: list[bool] = field(default_factory=list)
    responder: Callable[[dict], Any] | None = None
    delay: float = 0.0

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
                stub.requests.append(body)
                time.sleep(stub.delay)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                try:
                    reply = stub.replies.popleft()
                except IndexError:
                    if stub.responder is None:
                        return self._send(500, {"error": {"message": "stub: no reply queued"}})
                    reply = _as_reply(stub.responder(body))
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
