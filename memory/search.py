"""Hybrid retrieval (SPEC M3): query building, FTS + trigram branches, Reciprocal Rank Fusion.

User text never reaches SQL as SQL. The FTS query is a tsquery *string* of quoted
lexemes joined by operators we emit ourselves; it travels as a parameter to
``to_tsquery('english', …)`` so the database normalises each lexeme exactly as it
normalised the indexed text (stemming, stopwords). The trigram branch gets the
query's content words, also as a parameter.

Both branches of every source run in one SQL statement (CTEs), one round trip:
that is the "parallel wave". Ranks are fused in Python by RRF. Before it, a plain
query's words are normalised and looked up in ANALYZE's lexeme statistics (cached),
so that words common in a source only fill up its ranking (``branch_plan_build``).
"""

from __future__ import annotations

import math
import re
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cache

import jieba
from django.db import connection, transaction

from anima.core.errors import AnimaError
from anima.core.text import FUNCTION_WORDS

RRF_K = 60
MAX_LIMIT = 100
MIN_POOL = 20
# FreeAnima used 0.3; measured here, 0.3 lets a two-character CJK word (three trigrams) match any text
# sharing one of its characters, which is noise and makes the index recheck thousands of rows. 0.5 needs
# two of the three and still forgives a one-letter typo ("Misso" finds "Miso", 0.57).
TRIGRAM_THRESHOLD = 0.5
# The trigram branch ranks at most this many matching rows. It exists for typos and partial words, whose
# matches are few; a common word matches thousands of rows, each costing a word_similarity call, while
# the FTS branch already ranks those rows (bench/recall_scale.py: the branch was 80% of recall's time).
TRIGRAM_CANDIDATES = 500
# A 10 KB query must stay a reasonable tsquery: beyond this many lexemes the tail is dropped.
MAX_LEXEMES = 160
# Free text with more content words than this is treated as a passage (a dialogue), not a query.
LONG_QUERY_WORDS = 24
LONG_QUERY_KEYWORDS = 60
TRIGRAM_WORDS = 8
IDF_SAMPLE = 10_000
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
BM25_K1 = 1.2
BM25_B = 0.75

OPERATORS = {"AND": "&", "OR": "|", "NOT": "!"}
_TOKEN_RE = re.compile(r'"([^"]*)"?|(\S+)')
_CJK_RUN_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_WORDLIKE_RE = re.compile(r"\w", re.UNICODE)


class QuerySyntaxError(AnimaError):
    """The query is malformed (e.g. ends in an operator); the message says how."""

    default_field = "q"


@dataclass(frozen=True)
class SearchQuery:
    """What the two branches search with; ``tsquery`` is input for ``to_tsquery('english', …)``."""

    tsquery: str
    trigram_text: str
    # Long passages: (word, weight) pairs; FTS then ranks by the summed weight of the words a row holds.
    weighted_terms: tuple[tuple[str, float], ...] = ()
    # A plain query (no operators or quotes): ``tsquery`` is exactly these lexemes OR-ed, and
    # ``trigram_text`` these words joined; they let document-frequency pruning drop common ones.
    terms: tuple[str, ...] = ()
    trigram_words: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.tsquery and not self.trigram_text


@dataclass(frozen=True)
class SourceSpec:
    """One searchable source: its rows, the filters that apply, and how its branches read them."""

    name: str
    from_sql: str
    where_sql: str
    fts_column: str
    segmented_column: str
    params: dict = field(default_factory=dict)
    # The table ``t`` is (for its statistics and its newest id); empty: no document-frequency pruning.
    table: str = ""


@dataclass
class Hit:
    source: str
    id: int
    score: float = 0.0
    ranks: dict[str, int] = field(default_factory=dict)


def _quote_lexeme(text: str) -> str:
    # tsquery quoting: backslash escapes, a single quote is doubled.
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def _clean(text: str) -> str:
    # Control characters (NUL cannot even be sent to PostgreSQL) become spaces; line breaks stay (turns).
    return "".join(" " if unicodedata.category(ch) in ("Cc", "Cs") and ch != "\n" else ch for ch in text)


