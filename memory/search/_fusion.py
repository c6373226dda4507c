"""Hybrid search: run every source's keyword branches in one statement, its dense branch in another, and fuse."""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from django.conf import settings

from anima.core.db import read_alias, search_cancelled_as_timeout
from anima.core.embeddings import EmbeddingModel, EmbeddingsUnavailable, embed_texts, embedding_model
from anima.core.metrics import observe_recall
from anima.core.search_query import SearchQuery, text_without_speakers
from anima.core.text import is_chinese
from anima.core.vectors import vector_literal, vectors_available
from memory.search._context import _probability, lines_judged
from memory.search._feedback import feedback_apply
from memory.search._sources import SourceSpec
from memory.search._sql import ROWS, dense_fetch, dense_statement, search_fetch, search_statement
from memory.search._stats import branch_plans

logger = logging.getLogger(__name__)

MAX_LIMIT = 100
# Fusion normalises each branch's scores over its candidates: too few make a noisy z-score. On
# MADial-Bench (en, R@10) a pool of 60 gave 61.9, 100 gave 65.0, 300 gave 66.6; ranking 100 candidates
# costs the keyword branches little (they score every match anyway) and the HNSW search ef_search 100.
MIN_POOL = 100
# How many hits past ``limit`` a line's pull still orders exactly: recall reads that far for facts first.
PULL_MARGIN = 20


@dataclass
class Hit:
    source: str
    id: int
    score: float = 0.0  # the chance that it is relevant (calibrated, see score_fuse)
    z: float = 0.0  # its branches' z-scores, mixed
    # What the calibration read: the best keyword branch's z-score and the dense one (None: no vector).
    keyword_z: float = 0.0
    dense_z: float | None = None
    ranks: dict[str, int] = field(default_factory=dict)
    # Each branch's own score: BM25 or ts_rank_cd (fts), word similarity (trigram), cosine similarity (dense).
    scores: dict[str, float] = field(default_factory=dict)


def pool_size(*, limit: int) -> int:
    """Candidates each branch keeps: max(n*3, 100), with limits clamped to 100."""
    return max(clamp_limit(limit) * 3, MIN_POOL)


def clamp_limit(limit: int) -> int:
    return max(1, min(int(limit), MAX_LIMIT))


KEYWORD_BRANCHES = ("fts", "trigram")
ALL_BRANCHES = (*KEYWORD_BRANCHES, "dense")


