"""The sleep cycle's metrics, read from its run rows at scrape time (so runs of every worker count)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from django.db.models import Count, DurationField, ExpressionWrapper, F, Max, Sum
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from anima.core.metrics import bucket_annotations, histogram_add
from sleep.models import PipelineRun, PipelineStepRun, StepStatus

STEP_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 14400.0)


def sleep_metric_families() -> Iterator[Metric]:
    runs = CounterMetricFamily("anima_sleep_runs", "Sleep-cycle runs, by status.", labels=["status"])
    for row in PipelineRun.objects.values("status").annotate(n=Count("pk")).order_by("status"):
        runs.add_metric([row["status"]], row["n"])
    steps = CounterMetricFamily(
        "anima_sleep_steps", "Sleep-cycle step executions, by step and status.", labels=["step", "status"]
    )
    for row in PipelineStepRun.objects.values("step", "status").annotate(n=Count("pk")).order_by("step", "status"):
        steps.add_metric([row["step"], row["status"]], row["n"])
    duration = HistogramMetricFamily(
        "anima_sleep_step_duration_seconds",
        "Duration of finished sleep-cycle steps (succeeded, partial or failed).",
        labels=["step"],
    )
    last_success = GaugeMetricFamily(
        "anima_sleep_step_last_success_timestamp_seconds",
        "When each sleep-cycle step last succeeded (Unix time): alert when it falls a day behind.",
        labels=["step"],
    )
    finished = (
        PipelineStepRun.objects.filter(
            status__in=[StepStatus.SUCCEEDED, StepStatus.PARTIAL, StepStatus.FAILED], finished_at__isnull=False
        )
        .annotate(duration=ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField()))
        .values("step")
        .annotate(
            n=Count("pk"),
            total=Sum("duration"),
            **bucket_annotations(lookup="duration", bounds=[timedelta(seconds=bound) for bound in STEP_BUCKETS]),
        )
        .order_by("step")
    )
    for row in finished:
        histogram_add(
            duration,
            labels=[row["step"]],
            row=row,
            buckets=STEP_BUCKETS,
            count=row["n"],
            total=row["total"].total_seconds(),
        )
    successes = (
        PipelineStepRun.objects.filter(status=StepStatus.SUCCEEDED)
        .values("step")
        .annotate(at=Max("finished_at"))
        .order_by("step")
    )
    for row in successes:
        last_success.add_metric([row["step"]], row["at"].timestamp())
    yield from (runs, steps, duration, last_success)
