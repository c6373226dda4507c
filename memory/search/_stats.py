"""Document-frequency pruning (IDF stopwording): lexeme statistics from pg_stats and each source's BranchPlan.

Before a search, the words of a plain query or a passage are normalised and looked up in ANALYZE's lexeme
statistics (cached), so that words common in a source only fill up its ranking.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from django.db import connections

from anima.core.cache import ProcessLru
from anima.core.db import read_alias
from anima.core.search_query import SearchQuery, tsquery_or
from memory.search._sources import SourceSpec

# Document-frequency pruning (IDF stopwording). A lexeme estimated, from PostgreSQL's statistics, to occur
# in more than COMMON_TERM_ROWS rows of a source is "common": rows holding a rarer query word are ranked
# first (by the whole query), rows holding only common words just fill up the pool, from at most
# COMMON_CANDIDATES recent matches. ts_rank_cd must otherwise rank every match: "morning" alone matched
# 23% of 1M messages, 0.4 s (bench/recall_scale.py). Common words also leave the trigram branch, which is
# for typos and partial words (a misspelling is never common) and whose index scan grows with them.
COMMON_TERM_ROWS = 500
COMMON_CANDIDATES = 200
# The newest-rows window is read through the primary key and each row tested, without the GIN index (whose
# posting list for a word in 10% of 1M rows alone takes 12 ms); past this many rows the term is sparse
# enough for the index, which tier 2's fallback uses.
COMMON_WINDOW_MAX = 20_000
# pg_stats changes only at ANALYZE; re-reading it per query costs ~3 ms.
TERM_STATS_TTL = 60.0


@dataclass(frozen=True)
class TermStats:
    """PostgreSQL's estimate of a tsvector column: rows, and the fraction of rows holding each common lexeme."""

    rows: float
    frequencies: dict[str, float]

    def rows_estimate(self, *, lexemes: Sequence[str]) -> float:
        """Rows estimated to hold all of ``lexemes`` (one query operand); 0 for none (a stopword).

        A lexeme ANALYZE did not list is rarer than every listed one but by how much is unknown:
        it counts as 0, i.e. it is never pruned.
        """
        if not lexemes:
            return 0.0
        return self.rows * min(self.frequencies.get(lexeme, 0.0) for lexeme in lexemes)


_term_stats_cache: dict[tuple[str, str, str], tuple[float, TermStats | None]] = {}


def term_stats_get(*, table: str, column: str) -> TermStats | None:
    """The column's lexeme statistics (from ANALYZE, cached TERM_STATS_TTL seconds); None before any ANALYZE."""
    connection = connections[read_alias()]
    key = (str(connection.settings_dict["NAME"]), table, column)
    cached = _term_stats_cache.get(key)
    if cached and time.monotonic() - cached[0] < TERM_STATS_TTL:
        return cached[1]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs, c.reltuples"
            " FROM pg_stats s JOIN pg_namespace n ON n.nspname = s.schemaname"
            " JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = s.tablename"
            " WHERE s.schemaname = current_schema() AND s.tablename = %s AND s.attname = %s AND NOT s.inherited",
            [table, column],
        )
        row = cursor.fetchone()
    stats = None
    if row and row[0] and row[1] and row[2] and row[2] > 0:
        elements, frequencies, rows = row
        # most_common_elem_freqs has three more values (min, max, null frequency): zip stops before them.
        stats = TermStats(rows=float(rows), frequencies=dict(zip(elements, frequencies, strict=False)))
    _term_stats_cache[key] = (time.monotonic(), stats)
    return stats


def term_stats_clear() -> None:
    """Forget cached statistics (after bulk loads and ANALYZE, e.g. in benchmarks)."""
    _term_stats_cache.clear()


# A word's lexemes never change (the text search configuration is fixed): each process remembers the
# latest LEXEME_CACHE_SIZE words it looked up, and a recall whose words are all known skips a round trip.
LEXEME_CACHE_SIZE = 20_000
_lexeme_cache = ProcessLru(LEXEME_CACHE_SIZE)