def hybrid_search(
    *,
    query: SearchQuery,
    sources: Sequence[SourceSpec],
    limit: int,
    text: str = "",
    branches: Sequence[str] = ALL_BRANCHES,
    keyword_gate: bool = False,
) -> list[Hit]:
    """Rank rows of ``sources`` by their FTS, trigram and dense branches, fused on normalised scores.

    ``text`` is what the dense branch embeds (the query as typed, a transcript as what its lines say:
    ``text_without_speakers``); it runs when ``text`` is given, embeddings are on and the database has vectors
    (``dense_status``), else recall is keyword-only.
    ``branches`` narrows the branches (benchmarks compare them). ``keyword_gate``: the caller uses only
    what a keyword branch found (passive recall), so the query is embedded only once one found something,
    and a message no word of which matches costs no model call. Runs on the replica inside
    ``replica_reads`` (recall's callers), else on the primary. Raises SearchTimeout when a statement ran
    past ANIMA_RECALL_TIMEOUT.
    """
    keyword = [branch for branch in branches if branch in KEYWORD_BRANCHES]
    # A transcript is embedded as what its lines say, as recall_keywords searches it.
    text = text_without_speakers(text)
    if not sources or (query.is_empty and not text):
        return []
    alias = read_alias()
    pool = pool_size(limit=limit)
    rows: list[tuple] = []
    sizes: dict[str, int] = {}
    wants_dense = "dense" in branches and text.strip() and any(source.vector_kind for source in sources)
    # The query is embedded (CPU in this process, or an HTTP call) while the database runs the keyword
    # statement, and before the dense statement is sent: a model call never holds a connection idle in a
    # transaction of recall's own.
    pending = _query_vector_start(text=text, alias=alias) if wants_dense and not keyword_gate else None
    with search_cancelled_as_timeout(what="recall"):
        if keyword and not query.is_empty:
            rows, sizes = _keyword_rows(alias, query=query, sources=sources, keyword=keyword, pool=pool)
        if wants_dense and keyword_gate:
            if not rows:
                return []
            # Nothing left to overlap with: embed here rather than hop to the embedding thread and wait.
            model, _ = dense_status(using=alias)
            dense = _query_vector(text=text, model=model) if model is not None else None
        else:
            dense = pending.result() if pending is not None else None
        unseen: set[tuple[str, int]] = set()
        if dense is not None:
            dense_rows, unseen = _dense_rows(
                dense=dense, sources=sources, pool=pool, using=alias, waiting=_waiting(rows, limit=limit)
            )
            rows += dense_rows
        hits = score_fuse(rows=rows, unseen=unseen, sizes=sizes, fit=query_fit(text))
        top = clamp_limit(limit) + PULL_MARGIN
        # A query of several lines (its lines were embedded too) is judged by what its first hits share: meaning
        # added to what words found. On the dense branch alone it only repeats the query's own meaning (MADial
        # dense-only R@10 69.7 -> 66.1 zh, 59.5 -> 57.6 en), so a search without keywords is left as it is.
        if dense is not None and keyword and not query.is_empty and len(dense.vectors) > 1:
            if feedback_apply(hits=hits, sources=sources, model=dense.model, using=alias, top=top):
                hits.sort(key=hit_order)
        if lines_judged(hits=hits, sources=sources, using=alias, top=top):
            hits.sort(key=hit_order)
    return hits


def _waiting(rows: Sequence[tuple], *, limit: int) -> dict[str, list[int]]:
    """Per source, the rows among the first ``limit`` of a keyword branch: those the dense statement checks for a
    vector (each a key probe; every candidate of the pools would be hundreds a search for rows that rarely make the
    list on their words alone)."""
    waiting: dict[str, dict[int, None]] = {}
    limit = clamp_limit(limit)
    for source, _, row_id, rank, _ in rows:
        if rank <= limit:
            waiting.setdefault(source, {})[row_id] = None
    return {source: list(ids) for source, ids in waiting.items()}


def dense_status(*, using: str | None = None) -> tuple[EmbeddingModel | None, str]:
    """(the model dense recall embeds queries with, "") or (None, why recall is keyword-only)."""
    if settings.ANIMA_EMBEDDINGS == "off":
        return None, "ANIMA_EMBEDDINGS=off"
    if not vectors_available(using=using or read_alias()):
        return None, "the database has no pgvector (extension 'vector' not available)"
    model = embedding_model()
    if model is None:
        return None, "the local embedding model cannot run on this machine"
    return model, ""


def _keyword_rows(
    alias: str, *, query: SearchQuery, sources: Sequence[SourceSpec], keyword: Sequence[str], pool: int
) -> tuple[list[tuple], dict[str, int]]:
    """Every source's FTS and trigram branches, one statement: rows of (source, branch, id, rank, score), and how
    many rows each source holds in scope (where the statement counted them)."""
    plans = branch_plans(query=query, sources=sources)
    statement = search_statement(query=query, sources=sources, plans=plans, pool=pool)
    if statement is None:
        return [], {}
    started = time.perf_counter()
    found = search_fetch(*statement, using=alias)
    observe_recall(branch="keyword", seconds=time.perf_counter() - started)
    sizes = {row[0]: int(row[4]) for row in found if row[1] == ROWS}
    return [row for row in found if row[1] in keyword], sizes


@dataclass(frozen=True)
class _DenseQuery:
    model: EmbeddingModel
    vectors: list[list[float]]  # the whole query's, then its lines' (query_lines)
    seconds: float  # embedding it took: the dense branch's time includes it