def _content_words(text: str) -> list[str]:
    """jieba's search tokens of ``text`` without stopwords and punctuation, in order, deduplicated."""
    seen: dict[str, None] = {}
    for token in jieba.cut_for_search(text):
        word = token.strip().lower()
        if word and _WORDLIKE_RE.search(word) and word not in FUNCTION_WORDS:
            seen.setdefault(word, None)
    return list(seen)


def _bigrams(text: str) -> list[str]:
    """Adjacent character bigrams of every CJK run longer than two characters."""
    grams: list[str] = []
    for run in _CJK_RUN_RE.findall(text):
        if len(run) > 2:
            grams.extend(run[i : i + 2] for i in range(len(run) - 1))
    return grams


def _or_group(lexemes: Sequence[str]) -> str:
    unique = list(dict.fromkeys(lexemes))
    if not unique:
        return ""
    joined = " | ".join(_quote_lexeme(lexeme) for lexeme in unique)
    return f"( {joined} )" if len(unique) > 1 else joined


@cache
def _jieba_idf() -> tuple[dict[str, float], float]:
    # Loaded on first passage, not at import: every Django process imports this module.
    import jieba.analyse

    return jieba.analyse.default_tfidf.idf_freq, jieba.analyse.default_tfidf.median_idf


def _keywords(text: str) -> list[tuple[str, float]]:
    """Weighted topic words of a passage: in how many of its lines a word occurs, times jieba's idf squared.

    The database then multiplies in each word's idf within the searched source. Measured on
    MADial-Bench (bench_recall): squaring the general-corpus idf gained ~1 point of R@10 in
    zh; weighting later turns up lost recall at k=10, so lines count alike.
    """
    idf, median = _jieba_idf()
    weights: dict[str, float] = {}
    for line in text.splitlines() or [text]:
        for word in _content_words(line):
            weights[word] = weights.get(word, 0.0) + (idf.get(word, median) / median) ** 2
    ranked = sorted(weights.items(), key=lambda item: -item[1])
    return ranked[:LONG_QUERY_KEYWORDS]


def search_query_build(*, text: str) -> SearchQuery:
    """Turn user text into a safe FTS query and a trigram text.

    Words are OR-ed; ``AND`` / ``OR`` / ``NOT`` (upper case, as separate words) are
    operators; ``"quoted phrases"`` keep adjacency; a CJK run longer than two
    characters also adds its character bigrams. A query using operators or quotes
    is searched by FTS alone (similarity cannot honour them). Text without operators
    and longer than LONG_QUERY_WORDS content words is a passage (e.g. a dialogue):
    it becomes its weighted keywords, see ``_keywords``.
    Raises QuerySyntaxError when an operator has no operand (e.g. the query ends in one).
    """
    text = _clean(text or "")
    if not any(word in OPERATORS for word in text.split()) and len(_content_words(text)) > LONG_QUERY_WORDS:
        return _passage_query(text)
    items: list[tuple[str, str]] = []  # ("op", symbol) or ("term", tsquery operand)
    plain_words: list[str] = []
    plain_lexemes: list[str] = []  # every OR-ed operand, unquoted (what the tsquery holds if has_syntax stays False)
    has_syntax = False
    lexeme_count = 0
    dropped = False  # the last operand said nothing searchable (a stopword, or past the lexeme cap)

    def drop_operand() -> None:
        # An operand that says nothing takes the operators that were waiting for it along.
        nonlocal dropped
        while items and items[-1][0] == "op":
            items.pop()
        dropped = True

    for match in _TOKEN_RE.finditer(text):
        phrase, word = match.group(1), match.group(2)
        if word is not None and word in OPERATORS:
            symbol = OPERATORS[word]
            if dropped and symbol != "!" and (not items or items[-1][0] == "op"):
                continue  # a binary operator right after a dropped operand joins nothing
            items.append(("op", symbol))
            has_syntax = True
            continue
        if lexeme_count >= MAX_LEXEMES:
            drop_operand()
            continue
        if phrase is not None:
            has_syntax = True
            # The database parser splits the quoted phrase and chains its words with <->.
            segmented = " ".join(token for token in jieba.cut(phrase) if token.strip())
            words = _content_words(phrase)
            if words:
                items.append(("term", _quote_lexeme(segmented)))
                plain_words.extend(words)
                lexeme_count += 1
                dropped = False
            else:
                drop_operand()
            continue
        words = _content_words(word)
        lexemes = words + _bigrams(word)
        if word.isascii() and len(words) > 1:
            # The index's parser keeps e-mails, URLs, versions whole ("leo@example.com"); so does to_tsquery.
            lexemes.insert(0, word)
        if lexemes:
            lexemes = lexemes[: MAX_LEXEMES - lexeme_count]
            items.append(("term", _or_group(lexemes)))
            plain_words.extend(words)
            plain_lexemes.extend(lexemes)
            lexeme_count += len(lexemes)
            dropped = False
        else:
            drop_operand()
    tsquery = _join_items(items)
    if has_syntax:
        # Similarity cannot honour AND / NOT or adjacency: explicit syntax searches by FTS alone.
        return SearchQuery(tsquery=tsquery, trigram_text="")
    trigram_words = list(dict.fromkeys(plain_words))[:TRIGRAM_WORDS]
    return SearchQuery(
        tsquery=tsquery,
        trigram_text=" ".join(trigram_words),
        terms=tuple(dict.fromkeys(plain_lexemes)),
        trigram_words=tuple(trigram_words),
    )


