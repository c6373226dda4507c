"""/metrics: Prometheus text for an internal scraper, labelled by route, branch, purpose and step — never by content."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from anima.api.testing import api_client
from anima.core import metrics as core_metrics
from conversations.services import conversations_import
from memory.embedding import embed_backfill_run
from memory.selectors import memory_recall
from sleep.models import RunStatus, StepStatus
from tests.factories import AutoLlmRunFactory, PipelineRunFactory, PipelineStepRunFactory, SemanticMemoryFactory


def scrape(client) -> dict[tuple[str, tuple], float]:
    """Every sample of a scrape as {(name, sorted labels): value}."""
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def value(samples: dict, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def label_values(samples: dict) -> set[str]:
    return {label_value for _, labels in samples for _, label_value in labels}


def test_only_direct_requests_from_allowed_addresses_are_answered(client, settings):
    assert client.get("/metrics").status_code == 200  # the test client comes from 127.0.0.1
    assert client.get("/metrics", REMOTE_ADDR="203.0.113.9").status_code == 403
    # Through a proxy on the same host, REMOTE_ADDR is the proxy's: refused.
    assert client.get("/metrics", HTTP_X_FORWARDED_FOR="203.0.113.9").status_code == 403
    assert client.get("/metrics", HTTP_HOST="10.0.3.7:8000").status_code == 200  # scraped by pod IP
    settings.ANIMA_METRICS_ALLOWED = (ipaddress.ip_network("10.0.0.0/8"),)
    assert client.get("/metrics", REMOTE_ADDR="10.2.3.4").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::ffff:10.2.3.4").status_code == 200
    assert client.get("/metrics").status_code == 403


def test_request_latency_is_labelled_by_route_never_by_path_or_query(client):
    memory = SemanticMemoryFactory(content="Leo 的邮箱是 leo@example.com")
    agent = api_client(username="operator", staff=True)
    before = scrape(client)
    assert agent.get(f"/api/memories/{memory.pk}/").status_code == 200
    assert agent.get("/api/recall/", {"q": "邮箱 secretword"}).status_code == 200
    after = scrape(client)
    name = "django_http_requests_latency_seconds_by_view_method_count"
    for view in ("memory-detail", "api-recall"):
        assert value(after, name, view=view, method="GET") - value(before, name, view=view, method="GET") == 1
    labels = label_values(after)
    assert not [label for label in labels if "/api/" in label or "secretword" in label or "邮箱" in label]


def test_recall_latency_is_recorded_by_branch(client):
    SemanticMemoryFactory(content="Leo 的邮箱是 leo@example.com")
    before = value(scrape(client), "anima_recall_seconds_count", branch="keyword")
    memory_recall(query="邮箱")
    memory_recall(query="leo")
    after = scrape(client)
    assert value(after, "anima_recall_seconds_count", branch="keyword") - before == 2
    assert "邮箱" not in label_values(after)


def test_llm_calls_tokens_errors_and_latency_come_from_the_audit_rows(client):
    AutoLlmRunFactory(purpose="light-sleep.semantic", prompt_tokens=100, completion_tokens=20, latency_ms=300)
    AutoLlmRunFactory(purpose="light-sleep.semantic", prompt_tokens=50, completion_tokens=0, latency_ms=7000, error="x")
    AutoLlmRunFactory(purpose="dream", prompt_tokens=10, completion_tokens=5, latency_ms=90)
    samples = scrape(client)
    assert value(samples, "anima_llm_calls_total", purpose="light-sleep.semantic") == 2
    assert value(samples, "anima_llm_errors_total", purpose="light-sleep.semantic") == 1
    assert value(samples, "anima_llm_errors_total", purpose="dream") == 0
    assert value(samples, "anima_llm_tokens_total", purpose="light-sleep.semantic", kind="prompt") == 150
    assert value(samples, "anima_llm_tokens_total", purpose="light-sleep.semantic", kind="completion") == 20
    latency = "anima_llm_latency_seconds_bucket"
    assert value(samples, latency, purpose="light-sleep.semantic", le="0.25") == 0
    assert value(samples, latency, purpose="light-sleep.semantic", le="0.5") == 1
    assert value(samples, latency, purpose="light-sleep.semantic", le="5.0") == 1
    assert value(samples, latency, purpose="light-sleep.semantic", le="10.0") == 2
    assert value(samples, latency, purpose="light-sleep.semantic", le="+Inf") == 2
    assert value(samples, "anima_llm_latency_seconds_sum", purpose="light-sleep.semantic") == pytest.approx(7.3)
    assert value(samples, "anima_llm_latency_seconds_count", purpose="dream") == 1


def test_sleep_steps_are_counted_by_status_with_durations_and_last_success(client):
    start = timezone.now() - dt.timedelta(hours=3)
    run = PipelineRunFactory(status=RunStatus.FAILED)
    for attempt, (seconds, status) in enumerate(
        ((3, StepStatus.SUCCEEDED), (120, StepStatus.SUCCEEDED), (40, StepStatus.FAILED)), start=1
    ):
        finished_at = start + dt.timedelta(seconds=seconds)
        PipelineStepRunFactory(
            run=run, step="light-sleep", attempt=attempt, status=status, started_at=start, finished_at=finished_at
        )
    PipelineStepRunFactory(run=run, step="dream", status=StepStatus.SKIPPED, started_at=start, finished_at=start)
    samples = scrape(client)
    assert value(samples, "anima_sleep_steps_total", step="light-sleep", status="succeeded") == 2
    assert value(samples, "anima_sleep_steps_total", step="light-sleep", status="failed") == 1
    assert value(samples, "anima_sleep_steps_total", step="dream", status="skipped") == 1
    duration = "anima_sleep_step_duration_seconds_bucket"
    assert value(samples, duration, step="light-sleep", le="5.0") == 1
    assert value(samples, duration, step="light-sleep", le="60.0") == 2
    assert value(samples, duration, step="light-sleep", le="300.0") == 3
    assert value(samples, "anima_sleep_step_duration_seconds_sum", step="light-sleep") == 163
    assert value(samples, "anima_sleep_step_duration_seconds_count", step="dream") == 0  # skipped never ran
    last = value(samples, "anima_sleep_step_last_success_timestamp_seconds", step="light-sleep")
    assert last == pytest.approx((start + dt.timedelta(seconds=120)).timestamp())
    assert value(samples, "anima_sleep_runs_total", status="failed") == 1


def test_import_lines_are_counted_by_kind_and_result(client):
    good = {"conversation": {"external_id": "c1", "platform": "web"}, "messages": []}
    conversations_import(lines=[json.dumps(good), "{not json", json.dumps({"conversation": {}})])
    samples = scrape(client)
    assert value(samples, "anima_import_runs_total", kind="conversations") == 1
    assert value(samples, "anima_import_lines_total", kind="conversations", result="imported") == 1
    assert value(samples, "anima_import_lines_total", kind="conversations", result="bad") == 2
    assert value(samples, "anima_scrape_collector_up", collector="imports") == 1


def test_a_failing_collector_reports_itself_down_and_the_others_still_answer(client, monkeypatch):
    def broken():
        raise RuntimeError("no such table")

    monkeypatch.setitem(core_metrics._scrape_collectors, "broken", broken)
    AutoLlmRunFactory(purpose="dream")
    samples = scrape(client)
    assert value(samples, "anima_scrape_collector_up", collector="broken") == 0
    assert value(samples, "anima_scrape_collector_up", collector="llm") == 1
    assert value(samples, "anima_llm_calls_total", purpose="dream") == 1


def test_the_embedding_backlog_is_a_gauge_that_the_backfill_empties(client, concept_embeddings, private_cache):
    SemanticMemoryFactory.create_batch(3)

    before = value(scrape(client), "anima_embedding_backlog", model="concept-stub")
    embed_backfill_run()
    after = scrape(client)

    assert (before, value(after, "anima_embedding_backlog", model="concept-stub")) == (3, 0)
    assert value(after, "anima_scrape_collector_up", collector="embeddings") == 1


def test_the_embedding_backlog_is_counted_once_per_cache_time_and_the_backfill_refreshes_it(
    client, concept_embeddings, private_cache
):
    SemanticMemoryFactory.create_batch(2)
    assert value(scrape(client), "anima_embedding_backlog", model="concept-stub") == 2
    SemanticMemoryFactory()

    with CaptureQueriesContext(connection) as scraped:
        again = value(scrape(client), "anima_embedding_backlog", model="concept-stub")
    embed_backfill_run()  # its own count of what is left feeds the gauge at once
    after_run = value(scrape(client), "anima_embedding_backlog", model="concept-stub")

    assert again == 2  # the count of the first scrape, not taken again
    assert not [q for q in scraped.captured_queries if "NOT EXISTS" in q["sql"]]
    assert after_run == 0