# A query of several lines (a stretch of dialogue, a pasted note) is also matched line by line: one vector for the
# whole blurs what any one line asks about. A row's similarity is then the mean of its similarity to the whole and
# to its nearest line (R@10 of dense recall on MADial, whose queries are dialogues: zh 62.5 -> 70.4, en 53.5 ->
# 59.5). The last lines are the ones kept: the end of a dialogue is what the next turn answers.
MAX_QUERY_LINES = 8


def query_lines(text: str) -> list[str]:
    """The lines a query of several lines is also matched by (none for a one-line query)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-MAX_QUERY_LINES:] if len(lines) > 1 else []


_embedders: dict[int, ThreadPoolExecutor] = {}
# Recalls of one process at once (a gunicorn worker's threads, Celery's) each embed their query at once: a remote
# provider's wait must not queue one behind another. Threads are started only as calls overlap.
QUERY_EMBEDDING_THREADS = 8


def _embedder() -> ThreadPoolExecutor:
    """This process's embedding threads. Keyed by pid: a forked child has the parent's pool but not its threads."""
    pid = os.getpid()
    if pid not in _embedders:
        _embedders.clear()
        _embedders[pid] = ThreadPoolExecutor(
            max_workers=QUERY_EMBEDDING_THREADS, thread_name_prefix="anima-query-embedding"
        )
    return _embedders[pid]


def _query_vector_start(*, text: str, alias: str) -> Future | None:
    """Start embedding ``text`` as a query in the background; None when recall is keyword-only."""
    model, _ = dense_status(using=alias)
    if model is None:
        return None
    return _embedder().submit(_query_vector, text=text, model=model)


def _query_vector(*, text: str, model: EmbeddingModel) -> _DenseQuery | None:
    """``text`` embedded as a query, or None (logged) when the provider cannot answer: recall goes on keyword-only."""
    started = time.perf_counter()
    try:
        vectors = embed_texts([text, *query_lines(text)], kind="query")
    except EmbeddingsUnavailable as exc:
        logger.warning("dense recall skipped, keywords only: %s", exc)
        return None
    return _DenseQuery(model=model, vectors=vectors, seconds=time.perf_counter() - started)


def _dense_rows(
    *, dense: _DenseQuery, sources: Sequence[SourceSpec], pool: int, using: str, waiting: dict[str, list[int]]
) -> tuple[list[tuple], set[tuple[str, int]]]:
    """The dense branch's rows, and the (source, id) of the ``waiting`` rows without a vector from the model."""
    statement = dense_statement(sources=sources, model=dense.model, pool=pool, waiting=waiting)
    if statement is None:
        return [], set()
    sql, params = statement
    started = time.perf_counter()
    whole, *lines = dense.vectors
    found = dense_fetch(sql, {**params, "qvec": vector_literal(whole)}, pool=pool, using=using)
    if lines:
        sql, params = dense_statement(sources=sources, model=dense.model, pool=pool)
        by_line = [dense_fetch(sql, {**params, "qvec": vector_literal(line)}, pool=pool, using=using) for line in lines]
        found = _lines_combined(whole=found, by_line=by_line)
    observe_recall(branch="dense", seconds=dense.seconds + time.perf_counter() - started)
    unseen = {(source, row_id) for source, row_id, similarity in found if similarity is None}
    rows, ranks = [], {}
    for source, row_id, similarity in sorted(
        (row for row in found if row[2] is not None), key=lambda row: (-row[2], row[1])
    ):
        ranks[source] = ranks.get(source, 0) + 1
        rows.append((source, "dense", row_id, ranks[source], similarity))
    return rows, unseen


def _lines_combined(*, whole: list[tuple], by_line: list[list[tuple]]) -> list[tuple]:
    """(source, id, similarity) rows: the mean of each row's similarity to the whole query and to its nearest line.

    A row one search did not return counts that search's lowest similarity (it is below everything it returned).
    Rows of ``whole`` without a vector (similarity NULL) are kept as they are.
    """
    pools = [{(source, row_id): sim for source, row_id, sim in found if sim is not None} for found in (whole, *by_line)]
    floors = [min(pool.values(), default=0.0) for pool in pools]
    keys = {key for pool in pools for key in pool}
    lines = list(zip(pools[1:], floors[1:], strict=True))
    combined = [
        (*key, (pools[0].get(key, floors[0]) + max(pool.get(key, floor) for pool, floor in lines)) / 2.0)
        for key in keys
    ]
    return combined + [row for row in whole if row[2] is None]


