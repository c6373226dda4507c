"""The search statements: every source's FTS and trigram branches as CTEs of one SQL statement, and the
dense branches of every source as a second one (it needs other planner settings).

Only fixed SQL and parameter placeholders are written here; query text, lexemes and
filter values travel as parameters.
"""

from __future__ import annotations

from collections.abc import Sequence

from anima.core.db import fetch_under, search_timeout_setting
from anima.core.embeddings import EmbeddingModel
from anima.core.models import TRIGRAM_PREFIX_CHARS
from anima.core.search_query import SearchQuery
from anima.core.vectors import TABLE, vector_order_sql, vector_predicate_sql, vector_query_sql
from memory.search._sources import SourceSpec
from memory.search._stats import COMMON_CANDIDATES, BranchPlan

# FreeAnima used 0.3; measured here, 0.3 lets a two-character CJK word (three trigrams) match any text
# sharing one of its characters, which is noise and makes the index recheck thousands of rows. 0.5 needs
# two of the three and still forgives a one-letter typo ("Misso" finds "Miso", 0.57).
TRIGRAM_THRESHOLD = 0.5
# The trigram branch ranks at most this many matching rows. It exists for typos and partial words, whose
# matches are few; a common word matches thousands of rows, each costing a word_similarity call, while
# the FTS branch already ranks those rows (bench/recall_scale.py: the branch was 80% of recall's time).
TRIGRAM_CANDIDATES = 500
IDF_SAMPLE = 10_000
# The branch of the statement's row that tells how many rows a source holds in scope (its score; up to IDF_SAMPLE).
ROWS = "rows"
BM25_K1 = 1.2
BM25_B = 0.75


def _branch_sql(source: SourceSpec, index: int, *, plan: BranchPlan, fts: bool, weighted: bool) -> list[str]:
    prefix = f"s{index}"
    ctes = []
    col = f"t.{source.fts_column}"
    bm25 = fts and weighted
    if bm25:
        # BM25 with binary term frequency: each keyword's weight times its inverse document frequency in
        # this source, the row's sum damped by its length. Counts stop at IDF_SAMPLE rows so a word costs a
        # bounded scan. MATERIALIZED: referenced once, PostgreSQL would otherwise inline the
        # counts into the score and count every keyword again for each matching row (a 9-line passage over
        # 100,000 messages ran past the 5 s recall timeout; counted once, 0.6-0.8 s).
        ctes.append(
            f"{prefix}_n AS MATERIALIZED (SELECT count(*) AS total, greatest(avg(len), 1) AS avglen FROM ("
            f"SELECT length({col}) AS len FROM {source.from_sql} WHERE {source.where_sql} LIMIT {IDF_SAMPLE}) x)"
        )
        # A common term's document frequency is read from the statistics (``common_shares``), not counted: counting
        # reads its whole posting list, ~13 ms a term at a million messages. It is its share of the source's rows
        # when all of them were counted; past IDF_SAMPLE, where a rare term is counted among more rows than
        # ``n.total``, the table's rows holding it, so that a common term never outweighs a rare one; at most
        # ``n.total``, as a count would be. COALESCE counts the other terms (LEAST skips a NULL: hence the CASE).
        # OFFSET 0 keeps the frequency a subquery of its own: pulled up, its expression (and the count in it) would be
        # copied into each of the weight's two uses and run twice.
        share = f"(%({prefix}_shares)s::float8[])[kw.i]"
        estimate = (
            f"CASE WHEN {share} IS NOT NULL THEN least({share} * CASE WHEN n.total < {IDF_SAMPLE} THEN n.total"
            f" ELSE %({prefix}_table_rows)s END, n.total) END"
        )
        ctes.append(
            f"{prefix}_kw AS MATERIALIZED (SELECT kw.tsq,"
            f" kw.weight * ln(1 + (n.total - df.c + 0.5) / (df.c + 0.5)) AS weight"
            f" FROM kw CROSS JOIN {prefix}_n n CROSS JOIN LATERAL (SELECT coalesce({estimate}, (SELECT count(*) FROM"
            f" (SELECT 1 FROM {source.from_sql} WHERE {col} @@ kw.tsq AND {source.where_sql} LIMIT {IDF_SAMPLE})"
            f" y)) AS c OFFSET 0) df)"
        )
    if bm25 and plan.common_tsquery:
        ctes.extend(_tiered_fts_sql(source, prefix, plan=plan))
    elif fts:
        score, scored_from = f"ts_rank_cd({col}, q.tsq, 32)", f"{source.from_sql} CROSS JOIN q"
        if bm25:
            score, scored_from = _bm25_sql(prefix, col), f"{source.from_sql} CROSS JOIN q CROSS JOIN {prefix}_n n"
        ctes.append(
            f"{prefix}_fts AS (SELECT id, row_number() OVER (ORDER BY score DESC, id) AS rank, score FROM ("
            f" SELECT t.id, {score} AS score"
            f" FROM {scored_from} WHERE {col} @@ q.tsq AND {source.where_sql}"
            f" ORDER BY score DESC, t.id LIMIT %(pool)s) ranked)"
        )
    if plan.trigram_text:
        # The very expression of the trigram index: a row's text is compared up to TRIGRAM_PREFIX_CHARS.
        segmented = f"left(t.{source.segmented_column}, {TRIGRAM_PREFIX_CHARS})"
        ctes.append(
            f"{prefix}_trgm AS (SELECT id, row_number() OVER (ORDER BY score DESC, id) AS rank, score FROM ("
            f" SELECT id, word_similarity(%({prefix}_trgm)s, segmented) AS score FROM ("
            f" SELECT t.id, {segmented} AS segmented FROM {source.from_sql}"
            f" WHERE %({prefix}_trgm)s <%% {segmented} AND {source.where_sql}"
            f" LIMIT {TRIGRAM_CANDIDATES}) candidates"
            f" ORDER BY score DESC, id LIMIT %(pool)s) ranked)"
        )
    return ctes


