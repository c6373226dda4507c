"""Recall latency at scale: hybrid `memory_recall` vs a bare single-branch FTS query (the floor).

Run from the repository root:

    python bench/recall_scale.py [--sizes 10000,100000,1000000] [--memories 10000,100000] [--queries 60]

For each size, synthetic bilingual rows (Zipf-distributed words from jieba's
dictionary and an English word list) are generated with set-based SQL into a
throwaway database (created and dropped here): messages for the session source,
semantic memories for the semantic source. Each size runs the same queries
(1-3 words, common and rare) through `memory_recall` (FTS + trigram branches in
one statement, fused; plus the dense branch with --vectors) and through the floor, a plain ranked FTS query on the same
rows. It prints p50/p95 in milliseconds and the p95 ratio recall / floor. A second session row times passages
(9 lines of 6 words, as passive recall's window searches) against the floor of their OR-ed words.
Target: p95 <= 3x the floor and <= 50 ms at 1M messages. Generating 1M messages
takes several minutes on a small machine, hence the flags.

With ``--vectors``, every row also gets a synthetic unit vector (random, of the configured model's dimension and
under its name) and the HNSW indexes are built; each size then also times recall with the dense
branch (its time includes embedding the query with the configured model) against keyword-only recall in
the same run, and prints the vectors' size on disk per 1M rows and the model's embedding throughput
(passages/s over 256 generated texts). Building HNSW over 1M random vectors takes about 15 minutes on two
cores: ``--keep-database NAME`` keeps the rows, vectors and indexes, and a later run with the same name
measures again without rebuilding them.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anima.settings")

import django

django.setup()

import jieba  # noqa: E402
from django.db import connection  # noqa: E402

from anima.core.db import throwaway_database  # noqa: E402
from anima.core.embeddings import embed_texts, embedding_model  # noqa: E402
from anima.core.vectors import TABLE, vector_index_name, vector_indexes_ensure  # noqa: E402
from memory.search import KEYWORD_BRANCHES, SearchTimeout, search_query_build, term_stats_clear  # noqa: E402
from memory.selectors import memory_recall  # noqa: E402

EN = (
    "morning coffee exam hospital shift nurse cat garden hiking mountain river launch product deadline budget "
    "meeting email password travel lisbon train ticket dinner recipe risotto allergy peanut birthday gift "
    "daughter school piano lesson weekend movie novel chapter running marathon injury doctor medicine sleep "
    "dream weather rain umbrella project server database backup deploy release weekend holiday beach sunset"
).split()


def vocabulary(size: int = 4000) -> list[str]:
    """Most frequent multi-character words of jieba's dictionary, interleaved with English words."""
    path = Path(jieba.__file__).parent / "dict.txt"
    rows = (line.split() for line in path.read_text(encoding="utf-8").splitlines())
    words = sorted(((int(r[1]), r[0]) for r in rows if len(r) >= 2 and len(r[0]) >= 2), reverse=True)
    zh = [word for _, word in words[: size - len(EN)]]
    return [word for pair in zip(zh, EN * (len(zh) // len(EN) + 1), strict=False) for word in pair][:size]


def generate(*, messages: int, memories: int, vocab: list[str]) -> None:
    """Append rows until the tables hold the wanted counts; words Zipf-like (random()^3)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM messages")
        have = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM entities WHERE primary_component = 'semantic_memory'")
        have_memories = cursor.fetchone()[0]
        cursor.execute(
            "INSERT INTO persons (slug, display_name, language, created_at) VALUES ('bench', 'bench', '', now())"
            " ON CONFLICT DO NOTHING"
        )
        cursor.execute("SELECT id FROM persons WHERE slug = 'bench'")
        person = cursor.fetchone()[0]
        text = (
            "(SELECT string_agg((%(vocab)s::text[])[1 + floor(power(random(), 3) * %(n)s)::int], ' ')"
            " FROM generate_series(1, 6 + (g %% 12)) AS w)"
        )
        params = {"vocab": vocab, "n": len(vocab), "person": person}
        if messages > have:
            cursor.execute(
                "INSERT INTO conversations (external_id, platform, channel, chat_id, person_id, title, archived,"
                " system_prompt, temporal_day, created_at, updated_at)"
                " SELECT 'bench-' || g, 'web', 'web', '', %(person)s, '', false, '', '{}', now(), now()"
                " FROM generate_series(%(start)s, %(stop)s) AS g ON CONFLICT DO NOTHING",
                {**params, "start": have // 100, "stop": messages // 100},
            )
            cursor.execute(
                "INSERT INTO messages (conversation_id, role, name, content, fts_segmented, created_at)"
                f" SELECT c.id, CASE WHEN g %% 2 = 0 THEN 'user' ELSE 'assistant' END, '', txt, txt,"
                "        now() - g * interval '1 minute'"
                f" FROM (SELECT g, {text} AS txt FROM generate_series(%(start)s, %(stop)s) AS g) s"
                " JOIN conversations c ON c.external_id = 'bench-' || (g / 100)",
                {**params, "start": have, "stop": messages - 1},
            )
        if memories > have_memories:
            cursor.execute(
                "INSERT INTO entities (primary_component, title, summary, content, body, memory_type, status,"
                " expired_reason, pinned, reference_count, person_id, source_channel, fts_segmented,"
                " created_at, updated_at)"
                f" SELECT 'semantic_memory', '', '', txt, '{{}}', 'world', 'active', '', false, 0,"
                "        CASE WHEN g %% 3 = 0 THEN NULL ELSE %(person)s END, '', txt, now(), now()"
                f" FROM (SELECT g, {text} AS txt FROM generate_series(%(start)s, %(stop)s) AS g) s",
                {**params, "start": have_memories, "stop": memories - 1},
            )
        cursor.execute("ANALYZE messages")
        cursor.execute("ANALYZE entities")
    # Recall caches the statistics ANALYZE just replaced.
    term_stats_clear()


def vectors_fill(*, kind: str, table: str) -> float | None:
    """Give every row of ``table`` without one a random unit vector of the configured model; rebuild the index.

    Returns the seconds the index build took, None when every row had a vector and the index was kept. The
    index is dropped first: one build over all rows is far faster than inserting into it row by row, and
    with the whole graph in maintenance_work_mem (1.2 GB per 1M vectors) 1M rows build in about 15 minutes
    here, where 1 GB made it spill to disk and take hours.
    """
    model = embedding_model()
    params = {"kind": kind, "model": model.name, "dim": model.dim}
    index = vector_index_name(kind=kind, model=model)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*) FROM {table} t WHERE NOT EXISTS (SELECT 1 FROM {TABLE} v"
            " WHERE v.kind = %(kind)s AND v.row_id = t.id AND v.model = %(model)s)",
            params,
        )
        cursor.execute("SELECT %s, to_regclass(%s) IS NOT NULL", [cursor.fetchone()[0], index])
        missing, indexed = cursor.fetchone()
        if not missing and indexed:
            return None
        cursor.execute(f"DROP INDEX IF EXISTS {index}")
        cursor.execute(
            f"INSERT INTO {TABLE} (kind, row_id, model, dim, vec) SELECT %(kind)s, t.id, %(model)s, %(dim)s,"
            " (SELECT l2_normalize(array_agg(random() - 0.5)::vector)::halfvec FROM generate_series(1, %(dim)s)"
            f" WHERE t.id > 0) FROM {table} t ON CONFLICT DO NOTHING",
            params,
        )
        cursor.execute("SET maintenance_work_mem = '3GB'")
        started = time.perf_counter()
        vector_indexes_ensure(model=model)
        built = time.perf_counter() - started
        cursor.execute(f"ANALYZE {TABLE}")
    return built


def vectors_prewarm(*, kind: str) -> str:
    """Load the kind's HNSW index and the vectors into shared buffers, as on a server that has been serving a while.

    A search walks ~4,000 index pages; read from the OS instead of shared buffers each costs ~10 us here.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_prewarm'")
        if cursor.fetchone() is None:
            return "not prewarmed (no pg_prewarm)"
        cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_prewarm")
        cursor.execute("SELECT current_setting('shared_buffers')")
        (buffers,) = cursor.fetchone()
        index = vector_index_name(kind=kind, model=embedding_model())
        cursor.execute("SELECT pg_prewarm(%s, 'buffer'), pg_prewarm(%s, 'buffer')", [index, TABLE])
        pages = sum(cursor.fetchone())
    return f"{pages * 8 / 2**20:.2f} GB prewarmed into shared_buffers ({buffers})"


def vectors_size_per_million() -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*), pg_table_size('{TABLE}'), pg_indexes_size('{TABLE}') FROM {TABLE}")
        rows, heap, indexes = cursor.fetchone()
    scale = 1_000_000 / rows / 2**30
    return f"{rows:,} vectors: {heap * scale:.2f} GB table + {indexes * scale:.2f} GB indexes per 1M"


def embedding_throughput(vocab: list[str], count: int = 256) -> float:
    rng = random.Random(5)
    texts = [" ".join(rng.choice(vocab) for _ in range(rng.randint(8, 30))) for _ in range(count)]
    embed_texts(texts[:8])  # load the model
    started = time.perf_counter()
    for start in range(0, count, 64):
        embed_texts(texts[start : start + 64])
    return count / (time.perf_counter() - started)


def _zipf_word(rng: random.Random, vocab: list[str]) -> str:
    """A word of ``vocab`` (most common first), drawn as the generated rows draw theirs: common words often."""
    return vocab[min(int(rng.random() ** 2 * len(vocab)), len(vocab) - 1)]


def queries(vocab: list[str], count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    picks = []
    for _ in range(count):
        words = [_zipf_word(rng, vocab) for _ in range(rng.randint(1, 3))]
        text = " ".join(words)
        if search_query_build(text=text).tsquery:  # stopword-only queries would time nothing
            picks.append(text)
    return picks


def passages(vocab: list[str], count: int, seed: int = 13) -> list[str]:
    """Texts of 9 lines of 6 words each, as passive recall's window of recent turns searches (a passage: its
    keywords weighted by how rare they are in the searched rows)."""
    rng = random.Random(seed)
    return ["\n".join(" ".join(_zipf_word(rng, vocab) for _ in range(6)) for _ in range(9)) for _ in range(count)]


def floor_query(text: str, table: str, column: str) -> None:
    """The same OR-ed tsquery recall builds, as one ranked FTS query on one table: no filters, no trigram, no fusion."""
    tsquery = search_query_build(text=text).tsquery
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {table}, to_tsquery('english', %s) AS q WHERE {column} @@ q"
            f" ORDER BY ts_rank_cd({column}, q, 32) DESC LIMIT 10",
            [tsquery],
        )
        cursor.fetchall()


WARM_UP = 5  # calls before the timed ones: caches and jieba


def timed(fn, texts: list[str]) -> tuple[float, float]:
    for text in texts[:WARM_UP]:
        fn(text)
    samples = []
    for text in texts:
        started = time.perf_counter()
        fn(text)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples), statistics.quantiles(samples, n=20)[-1]


def report(label: str, rows: int, recall_fn, floor_fn, texts: list[str], *, floor: str = "floor") -> None:
    timeouts = 0

    def recall_or_timeout(text: str) -> None:
        # A recall cancelled by ANIMA_RECALL_TIMEOUT counts the time it took, and is reported.
        nonlocal timeouts
        try:
            recall_fn(text)
        except SearchTimeout:
            timeouts += 1

    recall_p50, recall_p95 = timed(recall_or_timeout, texts)
    floor_p50, floor_p95 = timed(floor_fn, texts)
    calls = len(texts) + min(len(texts), WARM_UP)
    cancelled = f"   {timeouts} of {calls} cancelled by the recall timeout" if timeouts else ""
    print(
        f"{label:<14} {rows:>9,}  recall p50 {recall_p50:7.1f} ms  p95 {recall_p95:7.1f} ms   "
        f"{floor} p50 {floor_p50:6.1f} ms  p95 {floor_p95:6.1f} ms   p95 ratio {recall_p95 / floor_p95:5.2f}x"
        f"{cancelled}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="message counts, comma-separated, ascending")
    parser.add_argument("--memories", default="10000,100000", help="semantic memory counts, ascending")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--vectors", action="store_true", help="add synthetic vectors and time dense recall too")
    parser.add_argument(
        "--keep-database",
        metavar="NAME",
        default="",
        help="build the rows in this database and keep it (a later run with the same name measures again"
        " without rebuilding), instead of a throwaway one",
    )
    args = parser.parse_args()
    if args.vectors and embedding_model() is None:
        parser.error("--vectors needs embeddings (ANIMA_EMBEDDINGS=local or openai)")
    sizes = [int(size) for size in args.sizes.split(",") if size]
    memory_sizes = [int(size) for size in args.memories.split(",") if size]
    vocab = vocabulary()
    texts = queries(vocab, args.queries)
    with throwaway_database(keep=args.keep_database):
        for size in sizes:
            started = time.perf_counter()
            generate(messages=size, memories=0, vocab=vocab)
            print(f"generated {size:,} messages in {time.perf_counter() - started:.0f}s", flush=True)
            dense_report(args.vectors, "session", size, kind="message", table="messages", texts=texts)
            report(
                "session",
                size,
                lambda text: memory_recall(query=text, memory_types=["session"], branches=KEYWORD_BRANCHES),
                lambda text: floor_query(text, "messages", "content_fts"),
                texts,
            )
            report(
                "session 9-line",
                size,
                lambda text: memory_recall(query=text, memory_types=["session"], branches=KEYWORD_BRANCHES),
                lambda text: floor_query(text, "messages", "content_fts"),
                passages(vocab, max(args.queries // 4, 6)),
            )
        for size in memory_sizes:
            generate(messages=0, memories=size, vocab=vocab)
            dense_report(args.vectors, "semantic", size, kind="entity", table="entities", texts=texts)
            report(
                "semantic",
                size,
                lambda text: memory_recall(query=text, memory_types=["semantic"], branches=KEYWORD_BRANCHES),
                lambda text: floor_query(text, "entities", "search_fts"),
                texts,
            )
        if args.vectors:
            print(vectors_size_per_million(), flush=True)
            print(f"embedding throughput: {embedding_throughput(vocab):.1f} passages/s", flush=True)


def dense_report(enabled: bool, label: str, rows: int, *, kind: str, table: str, texts: list[str]) -> None:
    """Recall with the dense branch (query embedding included) beside keyword-only recall, same queries."""
    if not enabled:
        return
    built = vectors_fill(kind=kind, table=table)
    types = ["session"] if kind == "message" else ["semantic"]
    done = "HNSW index kept" if built is None else f"HNSW built in {built:.0f}s"
    print(f"vectors for {rows:,} {table}: {done}; {vectors_prewarm(kind=kind)}", flush=True)
    report(
        label + "+dense",
        rows,
        lambda text: memory_recall(query=text, memory_types=types),
        lambda text: memory_recall(query=text, memory_types=types, branches=KEYWORD_BRANCHES),
        texts,
        floor="keyword-only",
    )


if __name__ == "__main__":
    main()