# Fusion weights, chosen on both dev sets (MADial zh and en, LoCoMo) among general methods (docs/benchmarks.md):
# z-scores beat min-max, RRF and CombMNZ there, and an even mix of meaning and keywords is the one setting that
# holds on every set (0.7 / 0.3, chosen on MADial alone before, lost 2.5-4 points R@10 on LoCoMo and MADial en;
# 0.4 / 0.6 lost on MADial zh). Trigram is for typos and partial words, a small correction on top of FTS.
BRANCH_WEIGHTS = {"dense": 0.5, "fts": 0.5, "trigram": 0.1}
# A hit's score is calibrated: the chance that it is relevant, logistic in its best keyword branch's z and its
# dense z (slopes, intercept), fitted by bench/recall/calibrate.py on both dev sets and both languages pooled,
# each set weighing the same (MADial dialogues and last messages, LoCoMo questions over turns and over facts, the
# small-talk lines); keyword-only recall has a fit of its own, whose z says much less. Comparable across queries
# and sources, it orders the hits (the fused z breaks ties) and gates them (``min_score``; passive recall's
# ``memory.passive_recall.min_score``). On the dev sets, of the hits scored 0.5-0.6, 44 % were relevant; 0.6 and
# over, 63 % (keyword-only: none reached 0.2). Fitted on e5's vectors alone and kept for the local models' joint
# ones, on which 42 % and 56 % of those hits are relevant (0.3-0.4: 23 %): refitted on them (0.406, 0.98, -4.96),
# no better calibrated (40 % and 56 %; 0.3-0.4: 27 %), it ranked MADial en 1.8 points of R@10 higher and LoCoMo
# 3.0 and 2.5 lower (docs/benchmarks.md).
# A Chinese query has a fit of its own, on MADial zh (its dialogues, last messages and small talk): its words are
# jieba's tokens and character pairs, and beside its dense z-score a keyword z-score says 0.4 times as much as in
# the pooled fit; on the pooled fit Chinese hits were underconfident (of MADial zh's hits scored 0.6 and over, 87 %
# relevant). Checked on the Chinese chats written for this project, which it was not fitted on: R@5 +5.5, R@10
# +1.9, and passive recall offered a relevant memory in 1.9 more points of their questions at 3.9 points more
# precision. English keeps the pooled fit: one of its own lost 2.6 R@10 on LoCoMo (docs/benchmarks.md).
# A query of several lines (a stretch of dialogue: passive recall's window, a pasted exchange) takes that fit too, in
# either language: its words are many, and a row sharing a few of them says little beside meaning. Fitted on no
# English, on MADial en's dialogues it ranked the memory a dialogue recalls first in 45.6 % of them (38.8 % by the
# pooled fit) and passive recall offered a relevant memory in 57.5 % of turns at 69.4 % precision (52.5 % at 66.9 %);
# a one-line question (LoCoMo's, the chats') is scored as before. A fit of its own on the dialogues of both languages
# (0.376, 1.073, -4.3) ranked about as well but scored every dialogue hit higher (5 relevant memories among a child's
# 80 are many more than among a person's years of talk), offering more small talk after an exchange.
CALIBRATION = {"dense": (0.583, 0.794, -4.875), "dense-zh": (0.331, 1.182, -4.919), "keyword": (0.637, -4.345)}
Z_CAP = 4.0
# The dense z-score's spread is at least this (cosine similarity): where meaning hardly tells the candidates apart,
# its z-scores must not make a difference of 0.003 look like two standard deviations (a fresh install's few rows:
# a fact and the chat line it came from, 0.860 and 0.863, scored -1 and +1). 0.015 is about the median spread of a
# pool of 100 on LoCoMo for the local models (0.0156; e5 alone, 0.0099, had 0.01) and below most MADial ones; on the
# dev sets it left MADial as it was and raised LoCoMo R@10 by 1.4 (questions 1-4) and 0.5 (5) over 0.01.
DENSE_SPREAD_FLOOR = 0.015