def _passage_query(text: str) -> SearchQuery:
    """A passage (a dialogue, a long message): its weighted keywords; quotes in it are prose, not syntax."""
    keywords = _keywords(text)
    words = [word for word, _ in keywords]
    return SearchQuery(
        tsquery=_or_group(words),
        # Trigram similarity to a whole dialogue is noise: on MADial-Bench the branch cost ~15 points of R@10.
        trigram_text="",
        weighted_terms=tuple((_quote_lexeme(word), weight) for word, weight in keywords),
    )


def _join_items(items: list[tuple[str, str]]) -> str:
    """Join terms with the explicit operators; adjacent terms are OR-ed; NOT is a prefix."""
    parts: list[str] = []
    expect_operand = True  # at the start, or right after a binary operator
    pending_not = False
    for kind, value in items:
        if kind == "op" and value == "!":
            pending_not = not pending_not
            continue
        if kind == "op":
            if expect_operand or pending_not:
                symbol = {"&": "AND", "|": "OR"}[value]
                raise QuerySyntaxError(f"operator {symbol} needs a term on each side")
            parts.append(value)
            expect_operand = True
            continue
        if not expect_operand:
            parts.append("|")
        parts.append(f"!{value}" if pending_not else value)
        pending_not = False
        expect_operand = False
    if pending_not or (parts and expect_operand):
        raise QuerySyntaxError("the query ends in an operator (AND / OR / NOT); add a term after it")
    return " ".join(parts)


def pool_size(*, limit: int) -> int:
    """Candidates each branch keeps: max(n*3, 20), with limits clamped to 100."""
    return max(clamp_limit(limit) * 3, MIN_POOL)


def clamp_limit(limit: int) -> int:
    return max(1, min(int(limit), MAX_LIMIT))


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


def _lexemes_get(*, words: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Each word as the database normalises it for the index (stemmed, stopwords dropped), one round trip."""
    if not words:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT w, tsvector_to_array(to_tsvector('english', w)) FROM unnest(%s::text[]) AS w", [list(words)]
        )
        return {word: tuple(lexemes) for word, lexemes in cursor.fetchall()}


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


def branch_plan_build(
    *, query: SearchQuery, stats: TermStats | None, lexemes: dict[str, tuple[str, ...]]
) -> BranchPlan:
    """Split a plain query's terms by estimated document frequency (IDF stopwording).

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
        rare_tsquery=_or_group(rare),
        common_tsquery=_or_group(common),
        common_window=min(math.ceil(COMMON_CANDIDATES / densest), COMMON_WINDOW_MAX),
        trigram_text=" ".join(trigram_words),
    )


