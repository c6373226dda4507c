"""Hybrid search: run every source's branches in one statement and fuse their ranks (Reciprocal Rank Fusion)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.conf import settings
from django.db import OperationalError, connections, transaction
from psycopg.errors import QueryCanceled

from anima.core.db import read_alias
from anima.core.errors import Unavailable
from anima.core.metrics import observe_recall
from anima.core.search_query import SearchQuery
from memory.search._sources import SourceSpec
from memory.search._sql import recall_timeout, search_fetch, search_statement
from memory.search._stats import branch_plans

RRF_K = 60
MAX_LIMIT = 100
MIN_POOL = 20


@dataclass
class Hit:
    source: str
    id: int
    score: float = 0.0
    ranks: dict[str, int] = field(default_factory=dict)


def pool_size(*, limit: int) -> int:
    """Candidates each branch keeps: max(n*3, 20), with limits clamped to 100."""
    return max(clamp_limit(limit) * 3, MIN_POOL)


def clamp_limit(limit: int) -> int:
    return max(1, min(int(limit), MAX_LIMIT))


class SearchTimeout(Unavailable):
    """The search ran past ANIMA_RECALL_TIMEOUT and the database cancelled it."""


def hybrid_search(*, query: SearchQuery, sources: Sequence[SourceSpec], limit: int) -> list[Hit]:
    """Rank rows of ``sources`` by RRF over their FTS and trigram branches (one SQL statement).

    Runs on the replica inside ``replica_reads`` (recall's callers), else on the primary. A dense branch
    adds its ranked (source, "dense", id, rank) rows to ``rows`` before the merge and reports its time
    with ``observe_recall(branch="dense", …)``. Raises SearchTimeout when the statement ran past
    ANIMA_RECALL_TIMEOUT.
    """
    if query.is_empty or not sources:
        return []
    alias = read_alias()
    try:
        with transaction.atomic(using=alias), connections[alias].cursor() as cursor, recall_timeout(cursor):
            plans = branch_plans(query=query, sources=sources)
            statement = search_statement(query=query, sources=sources, plans=plans, pool=pool_size(limit=limit))
            if statement is None:
                return []
            started = time.perf_counter()
            rows = search_fetch(cursor, *statement)
            observe_recall(branch="keyword", seconds=time.perf_counter() - started)
    except OperationalError as exc:
        if not isinstance(exc.__cause__, QueryCanceled):
            raise
        raise SearchTimeout(
            f"recall took longer than {settings.ANIMA_RECALL_TIMEOUT:g} s (ANIMA_RECALL_TIMEOUT) and was cancelled"
        ) from exc
    return rrf_merge(rows=rows)


def rrf_merge(*, rows: Sequence[tuple[str, str, int, int]]) -> list[Hit]:
    """Fuse (source, branch, id, rank) rows: score Σ 1/(60 + rank), one hit per source+id, best first."""
    hits: dict[tuple[str, int], Hit] = {}
    for source, branch, row_id, rank in rows:
        hit = hits.setdefault((source, row_id), Hit(source=source, id=row_id))
        hit.ranks[branch] = rank
        hit.score += 1.0 / (RRF_K + rank)
    return sorted(hits.values(), key=lambda hit: (-hit.score, min(hit.ranks.values()), hit.source, hit.id))
