"""Cost of one /metrics scrape as the audit rows it reads grow.

Run from the repository root:

    python bench/metrics_scrape.py [--llm-rows 100000,1000000] [--repeat 20]

For each size, a throwaway database (created and dropped here) gets that many ``AutoLlmRun`` rows
(12 purposes, 2% errors, latencies 50 ms–60 s), a year of sleep-cycle runs (365 × 8 steps) and 365
imports. Reported: p50 / p95 of building the whole exposition (``metrics_exposition()``, every
scrape-time collector included) against a floor measured in the same run, ``SELECT count(*)`` over
the same LLM rows (one pass over the table, no grouping).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anima.settings")

import django

django.setup()

from django.db import connection  # noqa: E402

from anima.core.db import throwaway_database  # noqa: E402
from anima.core.metrics import metrics_exposition  # noqa: E402

STEPS = (
    "conversation-cleanup light-sleep deep-sleep dream self-layer-refresh temporal-summary-day "
    "memory-ref-sync temporal-summary-cascade"
).split()


def populate(*, llm_rows: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO auto_llm_runs (purpose, provider, model, prompt, response, prompt_tokens,"
            " completion_tokens, total_tokens, latency_ms, error, run_key, created_at)"
            " SELECT 'purpose-' || (i %% 12), 'openai', 'm', '[]', '{}', 800, 200, 1000,"
            " 50 + (i::bigint * 7919) %% 60000, CASE WHEN i %% 50 = 0 THEN 'timeout' ELSE '' END,"
            " 'sleep-run:' || (i / 1500), now() - (i || ' seconds')::interval"
            " FROM generate_series(1, %s) AS i",
            [llm_rows],
        )
        cursor.execute(
            "INSERT INTO pipeline_run (pipeline, day, trigger, mode, status, options, error, started_at, finished_at)"
            " SELECT 'sleep-cycle', current_date - d, 'cron', 'incremental', 'succeeded', '{}', '',"
            " now() - (d || ' days')::interval, now() - (d || ' days')::interval + interval '40 minutes'"
            " FROM generate_series(1, 365) AS d"
        )
        cursor.execute(
            "INSERT INTO pipeline_step_run (run_id, step, status, attempt, output, error, started_at, finished_at)"
            " SELECT r.id, s.step, 'succeeded', 1, '{}', '', r.started_at, r.started_at + interval '5 minutes'"
            " FROM pipeline_run r CROSS JOIN unnest(%s::text[]) AS s(step)",
            [STEPS],
        )
        cursor.execute(
            "INSERT INTO import_runs (kind, lines, imported, bad, started_at, finished_at)"
            " SELECT 'conversations', 1000, 990, 10, now(), now() FROM generate_series(1, 365)"
        )
        cursor.execute("ANALYZE")


def timed(function, repeat: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[max(0, round(0.95 * len(samples)) - 1)]


def floor() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM auto_llm_runs")
        cursor.fetchone()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llm-rows", default="100000,1000000")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print("| LLM rows | scrape p50 / p95 | floor p50 / p95 | p50 ratio |")
    print("|---|---|---|---|")
    for size in [int(item) for item in args.llm_rows.split(",") if item]:
        with throwaway_database():
            populate(llm_rows=size)
            metrics_exposition()  # warm: imports, first connection
            scrape = timed(metrics_exposition, args.repeat)
            base = timed(floor, args.repeat)
            print(
                f"| {size:,} | {scrape[0]:.1f} / {scrape[1]:.1f} ms | {base[0]:.1f} / {base[1]:.1f} ms"
                f" | {scrape[0] / base[0]:.1f}× |",
                flush=True,
            )


if __name__ == "__main__":
    main()