def _branch_sql(source: SourceSpec, index: int, *, plan: BranchPlan, fts: bool, weighted: bool) -> list[str]:
    prefix = f"s{index}"
    ctes = []
    col = f"t.{source.fts_column}"
    if fts and weighted:
        # BM25 with binary term frequency: each keyword's weight times its inverse document frequency in
        # this source, the row's sum damped by its length. Counts stop at IDF_SAMPLE rows so a common
        # word costs a bounded index scan.
        ctes.append(
            f"{prefix}_n AS (SELECT count(*) AS total, greatest(avg(len), 1) AS avglen FROM ("
            f"SELECT length({col}) AS len FROM {source.from_sql} WHERE {source.where_sql} LIMIT {IDF_SAMPLE}) x)"
        )
        ctes.append(
            f"{prefix}_kw AS (SELECT kw.tsq, kw.weight * ln(1 + (n.total - df.c + 0.5) / (df.c + 0.5)) AS weight"
            f" FROM kw CROSS JOIN {prefix}_n n CROSS JOIN LATERAL (SELECT count(*) AS c FROM (SELECT 1"
            f" FROM {source.from_sql} WHERE {col} @@ kw.tsq AND {source.where_sql} LIMIT {IDF_SAMPLE}) y) df)"
        )
        score = (
            f"(SELECT sum(k.weight) FROM {prefix}_kw k WHERE {col} @@ k.tsq)"
            f" / (1 + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * length({col}) / n.avglen))"
        )
        from_sql = f"{source.from_sql} CROSS JOIN q CROSS JOIN {prefix}_n n"
    else:
        score = f"ts_rank_cd({col}, q.tsq, 32)"
        from_sql = f"{source.from_sql} CROSS JOIN q"
    if fts and not plan.common_tsquery:
        ctes.append(
            f"{prefix}_fts AS (SELECT id, row_number() OVER (ORDER BY score DESC, id) AS rank FROM ("
            f" SELECT t.id, {score} AS score"
            f" FROM {from_sql} WHERE {col} @@ q.tsq AND {source.where_sql}"
            f" ORDER BY score DESC, t.id LIMIT %(pool)s) ranked)"
        )
    elif fts:
        ctes.extend(_tiered_fts_sql(source, prefix, plan=plan))
    if plan.trigram_text:
        ctes.append(
            f"{prefix}_trgm AS (SELECT id, row_number() OVER (ORDER BY score DESC, id) AS rank FROM ("
            f" SELECT id, word_similarity(%({prefix}_trgm)s, segmented) AS score FROM ("
            f" SELECT t.id, t.{source.segmented_column} AS segmented FROM {source.from_sql}"
            f" WHERE %({prefix}_trgm)s <%% t.{source.segmented_column} AND {source.where_sql}"
            f" LIMIT {TRIGRAM_CANDIDATES}) candidates"
            f" ORDER BY score DESC, id LIMIT %(pool)s) ranked)"
        )
    return ctes