def _bm25_sql(prefix: str, col: str) -> str:
    """A row's BM25 score from its tsvector ``col``: its weighted keywords (``{prefix}_kw``, ``{prefix}_n n`` in
    scope)."""
    return (
        f"(SELECT sum(k.weight) FROM {prefix}_kw k WHERE {col} @@ k.tsq)"
        f" / (1 + {BM25_K1} * (1 - {BM25_B} + {BM25_B} * length({col}) / n.avglen))"
    )


def _tiered_fts_sql(source: SourceSpec, prefix: str, *, plan: BranchPlan) -> list[str]:
    """FTS when the query has common terms (see branch_plan_build); every row found is scored by BM25 over all its
    keywords, which counts a common word for little.

    Tier 1 scores the rows holding a rare term. Only if they are fewer than the pool, tier 2 adds rows
    holding a common term: up to COMMON_CANDIDATES among the newest ``window`` rows (newer first is
    the tiebreak a conversation wants), then, if still short (filters, a small source inside a big
    table), up to COMMON_CANDIDATES anywhere. An uncorrelated count is a one-time filter: a tier
    that is not needed is never scanned.
    """
    col = f"t.{source.fts_column}"
    rare, common = (f"to_tsquery('english', %({prefix}_{part})s)" for part in ("rare", "common"))
    candidates = f"SELECT t.id, {col} AS fts FROM {source.from_sql} WHERE {source.where_sql}"
    if plan.rare_tsquery:
        tier1 = (
            f"SELECT t.id, {_bm25_sql(prefix, col)} AS score FROM {source.from_sql} CROSS JOIN {prefix}_n n"
            f" WHERE {col} @@ {rare} AND {source.where_sql} ORDER BY score DESC, t.id DESC LIMIT %(pool)s"
        )
    else:
        tier1 = "SELECT NULL::bigint AS id, NULL::float8 AS score WHERE false"
    score = _bm25_sql(prefix, "c.fts")
    return [
        f"{prefix}_fts1 AS ({tier1})",
        # ts_match_vq is @@ spelled as a function: the planner cannot take the GIN index for it.
        f"{prefix}_fts2 AS (SELECT c.id, {score} AS score FROM ({candidates}"
        f" AND t.id > %({prefix}_newer_than)s AND ts_match_vq({col}, {common})"
        f" AND (SELECT count(*) FROM {prefix}_fts1) < %(pool)s LIMIT {COMMON_CANDIDATES}) c CROSS JOIN {prefix}_n n)",
        f"{prefix}_fts3 AS (SELECT c.id, {score} AS score FROM ({candidates} AND {col} @@ {common}"
        f" AND (SELECT count(*) FROM {prefix}_fts1) + (SELECT count(*) FROM {prefix}_fts2) < %(pool)s"
        f" LIMIT {COMMON_CANDIDATES}) c CROSS JOIN {prefix}_n n)",
        f"{prefix}_fts AS (SELECT id, row_number() OVER (ORDER BY score DESC, id DESC) AS rank, score FROM ("
        f" SELECT id, max(score) AS score FROM ("
        f" SELECT id, score FROM {prefix}_fts1 UNION ALL SELECT id, score FROM {prefix}_fts2"
        f" UNION ALL SELECT id, score FROM {prefix}_fts3) tiers GROUP BY id"
        f" ORDER BY score DESC, id DESC LIMIT %(pool)s) ranked)",
    ]


