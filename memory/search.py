"""Hybrid retrieval (SPEC M3): query building, FTS + trigram branches, Reciprocal Rank Fusion.

User text never reaches SQL as SQL. The FTS query is a tsquery *string* of quoted
lexemes joined by operators we emit ourselves; it travels as a parameter to
``to_tsquery('english', …)`` so the database normalises each lexeme exactly as it
normalised the indexed text (stemming, stopwords). The trigram branch gets the
query's content words, also as a parameter.

Both branches of every source run in one SQL statement (CTEs), one round trip:
that is the "parallel wave". Ranks are fused in Python by RRF.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache

import jieba
from django.db import connection, transaction

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
BM25_K1 = 1.2
BM25_B = 0.75

OPERATORS = {"AND": "&", "OR": "|", "NOT": "!"}
_TOKEN_RE = re.compile(r'"([^"]*)"?|(\S+)')
_CJK_RUN_RE = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_WORDLIKE_RE = re.compile(r"\w", re.UNICODE)

# Function words that carry no topic, dropped from every query. The ``english`` config
# drops English stopwords in the database too; listing them here keeps them out of the
# trigram text and of a passage's keywords.
STOPWORDS = frozenset(
    """
    的 了 是 我 你 他 她 它 们 我们 你们 他们 她们 吗 呢 啊 吧 呀 哦 嗯 啥 什么 怎么 怎样 这 那 这个 那个 这些 那些
    在 有 和 与 及 就 都 也 还 要 会 能 可以 对 把 被 给 让 从 到 向 又 很 太 更 最 没 没有 不 不是 一个 一些 一下
    自己 这样 那样 如何 为什么 哪 哪里 哪儿 多少 几 个 么 着 过 得 地 之 其 而 或 但 但是 如果 因为 所以 然后 还是
    真的 觉得 知道 记得 感觉 现在 时候 一起 一点 已经 非常 特别 今天 哈哈 好的 当然 是不是 有没有 一定 应该
    a an the and or not but if of to in on at by for with from as is are was were be been being am do does did
    have has had i me my you your he him his she her it its we us our they them their this that these those
    what which who whom whose when where why how can could will would shall should may might must just so
    very too also about into than then there here s t don didn doesn isn aren wasn weren im ive youre oh yes no
    """.split()
)


class QuerySyntaxError(ValueError):
    """The query is malformed (e.g. ends in an operator); the message says how."""


@dataclass(frozen=True)
class SearchQuery:
    """What the two branches search with; ``tsquery`` is input for ``to_tsquery('english', …)``."""

    tsquery: str
    trigram_text: str
    # Long passages: (word, weight) pairs; FTS then ranks by the summed weight of the words a row holds.
    weighted_terms: tuple[tuple[str, float], ...] = ()

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
        if word and _WORDLIKE_RE.search(word) and word not in STOPWORDS:
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
    has_syntax = False
    lexeme_count = 0
    for match in _TOKEN_RE.finditer(text):
        phrase, word = match.group(1), match.group(2)
        if word is not None and word in OPERATORS:
            items.append(("op", OPERATORS[word]))
            has_syntax = True
            continue
        if lexeme_count >= MAX_LEXEMES:
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
            lexeme_count += len(lexemes)
    tsquery = _join_items(items)
    if has_syntax:
        # Similarity cannot honour AND / NOT or adjacency: explicit syntax searches by FTS alone.
        return SearchQuery(tsquery=tsquery, trigram_text="")
    trigram_words = list(dict.fromkeys(plain_words))[:TRIGRAM_WORDS]
    return SearchQuery(tsquery=tsquery, trigram_text=" ".join(trigram_words))


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


def _branch_sql(source: SourceSpec, index: int, *, fts: bool, trigram: bool, weighted: bool) -> list[str]:
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
    if fts:
        ctes.append(
            f"{prefix}_fts AS (SELECT id, row_number() OVER (ORDER BY score DESC, id) AS rank FROM ("
            f" SELECT t.id, {score} AS score"
            f" FROM {from_sql} WHERE {col} @@ q.tsq AND {source.where_sql}"
            f" ORDER BY score DESC, t.id LIMIT %(pool)s) ranked)"
        )
    if trigram:
        ctes.append(
            f"{prefix}_trgm AS (SELECT id, row_number() OVER (ORDER BY score DESC, id) AS rank FROM ("
            f" SELECT id, word_similarity(%(trgm)s, segmented) AS score FROM ("
            f" SELECT t.id, t.{source.segmented_column} AS segmented FROM {source.from_sql}"
            f" WHERE %(trgm)s <%% t.{source.segmented_column} AND {source.where_sql}"
            f" LIMIT {TRIGRAM_CANDIDATES}) candidates"
            f" ORDER BY score DESC, id LIMIT %(pool)s) ranked)"
        )
    return ctes


def hybrid_search(*, query: SearchQuery, sources: Sequence[SourceSpec], limit: int) -> list[Hit]:
    """Rank rows of ``sources`` by RRF over their FTS and trigram branches (one SQL statement)."""
    if query.is_empty or not sources:
        return []
    fts, trigram = bool(query.tsquery), bool(query.trigram_text)
    weighted = bool(query.weighted_terms)
    ctes = ["q AS (SELECT to_tsquery('english', %(tsq)s) AS tsq)"]
    params: dict = {"tsq": query.tsquery, "trgm": query.trigram_text, "pool": pool_size(limit=limit)}
    if weighted:
        ctes.append(
            "kw AS (SELECT to_tsquery('english', term) AS tsq, weight"
            " FROM unnest(%(kw_terms)s::text[], %(kw_weights)s::float8[]) AS k(term, weight))"
        )
        params["kw_terms"] = [term for term, _ in query.weighted_terms]
        params["kw_weights"] = [weight for _, weight in query.weighted_terms]
    selects = []
    for index, source in enumerate(sources):
        ctes.extend(_branch_sql(source, index, fts=fts, trigram=trigram, weighted=weighted))
        params.update(source.params)
        for branch, enabled in (("fts", fts), ("trigram", trigram)):
            if enabled:
                table = f"s{index}_{'fts' if branch == 'fts' else 'trgm'}"
                selects.append(f"SELECT %(src{index})s, %(branch_{branch})s, id, rank FROM {table}")
        params[f"src{index}"] = source.name
    params.update(branch_fts="fts", branch_trigram="trigram")
    sql = "WITH " + ", ".join(ctes) + " " + " UNION ALL ".join(selects)
    with transaction.atomic(), connection.cursor() as cursor:
        # The threshold is read by the `<%` operator and so by the trigram index. The planner prices `<%`
        # like a cheap operator and, below ~100k rows, scans every row computing word_similarity (250 ms
        # at 10k messages, measured by bench/recall_scale.py); leaving it only bitmap paths makes it
        # take the GIN indexes, the right path at every size.
        cursor.execute(
            "SELECT set_config('pg_trgm.word_similarity_threshold', %s, true),"
            " set_config('enable_seqscan', 'off', true), set_config('enable_indexscan', 'off', true)",
            [str(TRIGRAM_THRESHOLD)],
        )
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    return rrf_merge(rows=rows)


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
    )


def message_source(
    *, name: str, person_id: int | None, since: datetime | None, until: datetime | None, channel: str | None
) -> SourceSpec:
    """User/assistant messages of non-cron conversations (optionally one person's, one channel's)."""
    clauses = ["t.role IN ('user', 'assistant')", "c.platform <> 'cron'"]
    if person_id is not None:
        clauses.append("c.person_id = %(person_id)s")
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
    )


def _time_clauses(*, since: datetime | None, until: datetime | None) -> list[str]:
    clauses = []
    if since is not None:
        clauses.append("t.created_at >= %(since)s")
    if until is not None:
        clauses.append("t.created_at < %(until)s")
    return clauses