def _tiered_fts_sql(source: SourceSpec, prefix: str, *, plan: BranchPlan) -> list[str]:
    """FTS when the query has common terms (see branch_plan_build); every row is ranked by the whole query.

    Tier 1 ranks the rows holding a rare term. Only if they are fewer than the pool, tier 2 adds rows
    holding a common term: up to COMMON_CANDIDATES among the newest ``window`` rows (newer first is
    the tiebreak a conversation wants), then, if still short (filters, a small source inside a big
    table), up to COMMON_CANDIDATES anywhere. An uncorrelated count is a one-time filter: a tier
    that is not needed is never scanned.
    """
    col = f"t.{source.fts_column}"
    rank = "ts_rank_cd(c.fts, q.tsq, 32)"
    rare, common = (f"to_tsquery('english', %({prefix}_{part})s)" for part in ("rare", "common"))
    candidates = f"SELECT t.id, {col} AS fts FROM {source.from_sql} WHERE {source.where_sql}"
    if plan.rare_tsquery:
        tier1 = (
            f"SELECT t.id, ts_rank_cd({col}, q.tsq, 32) AS score FROM {source.from_sql} CROSS JOIN q"
            f" WHERE {col} @@ {rare} AND {source.where_sql} ORDER BY score DESC, t.id DESC LIMIT %(pool)s"
        )
    else:
        tier1 = "SELECT NULL::bigint AS id, NULL::real AS score WHERE false"
    return [
        f"{prefix}_fts1 AS ({tier1})",
        # ts_match_vq is @@ spelled as a function: the planner cannot take the GIN index for it.
        f"{prefix}_fts2 AS (SELECT c.id, {rank} AS score FROM ({candidates}"
        f" AND t.id > %({prefix}_newer_than)s AND ts_match_vq({col}, {common})"
        f" AND (SELECT count(*) FROM {prefix}_fts1) < %(pool)s LIMIT {COMMON_CANDIDATES}) c CROSS JOIN q)",
        f"{prefix}_fts3 AS (SELECT c.id, {rank} AS score FROM ({candidates} AND {col} @@ {common}"
        f" AND (SELECT count(*) FROM {prefix}_fts1) + (SELECT count(*) FROM {prefix}_fts2) < %(pool)s"
        f" LIMIT {COMMON_CANDIDATES}) c CROSS JOIN q)",
        f"{prefix}_fts AS (SELECT id, row_number() OVER (ORDER BY tier, score DESC, id DESC) AS rank FROM ("
        f" SELECT id, min(tier) AS tier, max(score) AS score FROM ("
        f" SELECT id, 1 AS tier, score FROM {prefix}_fts1 UNION ALL SELECT id, 2, score FROM {prefix}_fts2"
        f" UNION ALL SELECT id, 2, score FROM {prefix}_fts3) tiers GROUP BY id"
        f" ORDER BY tier, score DESC, id DESC LIMIT %(pool)s) ranked)",
    ]


def hybrid_search(*, query: SearchQuery, sources: Sequence[SourceSpec], limit: int) -> list[Hit]:
    """Rank rows of ``sources`` by RRF over their FTS and trigram branches (one SQL statement)."""
    if query.is_empty or not sources:
        return []
    fts = bool(query.tsquery)
    weighted = bool(query.weighted_terms)
    ctes = ["q AS (SELECT to_tsquery('english', %(tsq)s) AS tsq)"]
    params: dict = {"tsq": query.tsquery, "pool": pool_size(limit=limit)}
    if weighted:
        ctes.append(
            "kw AS (SELECT to_tsquery('english', term) AS tsq, weight"
            " FROM unnest(%(kw_terms)s::text[], %(kw_weights)s::float8[]) AS k(term, weight))"
        )
        params["kw_terms"] = [term for term, _ in query.weighted_terms]
        params["kw_weights"] = [weight for _, weight in query.weighted_terms]
    selects = []
    with transaction.atomic(), connection.cursor() as cursor:
        plans = _branch_plans(query=query, sources=sources)
        for index, (source, plan) in enumerate(zip(sources, plans, strict=True)):
            prefix = f"s{index}"
            params.update(
                {
                    f"{prefix}_rare": plan.rare_tsquery,
                    f"{prefix}_common": plan.common_tsquery,
                    f"{prefix}_newer_than": plan.newer_than,
                    f"{prefix}_trgm": plan.trigram_text,
                }
            )
            ctes.extend(_branch_sql(source, index, plan=plan, fts=fts, weighted=weighted))
            params.update(source.params)
            for branch, enabled in (("fts", fts), ("trigram", bool(plan.trigram_text))):
                if enabled:
                    table = f"{prefix}_{'fts' if branch == 'fts' else 'trgm'}"
                    selects.append(f"SELECT %(src{index})s, %(branch_{branch})s, id, rank FROM {table}")
            params[f"src{index}"] = source.name
        if not selects:
            return []
        params.update(branch_fts="fts", branch_trigram="trigram")
        sql = "WITH " + ", ".join(ctes) + " " + " UNION ALL ".join(selects)
        # The threshold is read by the `<%` operator and so by the trigram index. The planner prices `<%`
        # like a cheap operator and, below ~100k rows, scans every row computing word_similarity (250 ms
        # at 10k messages, measured by bench/recall_scale.py); leaving it only bitmap paths makes it
        # take the GIN indexes, the right path at every size.
        # Transaction-local settings outlive this statement inside a caller's transaction: restore them.
        # pg_trgm's setting exists only once the library is loaded in this session: missing means its default.
        cursor.execute(
            "SELECT COALESCE(current_setting('pg_trgm.word_similarity_threshold', true), %s),"
            " current_setting('enable_seqscan'), current_setting('enable_indexscan')",
            [PG_TRGM_DEFAULT_WORD_SIMILARITY],
        )
        previous = list(cursor.fetchone())
        cursor.execute(_PLANNER_SETTINGS_SQL, [str(TRIGRAM_THRESHOLD), "off", "off"])
        cursor.execute(sql, params)
        rows = cursor.fetchall()
        cursor.execute(_PLANNER_SETTINGS_SQL, previous)
    return rrf_merge(rows=rows)


