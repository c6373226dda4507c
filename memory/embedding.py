"""Filling vectors after the write: what gets embedded, what is pending, and the backfill that embeds it.

Imports and turns never wait for a model: rows are written keyword-searchable at once, and this
backfill (``embed_backfill``, the ``memory.tasks.embed_backfill`` beat task, ``demo``) embeds the
rows that have no vector from the current model yet, newest first, batch by batch. It is resumable
and idempotent: a row is pending exactly while it has no vector, and storing one twice replaces it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from django.db import DEFAULT_DB_ALIAS, connection, connections
from prometheus_client.core import GaugeMetricFamily, Metric

from anima.core.cache import cache_get_json, cache_set_json
from anima.core.db import read_alias
from anima.core.embeddings import EmbeddingModel, EmbeddingsUnusable, embed_texts, embedding_model
from anima.core.models import Component
from anima.core.vectors import (
    ENTITY,
    MESSAGE,
    TABLE,
    VectorRow,
    vector_indexes_ensure,
    vectors_available,
    vectors_clear,
    vectors_fetch,
    vectors_statistics_refresh,
    vectors_store,
)
from memory.models import SemanticMemory
from memory.search import dense_status

logger = logging.getLogger(__name__)

DEFAULT_BATCH = 64
# A stored text's vector comes from its start; the provider caps by tokens, this bounds what is read.
PASSAGE_CHARS = 4000

# A chat line alone ("yes, last week!") often means nothing: a message's vector is made from the turn it
# answers (the conversation's previous user or assistant message, its first MESSAGE_CONTEXT_CHARS) and its
# own text, each after its speaker's name. Measured by bench_recall on LoCoMo (evidence turns, R@10,
# categories 1-4): dense-only 25.8 -> 57.2, fused 45.6 -> 65.5 (MADial holds no messages). The vectors'
# stale triggers (anima.core.vectors) drop the next turn's vector too when a message changes or goes.
MESSAGE_CONTEXT_CHARS = 300
# Its name, else the conversation's person for a user turn, else the role.
_SPEAKER_SQL = (
    "coalesce(nullif({m}.name, ''), CASE WHEN {m}.role = 'user' THEN (SELECT coalesce(nullif(p.display_name, ''),"
    " p.slug) FROM persons p WHERE p.id = c.person_id) END, {m}.role)"
)
_PREVIOUS_SQL = (
    f"(SELECT {_SPEAKER_SQL.format(m='m')} || ': ' || left(m.content, {MESSAGE_CONTEXT_CHARS}) FROM messages m"
    " WHERE m.conversation_id = t.conversation_id AND m.role IN ('user', 'assistant') AND m.content <> ''"
    " AND (m.created_at, m.id) < (t.created_at, t.id) ORDER BY m.created_at DESC, m.id DESC LIMIT 1)"
)

# Fixed SQL, no user input. Which rows recall can find by meaning: semantic memories (every status, the
# console searches them all), diary blocks, temporal summaries, and the turns of non-cron conversations.
_EMBEDDABLE = {
    ENTITY: (
        "entities t",
        f"t.primary_component IN ('{Component.SEMANTIC_MEMORY}', '{Component.CONTENT_BLOCK}',"
        f" '{Component.TEMPORAL_SUMMARY}') AND (t.title <> '' OR t.content <> '')",
        "concat_ws(E'\\n', nullif(t.title, ''), nullif(t.content, ''))",
        "t.person_id",
        "t.source_conversation_id",
    ),
    MESSAGE: (
        "messages t JOIN conversations c ON c.id = t.conversation_id",
        "t.role IN ('user', 'assistant') AND t.content <> '' AND c.platform <> 'cron'",
        f"concat_ws(E'\\n', {_PREVIOUS_SQL}, {_SPEAKER_SQL.format(m='t')} || ': ' || t.content)",
        "c.person_id",
        "t.conversation_id",
    ),
}


def _pending_sql(kind: str, select: str) -> str:
    from_sql, where_sql, *_ = _EMBEDDABLE[kind]
    return (
        f"SELECT {select} FROM {from_sql} WHERE {where_sql} AND NOT EXISTS (SELECT 1 FROM {TABLE} v"
        f" WHERE v.kind = %(kind)s AND v.row_id = t.id AND v.model = %(model)s)"
    )


def memory_vectors(*, memories: Sequence[SemanticMemory]) -> dict[int, list[float]]:
    """Each memory's passage vector from the current model: the stored one, else made now as the backfill makes
    it, and stored as the backfill stores it where there is a vectors table (so it is made once). A memory deleted
    meanwhile has none.

    Raises EmbeddingsUnavailable when recall is keyword-only here.
    """
    model = embedding_model()
    ids = [memory.pk for memory in memories]
    vectors = {} if model is None else vectors_fetch(kind=ENTITY, model=model, row_ids=ids)
    missing = [pk for pk in ids if pk not in vectors]
    rows = []
    if missing:  # the nights after the backfill caught up: none
        with connection.cursor() as cursor:
            select = f"SELECT {_row_select(ENTITY)} FROM {_EMBEDDABLE[ENTITY][0]} WHERE t.id = ANY(%s)"
            cursor.execute(select, [missing])
            rows = cursor.fetchall()
    # Raises EmbeddingsUnavailable without a provider, whatever is missing.
    made = embed_texts([row[1] for row in rows], kind="passage")
    if rows and vectors_available():
        vectors_store(kind=ENTITY, model=model, rows=_vector_rows(rows, made))
    vectors.update(zip((row[0] for row in rows), made, strict=True))
    return vectors


def _row_select(kind: str) -> str:
    """(id, the text its vector is made from, person id, conversation id) of a row of ``kind``."""
    _, _, text_sql, person_sql, conversation_sql = _EMBEDDABLE[kind]
    return f"t.id, left({text_sql}, {PASSAGE_CHARS}), {person_sql}, {conversation_sql}"


def _vector_rows(rows: Sequence[tuple], vectors: Sequence[list[float]]) -> list[VectorRow]:
    return [
        VectorRow(row_id=row_id, vector=vector, person_id=person_id, conversation_id=conversation_id)
        for (row_id, _, person_id, conversation_id), vector in zip(rows, vectors, strict=True)
    ]


def embed_pending_count(*, model: EmbeddingModel) -> int:
    """Rows (of every kind) without a vector from ``model``."""
    total = 0
    # On the replica when the caller reads from it (the /metrics scrape), else the primary.
    with connections[read_alias()].cursor() as cursor:
        for kind in _EMBEDDABLE:
            cursor.execute(_pending_sql(kind, "count(*)"), {"kind": kind, "model": model.name})
            total += cursor.fetchone()[0]
    return total


# The backlog count is an anti-join over every embeddable row (about a second at a million messages): a /metrics
# scrape reads the count the last backfill run (every minute) or scrape left for this long instead of taking it.
BACKLOG_CACHE_SECONDS = 60


def _backlog_key(model: EmbeddingModel) -> str:
    return f"anima:embedding:backlog:{model.name}"


def _backlog_counted(*, model: EmbeddingModel) -> int:
    """Count the rows without a vector from ``model`` now, and keep the count for the gauge."""
    counted = embed_pending_count(model=model)
    cache_set_json(key=_backlog_key(model), value=counted, timeout_seconds=BACKLOG_CACHE_SECONDS)
    return counted


def embed_backlog_count(*, model: EmbeddingModel) -> int:
    """Rows without a vector from ``model``, as counted at most BACKLOG_CACHE_SECONDS ago."""
    counted = cache_get_json(key=_backlog_key(model))
    return counted if isinstance(counted, int) else _backlog_counted(model=model)


def _pending_batch(*, kind: str, model: EmbeddingModel, size: int, below: int | None) -> list[tuple]:
    """The next ``size`` pending rows, newest first, with ids under ``below`` (the last batch's lowest): each
    batch starts where the last ended instead of walking again past every row already embedded above it."""
    below_sql = "" if below is None else " AND t.id < %(below)s"
    with connection.cursor() as cursor:
        cursor.execute(
            _pending_sql(kind, _row_select(kind)) + below_sql + " ORDER BY t.id DESC LIMIT %(size)s",
            {"kind": kind, "model": model.name, "size": size, "below": below},
        )
        return cursor.fetchall()


@dataclass
class BackfillReport:
    model: str | None
    available: bool
    embedded: int = 0
    pending: int = 0
    seconds: float = 0.0
    reason: str = ""
    # Rows the provider answered without a usable vector: left pending.
    unusable: int = 0

    def as_dict(self) -> dict:
        return {
            "model": self.model,
            "available": self.available,
            "embedded": self.embedded,
            "pending": self.pending,
            "unusable": self.unusable,
            "seconds": round(self.seconds, 3),
        }


def embed_unavailable_reason() -> str:
    """Why no vectors can be made or stored here, or "" when they can."""
    _, reason = dense_status(using=DEFAULT_DB_ALIAS)
    return f"{reason}: recall is keyword-only" if reason else ""


def embed_backfill_run(
    *,
    batch: int = DEFAULT_BATCH,
    limit: int | None = None,
    rebuild: bool = False,
    max_seconds: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BackfillReport:
    """Embed pending rows, ``batch`` texts per model call, until none is left, ``limit`` rows were embedded
    or ``max_seconds`` passed. ``rebuild`` first deletes every vector (after a model change).

    ``progress(embedded, pending)`` is called after each batch. Raises EmbeddingsUnavailable when the
    provider fails mid-way (what was stored stays stored).
    """
    started = time.monotonic()
    reason = embed_unavailable_reason()
    model = None if reason else embedding_model()
    if model is None:
        return BackfillReport(model=None, available=False, reason=reason)
    if rebuild:
        vectors_clear()
    vector_indexes_ensure(model=model)
    # The first count only feeds progress lines; the report's count is taken at the end.
    report = BackfillReport(
        model=model.name, available=True, pending=embed_pending_count(model=model) if progress else 0
    )
    for kind in _EMBEDDABLE:
        below = None  # rows written during the run (above the first batch) wait for the next run
        while limit is None or report.embedded < limit:
            if max_seconds is not None and time.monotonic() - started >= max_seconds:
                break
            size = batch if limit is None else min(batch, limit - report.embedded)
            rows = _pending_batch(kind=kind, model=model, size=size, below=below)
            if not rows:
                break
            below = rows[-1][0]
            try:
                vectors = dict(enumerate(embed_texts([row[1] for row in rows], kind="passage")))
            except EmbeddingsUnusable as exc:
                # One text the server cannot embed does not hold up the rest: it stays pending, tried next run.
                vectors = exc.usable
                skipped = [row[0] for index, row in enumerate(rows) if index not in vectors]
                logger.warning("embedding backfill: %s; %s rows %s stay pending", exc, kind, skipped)
                report.unusable += len(skipped)
            vectors_store(
                kind=kind, model=model, rows=_vector_rows([rows[index] for index in vectors], list(vectors.values()))
            )
            report.embedded += len(vectors)
            report.pending = max(0, report.pending - len(vectors))
            if progress:
                progress(report.embedded, report.pending)
    vectors_statistics_refresh(added=report.embedded)
    report.pending = _backlog_counted(model=model)
    report.seconds = time.monotonic() - started
    return report


def embed_backlog_metrics() -> Iterator[Metric]:
    """Scrape-time gauge of rows waiting for a vector, at most BACKLOG_CACHE_SECONDS old (nothing when recall is
    keyword-only here)."""
    if embed_unavailable_reason():
        return
    model = embedding_model()
    gauge = GaugeMetricFamily(
        "anima_embedding_backlog", "Rows without a vector from the current embedding model.", labels=["model"]
    )
    gauge.add_metric([model.name], embed_backlog_count(model=model))
    yield gauge
