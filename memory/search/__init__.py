"""Hybrid retrieval: query building, FTS + trigram + dense branches, score fusion.

User text never reaches SQL as SQL: the query language (``anima.core.search_query``, shared
with history search) makes it a tsquery string and a trigram text, both sent as parameters.
Both keyword branches of every source run in one SQL statement (CTEs), one round trip: that is
the "parallel wave". The dense branches (the query's embedding against pgvector's HNSW indexes,
``anima.core.vectors``) of every source are a second statement. Scores are normalised per branch
and fused in Python (``score_fuse``). Before it, the words of a plain query or a passage are
normalised and looked up in ANALYZE's lexeme statistics (cached), so that words common in a
source only fill up its ranking.

The private modules, bottom up: ``_sources`` (what a search reads), ``_stats`` (term
statistics and each source's plan), ``_sql`` (the statement and its planner settings),
``_fusion`` (running them and fusing), ``_context`` (a chat line judged with the turns beside it),
``_feedback`` (a query of several lines judged by what its first hits share).
"""

from anima.core.db import SearchTimeout
from anima.core.search_query import QuerySyntaxError, search_query_build, search_text_plain
from memory.search._fusion import (
    ALL_BRANCHES,
    KEYWORD_BRANCHES,
    MAX_LIMIT,
    Hit,
    clamp_limit,
    dense_status,
    hit_order,
    hybrid_search,
    query_fit,
    score_fuse,
)
from memory.search._sources import SourceSpec, entity_source, message_source
from memory.search._stats import term_stats_clear

__all__ = [
    "ALL_BRANCHES",
    "KEYWORD_BRANCHES",
    "MAX_LIMIT",
    "Hit",
    "QuerySyntaxError",
    "SearchTimeout",
    "SourceSpec",
    "clamp_limit",
    "dense_status",
    "entity_source",
    "hit_order",
    "hybrid_search",
    "message_source",
    "query_fit",
    "score_fuse",
    "search_query_build",
    "search_text_plain",
    "term_stats_clear",
]