def search_statement(
    *, query: SearchQuery, sources: Sequence[SourceSpec], plans: Sequence[BranchPlan], pool: int
) -> tuple[str, dict] | None:
    """The statement and its parameters: rows of (source, branch, id, rank, score); None when no branch has work.

    With BM25, each source also has a row of branch ROWS whose score is how many rows it holds in scope, counted up
    to IDF_SAMPLE as BM25 counts them (no further cost): fusion reads a small source's size from it.
    """
    fts = bool(query.tsquery)
    weighted = bool(query.weighted_terms)
    ctes = ["q AS (SELECT to_tsquery('english', %(tsq)s) AS tsq)"]
    params: dict = {"tsq": query.tsquery, "pool": pool}
    if weighted:
        ctes.append(
            "kw AS (SELECT to_tsquery('english', term) AS tsq, weight, i"
            " FROM unnest(%(kw_terms)s::text[], %(kw_weights)s::float8[]) WITH ORDINALITY AS k(term, weight, i))"
        )
        params["kw_terms"] = [term for term, _ in query.weighted_terms]
        params["kw_weights"] = [weight for _, weight in query.weighted_terms]
    selects = []
    for index, (source, plan) in enumerate(zip(sources, plans, strict=True)):
        prefix = f"s{index}"
        params.update(
            {
                f"{prefix}_rare": plan.rare_tsquery,
                f"{prefix}_common": plan.common_tsquery,
                f"{prefix}_newer_than": plan.newer_than,
                f"{prefix}_trgm": plan.trigram_text,
                # Aligned with the keywords: a plain query's or a passage's weighted terms are its terms, in order.
                f"{prefix}_shares": _shares(plan, terms=len(query.weighted_terms)),
                f"{prefix}_table_rows": plan.table_rows,
            }
        )
        ctes.extend(_branch_sql(source, index, plan=plan, fts=fts, weighted=weighted))
        params.update(source.params)
        for branch, enabled in (("fts", fts), ("trigram", bool(plan.trigram_text))):
            if enabled:
                table = f"{prefix}_{'fts' if branch == 'fts' else 'trgm'}"
                selects.append(f"SELECT %(src{index})s, %(branch_{branch})s, id, rank, score::float8 FROM {table}")
        if fts and weighted:
            selects.append(f"SELECT %(src{index})s, %(branch_rows)s, NULL, NULL, n.total::float8 FROM {prefix}_n n")
        params[f"src{index}"] = source.name
    if not selects:
        return None
    params.update(branch_fts="fts", branch_trigram="trigram", branch_rows=ROWS)
    return "WITH " + ", ".join(ctes) + " " + " UNION ALL ".join(selects), params


def _shares(plan: BranchPlan, *, terms: int) -> list[float | None]:
    """The plan's share of rows for each weighted term (None: count its rows); none known without common terms."""
    if not plan.common_shares:
        return [None] * terms
    if len(plan.common_shares) != terms:
        raise ValueError(f"a plan's {len(plan.common_shares)} shares do not match the query's {terms} keywords")
    return list(plan.common_shares)


def search_fetch(sql: str, params: dict, *, using: str) -> list[tuple]:
    """Run the search statement under ANIMA_RECALL_TIMEOUT and the planner settings it needs (``fetch_under``)."""
    # The threshold is read by the `<%` operator and so by the trigram index. The planner prices `<%`
    # like a cheap operator and, below ~100k rows, scans every row computing word_similarity (250 ms
    # at 10k messages, measured by bench/recall_scale.py); leaving it only bitmap paths makes it
    # take the GIN indexes, the right path at every size.
    wanted = {
        # pg_trgm's setting exists only once the library is loaded in this session: missing means its default.
        "pg_trgm.word_similarity_threshold": (str(TRIGRAM_THRESHOLD), PG_TRGM_DEFAULT_WORD_SIMILARITY),
        "enable_seqscan": ("off", "on"),
        "enable_indexscan": ("off", "on"),
    }
    return _fetch_timed(sql, params, wanted=wanted, using=using)