def _lexemes_get(*, words: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Each word as the database normalises it for the index (stemmed, stopwords dropped), one round trip."""
    found = _lexeme_cache.get_many(words)
    missing = [word for word in words if word not in found]
    if missing:
        with connections[read_alias()].cursor() as cursor:
            cursor.execute(
                "SELECT w, tsvector_to_array(to_tsvector('english', w)) FROM unnest(%s::text[]) AS w", [missing]
            )
            looked_up = {word: tuple(lexemes) for word, lexemes in cursor.fetchall()}
        _lexeme_cache.put_many(looked_up)
        found.update(looked_up)
    return found


@dataclass(frozen=True)
class BranchPlan:
    """What one source's branches search: rare terms ranked in full, common ones only to fill up."""

    rare_tsquery: str
    common_tsquery: str = ""
    # Common-only matches are first looked for in the newest ``common_window`` rows (about COMMON_CANDIDATES
    # of them hold a common term), i.e. with ids above ``newer_than``; a constant, so the planner can
    # weigh that id range against the GIN index.
    common_window: int = 0
    newer_than: int = 0
    trigram_text: str = ""
    # Per query term (``SearchQuery.terms``, in order): the share of the table's rows (``table_rows``, as the
    # statistics estimate them) that hold it, for a common term; None for the others. BM25 takes a common term's
    # document frequency from it rather than counting its rows, which is most of what a passage of common words
    # costs over a large source.
    common_shares: tuple[float | None, ...] = ()
    table_rows: float = 0.0


def branch_plan_build(
    *, query: SearchQuery, stats: TermStats | None, lexemes: dict[str, tuple[str, ...]]
) -> BranchPlan:
    """Split the terms of a plain query or a passage by estimated document frequency (IDF stopwording).

    Without statistics, or when no term is common, the plan is the query itself. Every row found
    is still ranked by the whole query; only which rows get ranked changes.
    """
    if stats is None or not query.terms:
        return BranchPlan(rare_tsquery=query.tsquery, trigram_text=query.trigram_text)
    estimates = {term: stats.rows_estimate(lexemes=lexemes.get(term, ())) for term in query.terms}
    common = [term for term in query.terms if estimates[term] > COMMON_TERM_ROWS]
    rare = [term for term in query.terms if estimates[term] <= COMMON_TERM_ROWS]
    trigram_words = [
        word for word in query.trigram_words if stats.rows_estimate(lexemes=lexemes.get(word, ())) <= COMMON_TERM_ROWS
    ]
    if not common:
        return BranchPlan(rare_tsquery=query.tsquery, trigram_text=" ".join(trigram_words))
    densest = max(estimates[term] for term in common) / stats.rows
    return BranchPlan(
        rare_tsquery=tsquery_or(rare),
        common_tsquery=tsquery_or(common),
        common_window=min(math.ceil(COMMON_CANDIDATES / densest), COMMON_WINDOW_MAX),
        trigram_text=" ".join(trigram_words),
        common_shares=tuple(
            min(estimates[term] / stats.rows, 1.0) if estimates[term] > COMMON_TERM_ROWS else None
            for term in query.terms
        ),
        table_rows=stats.rows,
    )


def branch_plans(*, query: SearchQuery, sources: Sequence[SourceSpec]) -> list[BranchPlan]:
    """One plan per source; statistics are read only for a plain query or a passage, over sources naming their table."""
    stats = [
        term_stats_get(table=source.table, column=source.fts_column) if query.terms and source.table else None
        for source in sources
    ]
    lexemes = _lexemes_get(words=list(dict.fromkeys(query.terms + query.trigram_words))) if any(stats) else {}
    plans = [branch_plan_build(query=query, stats=source_stats, lexemes=lexemes) for source_stats in stats]
    newest: dict[str, int] = {}  # semantic, limbic and autobiographical share ``entities``
    for index, (source, plan) in enumerate(zip(sources, plans, strict=True)):
        if plan.common_tsquery:
            if source.table not in newest:
                newest[source.table] = _newest_id(table=source.table)
            plans[index] = replace(plan, newer_than=newest[source.table] - plan.common_window)
    return plans


def _newest_id(*, table: str) -> int:
    # Its own statement: under hybrid_search's planner settings max(id) could not use the primary key.
    with connections[read_alias()].cursor() as cursor:
        cursor.execute(f"SELECT coalesce(max(id), 0) FROM {table}")
        return cursor.fetchone()[0]
