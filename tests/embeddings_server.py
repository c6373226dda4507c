"""A local OpenAI-compatible embeddings server for tests (real HTTP, no patched clients)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class EmbeddingsServer:
    """An OpenAI-compatible /v1/embeddings server on 127.0.0.1 answering scripted vectors, or, when none is
    scripted, ``embed(text)`` for each input."""

    def __init__(self, *, embed: Callable[[str], list[float]] | None = None) -> None:
        self.requests: list[dict] = []
        self.answers: list[tuple[int, dict]] = []
        self.embed = embed
        self.most_at_once = 0  # the most requests it held at one moment
        self._at_once = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                with server._lock:
                    server._at_once += 1
                    server.most_at_once = max(server.most_at_once, server._at_once)
                try:
                    if server.answers:
                        status, answer = server.answers.pop(0)
                    else:
                        status, answer = 200, server.answer([server.embed(text) for text in body["input"]])
                finally:
                    with server._lock:
                        server._at_once -= 1
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_port}/v1"

    def vectors(self, *rows: list[float]) -> None:
        self.answers.append((200, self.answer(list(rows))))

    @staticmethod
    def answer(rows: list[list[float]]) -> dict:
        # Returned out of order on purpose: the client must sort by index.
        data = [{"object": "embedding", "index": i, "embedding": row} for i, row in enumerate(rows)]
        return {"object": "list", "model": "stub-embed", "data": data[::-1]}

    def __enter__(self) -> EmbeddingsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


# A toy meaning space for recall tests: words of one concept share an axis, so a query finds a text it
# shares no word with. Real models are tested by the ``local_embeddings`` tests.
CONCEPTS = (
    ("surgery", "operation", "operated", "hospital", "surgeon"),
    ("dog", "puppy", "pet", "terrier"),
    ("allergy", "allergic", "peanut", "peanuts"),
    ("travel", "trip", "flight", "journey", "vacation"),
)
CONCEPT_DIM = len(CONCEPTS) + 1


def concept_vector(text: str) -> list[float]:
    """Unit vector of ``text`` in the toy space: its words per concept, then a last axis for all other words,
    so a text mostly about something else is further from a query about one concept."""
    words = [word.strip(".,!?:'\"").lower() for word in text.split()]
    counts = [float(sum(word in concept for word in words)) for concept in CONCEPTS]
    vector = [*counts, 0.1 + 0.2 * (len(words) - sum(counts))]
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector]