def score_fuse(
    *,
    rows: Sequence[tuple[str, str, int, int, float]],
    unseen: Collection[tuple[str, int]] = (),
    sizes: Mapping[str, int] | None = None,
    fit: str = "dense",
) -> list[Hit]:
    """Fuse (source, branch, id, rank, score) rows into one list ordered by comparable relevance.

    Each branch's scores become z-scores over a pool of at least MIN_POOL: keyword scores within their
    source (BM25's scale depends on the source's statistics), dense similarities over all sources together
    (one model, one scale: a fact that matches better than a diary block mentioning it stays above it). A
    hit's ``z`` is the weighted mean of its z-scores over the branches that found anything, a branch that
    did not find it counting its lowest z-score (the hit ranks below that branch's pool). Its ``score`` is
    calibrated from the best keyword z-score and the dense one (CALIBRATION): the chance that it is
    relevant, comparable across queries and sources; the list is in score order, ``z`` breaking ties. The
    dense branch could not find an ``unseen`` (source, id), a row without a vector yet (written since the
    last backfill, or edited): its mean leaves that branch out rather than rank it below every vector.
    ``sizes``: how many rows each source holds in scope, where known (a source not named holds MIN_POOL or more).
    ``fit``: the calibration the query's hits are scored by with the dense branch (``query_fit``).
    """
    hits: dict[tuple[str, int], Hit] = {}
    groups: dict[tuple[str, str], list[tuple[Hit, float]]] = {}
    for source, branch, row_id, rank, score in rows:
        hit = hits.setdefault((source, row_id), Hit(source=source, id=row_id))
        hit.ranks[branch] = rank
        hit.scores[branch] = float(score)
        groups.setdefault((branch, "" if branch == "dense" else source), []).append((hit, float(score)))
    z: dict[tuple[str, int, str], float] = {}
    lowest: dict[tuple[str, str], float] = {}
    for (branch, group_source), members in groups.items():
        values = [score for _, score in members]
        # A keyword pool shorter than MIN_POOL is filled up with what its missing candidates score: nothing (rows
        # without the words), so that a hit only a few rows match stands out as it does among many. A source holding
        # fewer rows (``sizes``: a new person's 40 facts, their 5 diary blocks) stands for a pool of MIN_POOL in which
        # a word holds the same share of the rows, one row still counting as one: a word one row holds stands out as
        # it would among 100, and a word all of them hold (their own name) does no more than among 100 rows all
        # holding it, where only the rows' lengths tell its scores apart. The dense branch ranks every row: a short
        # pool is a small source, with no rows missing.
        holders, missing = float(len(values)), 0.0
        if branch != "dense":
            held = min((sizes or {}).get(group_source, MIN_POOL), MIN_POOL)
            if 1 < held < MIN_POOL:
                holders = min(1 + (len(values) - 1) * (MIN_POOL - 1) / (held - 1), MIN_POOL)
                missing = MIN_POOL - holders
            else:
                missing = max(MIN_POOL - len(values), 0)
        weight = holders / len(values)
        filler = 0.0
        count = holders + missing
        # Float arithmetic: statistics.pstdev sums exactly in fractions, most of fusion's time.
        mean = (weight * math.fsum(values) + missing * filler) / count
        spread = math.sqrt(
            (weight * math.fsum((value - mean) ** 2 for value in values) + missing * (filler - mean) ** 2) / count
        )
        if branch == "dense":
            spread = max(spread, DENSE_SPREAD_FLOOR)
        # All equal (often: a single candidate): each is as good a match as the branch has, and a hit the branch
        # did not find counts as far below them as the worse of two candidates would (z ±1), not level with them.
        scaled = [(score - mean) / spread if spread else 1.0 for score in values]
        for (hit, _), value in zip(members, scaled, strict=True):
            z[(hit.source, hit.id, branch)] = value
        low = (filler if missing else min(values)) - mean
        lowest[(branch, group_source)] = low / spread if spread else -1.0
    # The dense pool of a small source is all its rows, whose best z-scores are bounded by their number: for the
    # calibration they are stretched by how much further the best of MIN_POOL normal draws lies than the best of
    # that many (extreme values grow as sqrt(2 ln n)), so the nearest of 12 memories counts as the nearest of 100.
    dense_pool = len(groups.get(("dense", ""), ()))
    dense_scale = _extreme(MIN_POOL) / _extreme(dense_pool) if 1 < dense_pool < MIN_POOL else 1.0
    # A source the branch found nothing in: the hit is below every candidate the branch had.
    branch_lowest: dict[str, float] = {}
    for (branch, _), value in lowest.items():
        branch_lowest[branch] = min(value, branch_lowest.get(branch, value))
    for hit in hits.values():
        mixed = total = 0.0
        for branch in branch_lowest:
            if branch == "dense" and (hit.source, hit.id) in unseen:
                continue
            group = (branch, "" if branch == "dense" else hit.source)
            floor = lowest.get(group, branch_lowest[branch])
            mixed += BRANCH_WEIGHTS[branch] * z.get((hit.source, hit.id, branch), floor)
            total += BRANCH_WEIGHTS[branch]
        hit.z = mixed / (total or 1.0)
        # The calibration reads the best keyword branch's z and the dense z, each at most Z_CAP (a word only one
        # row holds is strong evidence, not endless evidence).
        keyword_z = (
            max(
                z.get((hit.source, hit.id, branch), lowest.get((branch, hit.source), branch_lowest[branch]))
                for branch in branch_lowest
                if branch != "dense"
            )
            if set(branch_lowest) - {"dense"}
            else branch_lowest.get("fts", -1.0)
        )
        dense_z = None
        if "dense" in branch_lowest and (hit.source, hit.id) not in unseen:
            dense_z = z.get((hit.source, hit.id, "dense"), lowest.get(("dense", ""), branch_lowest["dense"]))
        if dense_z is not None:
            dense_z *= dense_scale
        hit.keyword_z, hit.dense_z = keyword_z, dense_z
        hit.score = _calibrated(keyword_z=keyword_z, dense_z=dense_z, dense="dense" in branch_lowest, fit=fit)
    return sorted(hits.values(), key=hit_order)


