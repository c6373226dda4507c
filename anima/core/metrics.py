"""Prometheus metrics: what ``GET /metrics`` exposes.

Two kinds of metric live here:

- **In-process** ones, recorded where the work happens (request latency by route through
  django-prometheus' middleware, recall latency by branch through ``observe_recall``). Under
  gunicorn they use prometheus-client's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``, set by
  ``gunicorn.conf.py``), so a scrape that lands on one worker reports all of them.
- **Scrape-time** ones, read from database rows when ``/metrics`` is scraped: LLM calls from
  ``AutoLlmRun``, imports from ``ImportRun``, and whatever an app above registers with
  ``scrape_collector_register`` (the sleep cycle registers its step runs). Work done by Celery
  workers and management commands is counted this way without those processes exporting anything.

Labels carry fixed names (routes, purposes, steps, statuses), never user content.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from django.db.models import Count, Q, Sum
from prometheus_client import REGISTRY, CollectorRegistry, Histogram, generate_latest, multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from anima.core.db import replica_reads
from anima.core.models import AutoLlmRun, ImportRun

logger = logging.getLogger(__name__)

RECALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
LLM_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)

_recall_seconds = Histogram(
    "anima_recall_seconds",
    "Time of one recall branch: keyword (the full-text + trigram statement), dense (vector search).",
    ["branch"],
    buckets=RECALL_BUCKETS,
)


def observe_recall(*, branch: str, seconds: float) -> None:
    """Record one recall branch's time; ``branch`` is a fixed name such as "keyword" or "dense"."""
    _recall_seconds.labels(branch=branch).observe(seconds)


ScrapeCollector = Callable[[], Iterable[Metric]]
_scrape_collectors: dict[str, ScrapeCollector] = {}


def scrape_collector_register(*, name: str, collect: ScrapeCollector) -> None:
    """Add metric families read at scrape time (usually from database rows); ``name`` labels its health."""
    _scrape_collectors[name] = collect


class _ScrapeCollectors:
    """Runs every scrape-time collector; one that fails reports ``anima_scrape_collector_up 0`` instead."""

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "anima_scrape_collector_up",
            "1 when a scrape-time collector read its rows, 0 when it failed.",
            labels=["collector"],
        )
        for name, collect in sorted(_scrape_collectors.items()):
            try:
                with replica_reads():  # aggregates over history: the replica's lag does not matter
                    families = list(collect())
            except Exception:
                logger.warning("metrics collector %s failed", name, exc_info=True)
                up.add_metric([name], 0)
                continue
            up.add_metric([name], 1)
            yield from families
        yield up


def metrics_exposition() -> bytes:
    """The Prometheus text exposition of every metric: this process's (or all workers'), then the rows'."""
    registry = CollectorRegistry(auto_describe=False)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.MultiProcessCollector(registry)
    else:
        registry.register(REGISTRY)
    registry.register(_ScrapeCollectors())
    return generate_latest(registry)


# --- Histograms from rows: cumulative bucket counts computed by the database.


def bucket_annotations(*, lookup: str, bounds: Sequence[Any]) -> dict[str, Count]:
    """``Count`` annotations ``le0``, ``le1``… of rows whose ``lookup`` is at most each bound."""
    return {f"le{index}": Count("pk", filter=Q(**{f"{lookup}__lte": bound})) for index, bound in enumerate(bounds)}


def histogram_add(
    family: HistogramMetricFamily,
    *,
    labels: list[str],
    row: Mapping[str, Any],
    buckets: Sequence[float],
    count: int,
    total: float,
) -> None:
    """Add one labelled histogram from a row annotated by ``bucket_annotations`` over ``buckets``."""
    cumulative = [(str(bound), row[f"le{index}"]) for index, bound in enumerate(buckets)]
    family.add_metric(labels, [*cumulative, ("+Inf", count)], total)


# --- The core's own scrape-time metrics.


def _llm_families() -> Iterator[Metric]:
    calls = CounterMetricFamily("anima_llm_calls", "Background LLM calls, by purpose.", labels=["purpose"])
    errors = CounterMetricFamily(
        "anima_llm_errors", "Background LLM calls that failed, by purpose.", labels=["purpose"]
    )
    tokens = CounterMetricFamily("anima_llm_tokens", "Tokens of background LLM calls.", labels=["purpose", "kind"])
    latency = HistogramMetricFamily("anima_llm_latency_seconds", "Latency of background LLM calls.", labels=["purpose"])
    rows = (
        AutoLlmRun.objects.values("purpose")
        .annotate(
            calls=Count("pk"),
            errors=Count("pk", filter=~Q(error="")),
            prompt=Sum("prompt_tokens"),
            completion=Sum("completion_tokens"),
            latency_ms_total=Sum("latency_ms"),
            **bucket_annotations(lookup="latency_ms", bounds=[bound * 1000 for bound in LLM_BUCKETS]),
        )
        .order_by("purpose")
    )
    for row in rows:
        purpose = row["purpose"]
        calls.add_metric([purpose], row["calls"])
        errors.add_metric([purpose], row["errors"])
        tokens.add_metric([purpose, "prompt"], row["prompt"])
        tokens.add_metric([purpose, "completion"], row["completion"])
        histogram_add(
            latency,
            labels=[purpose],
            row=row,
            buckets=LLM_BUCKETS,
            count=row["calls"],
            total=row["latency_ms_total"] / 1000,
        )
    yield from (calls, errors, tokens, latency)


def _import_families() -> Iterator[Metric]:
    runs = CounterMetricFamily("anima_import_runs", "JSONL imports, by kind.", labels=["kind"])
    lines = CounterMetricFamily(
        "anima_import_lines", "Lines of JSONL imports, by kind and result (imported, bad).", labels=["kind", "result"]
    )
    rows = (
        ImportRun.objects.values("kind")
        .annotate(runs=Count("pk"), imported=Sum("imported"), bad=Sum("bad"))
        .order_by("kind")
    )
    for row in rows:
        runs.add_metric([row["kind"]], row["runs"])
        lines.add_metric([row["kind"], "imported"], row["imported"])
        lines.add_metric([row["kind"], "bad"], row["bad"])
    yield from (runs, lines)


scrape_collector_register(name="llm", collect=_llm_families)
scrape_collector_register(name="imports", collect=_import_families)