def dense_statement(
    *, sources: Sequence[SourceSpec], model: EmbeddingModel, pool: int, waiting: dict[str, list[int]] | None = None
) -> tuple[str, dict] | None:
    """Each source's nearest rows to ``%(qvec)s`` by cosine, as rows of (source, id, similarity); and, as rows of
    (source, id, NULL), those of its ``waiting`` ids (rows a keyword branch found) without a vector from ``model``.

    The ORDER BY is the HNSW index's own expression and the WHERE repeats its predicate, so the index
    serves it; the source's filters are tested on each candidate as the index scan goes (iterative
    scan, see dense_fetch), so a person owning few vectors still gets a full pool. Rows come roughly
    nearest first; the caller ranks them. None when no source has vectors.

    The query vector is written once, in a CTE each branch reads as a one-row subquery (an InitPlan, a value the
    index scan takes like a parameter). Spelled at every use, twice per source, client-side binding copied its text
    (~9 KB for the local model's 896 numbers) into the statement as often and the server parsed every copy: a
    four-source statement was ~34 KB, now ~6 KB. Planning and execution are the same (EXPLAIN, interleaved).
    """
    order = vector_order_sql(model=model, query="(SELECT vec FROM q)")
    selects, params = [], {"pool": pool}
    for index, source in enumerate(sources):
        if not source.vector_kind:
            continue
        # ``column || ''`` keeps the keyword plan off a btree that matches every memory; here it would hide
        # the filter's selectivity and the planner would compute every distance (400 ms at 100k memories,
        # bench/recall_scale.py) instead of walking the HNSW index.
        filters = source.where_sql.replace(" || ''", "")
        where = [vector_predicate_sql(kind=source.vector_kind, model=model), "t.id = v.row_id", filters]
        if source.vector_where_sql:
            where.insert(1, source.vector_where_sql)
        selects.append(
            f"(SELECT %(src{index})s, t.id, 1 - ({order}) FROM {TABLE} v, {source.from_sql}"
            f" WHERE {' AND '.join(where)} ORDER BY {order} LIMIT %(pool)s)"
        )
        if waiting and waiting.get(source.name):
            # Probes of the vectors' primary key, one per id: in the same round trip.
            selects.append(
                f"(SELECT %(src{index})s, w.id, NULL::float8 FROM unnest(%(waiting{index})s::bigint[]) AS w(id)"
                f" WHERE NOT EXISTS (SELECT 1 FROM {TABLE} v"
                f" WHERE {vector_predicate_sql(kind=source.vector_kind, model=model)} AND v.row_id = w.id))"
            )
            params[f"waiting{index}"] = waiting[source.name]
        params.update(source.params)
        params[f"src{index}"] = source.name
    if not selects:
        return None
    query = f"WITH q AS MATERIALIZED (SELECT {vector_query_sql(model=model, param='qvec')} AS vec) "
    return query + " UNION ALL ".join(selects), params


# pgvector's HNSW search keeps ef_search candidates; a filter then drops those of other people. Iterative
# scans go on past them (in roughly nearest-first order) until the LIMIT is met, reading at most
# max_scan_tuples index entries.
HNSW_EF_SEARCH_MIN = 40
HNSW_MAX_SCAN_TUPLES = 20_000


def dense_fetch(sql: str, params: dict, *, pool: int, using: str) -> list[tuple]:
    """Run the dense statement under ANIMA_RECALL_TIMEOUT, with iterative HNSW scans and neither hash nor merge joins
    (``fetch_under``)."""
    wanted = {
        # A hash or merge join reads every vector of the kind to join them to their rows (a merge join sorts them
        # by row id first), then sorts them all by distance: pgvector prices a distance like any operator, so the
        # planner took either over the index for a search over everyone's 1,500 memories (hash: 2.8-9 ms, merge:
        # 4-5.5 ms, HNSW: 0.8-1.5 ms). A person's own few rows still join by nested loop (their ids, then each
        # one's vector) and are sorted.
        "enable_hashjoin": ("off", "on"),
        "enable_mergejoin": ("off", "on"),
        "hnsw.iterative_scan": ("relaxed_order", "off"),
        "hnsw.ef_search": (str(min(max(pool, HNSW_EF_SEARCH_MIN), 1000)), "40"),
        "hnsw.max_scan_tuples": (str(HNSW_MAX_SCAN_TUPLES), "20000"),
    }
    return _fetch_timed(sql, params, wanted=wanted, using=using)


def _fetch_timed(sql: str, params: dict, *, wanted: dict[str, tuple[str, str]], using: str) -> list[tuple]:
    """Every search statement runs under ANIMA_RECALL_TIMEOUT, with the settings it needs besides (``fetch_under``)."""
    return fetch_under(sql=sql, params=params, wanted={**search_timeout_setting(), **wanted}, using=using)


PG_TRGM_DEFAULT_WORD_SIMILARITY = "0.6"