def hit_order(hit: Hit) -> tuple:
    """Score first, the fused z breaking ties, then the best rank and the row."""
    return (-hit.score, -hit.z, min(hit.ranks.values()), hit.source, hit.id)


def _extreme(n: int) -> float:
    return math.sqrt(2.0 * math.log(n))


def query_fit(text: str) -> str:
    """The calibration (CALIBRATION's key) a query's hits are scored by with the dense branch: a Chinese query and one
    of several lines (``query_lines``) by the Chinese fit, any other by the pooled one."""
    return "dense-zh" if is_chinese(text) or query_lines(text) else "dense"


def _calibrated(*, keyword_z: float, dense_z: float | None, dense: bool, fit: str = "dense") -> float:
    """The chance that a hit is relevant (CALIBRATION), from its branches' z-scores: by ``fit`` (``query_fit``) with
    the dense branch, else by the keyword-only fit."""
    if dense:
        slope_keyword, slope_dense, intercept = CALIBRATION[fit]
        # A row without a vector yet is judged by its words: its meaning counts as matching as well as they do.
        dense_z = keyword_z if dense_z is None else dense_z
        logit = slope_keyword * min(keyword_z, Z_CAP) + slope_dense * min(dense_z, Z_CAP) + intercept
    else:
        slope_keyword, intercept = CALIBRATION["keyword"]
        logit = slope_keyword * min(keyword_z, Z_CAP) + intercept
    return _probability(logit)