PG_TRGM_DEFAULT_WORD_SIMILARITY = "0.6"
_PLANNER_SETTINGS_SQL = (
    "SELECT set_config('pg_trgm.word_similarity_threshold', %s, true),"
    " set_config('enable_seqscan', %s, true), set_config('enable_indexscan', %s, true)"
)


def _branch_plans(*, query: SearchQuery, sources: Sequence[SourceSpec]) -> list[BranchPlan]:
    """One plan per source; statistics are read only for a plain query over sources that name their table."""
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
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT coalesce(max(id), 0) FROM {table}")
        return cursor.fetchone()[0]


def rrf_merge(*, rows: Sequence[tuple[str, str, int, int]]) -> list[Hit]:
    """Fuse (source, branch, id, rank) rows: score Σ 1/(60 + rank), one hit per source+id, best first."""
    hits: dict[tuple[str, int], Hit] = {}
    for source, branch, row_id, rank in rows:
        hit = hits.setdefault((source, row_id), Hit(source=source, id=row_id))
        hit.ranks[branch] = rank
        hit.score += 1.0 / (RRF_K + rank)
    return sorted(hits.values(), key=lambda hit: (-hit.score, min(hit.ranks.values()), hit.source, hit.id))


def entity_source(
    *, name: str, where_sql: str, person_id: int | None, since: datetime | None, until: datetime | None
) -> SourceSpec:
    """A source over ``entities`` rows matching ``where_sql`` (fixed SQL, no user input)."""
    clauses = [where_sql]
    if person_id is not None:
        clauses.append("(t.person_id = %(person_id)s OR t.person_id IS NULL)")
    clauses.extend(_time_clauses(since=since, until=until))
    return SourceSpec(
        name=name,
        from_sql="entities t",
        where_sql=" AND ".join(clauses),
        fts_column="search_fts",
        segmented_column="fts_segmented",
        params={"person_id": person_id, "since": since, "until": until},
        table="entities",
    )


def message_source(
    *, name: str, person_id: int | None, since: datetime | None, until: datetime | None, channel: str | None
) -> SourceSpec:
    """User/assistant messages of non-cron conversations (optionally one person's, one channel's)."""
    clauses = ["t.role IN ('user', 'assistant')", "c.platform <> 'cron'"]
    if person_id is not None:
        # A conversation belongs to its person, or, without one, to whoever its channel account maps to.
        clauses.append(
            "(c.person_id = %(person_id)s OR (c.person_id IS NULL AND EXISTS (SELECT 1 FROM identities i"
            " WHERE i.person_id = %(person_id)s AND i.channel = COALESCE(NULLIF(c.channel, ''), c.platform)"
            " AND i.external_id = c.chat_id)))"
        )
    if channel:
        clauses.append("c.channel = %(channel)s")
    clauses.extend(_time_clauses(since=since, until=until))
    return SourceSpec(
        name=name,
        from_sql="messages t JOIN conversations c ON c.id = t.conversation_id",
        where_sql=" AND ".join(clauses),
        fts_column="content_fts",
        segmented_column="fts_segmented",
        params={"person_id": person_id, "since": since, "until": until, "channel": channel},
        table="messages",
    )


def _time_clauses(*, since: datetime | None, until: datetime | None) -> list[str]:
    clauses = []
    if since is not None:
        clauses.append("t.created_at >= %(since)s")
    if until is not None:
        clauses.append("t.created_at < %(until)s")
    return clauses
