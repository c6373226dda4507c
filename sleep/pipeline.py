"""A generic DAG runner whose every node execution is a ``PipelineStepRun`` row.

Steps run one at a time in topological order (declaration order among ready steps). Branches
could run concurrently, but sequential execution keeps each step on the caller's database
connection and transaction, and the cycle is dominated by LLM latency inside steps anyway.
Steps are not wrapped in a transaction: each step commits its own work, so the audit rows of
its LLM calls survive a failure.

A failed step marks its transitive dependants ``skipped``; independent steps go on.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connections
from django.db.models import Max
from django.utils import timezone
from django.utils.module_loading import import_string

from anima.core.db import primary_reads
from anima.core.llm import LlmBudgetExceeded
from anima.core.logs import log_context
from sleep.context import StepContext
from sleep.models import PipelineRun, PipelineStepRun, RunStatus, StepStatus

logger = logging.getLogger(__name__)

StepFunction = Callable[[StepContext], dict]
BUDGET_EXHAUSTED = "token budget exhausted"


class PipelineError(Exception):
    """A pipeline request that cannot be carried out; the message says why."""


class PipelineBusy(PipelineError):
    """Another run of the same pipeline holds the lock."""


@dataclass(frozen=True)
class Step:
    name: str
    # A callable, or the dotted path of one (imported when the step runs).
    func: StepFunction | str
    depends_on: tuple[str, ...] = ()

    def resolve(self) -> StepFunction:
        return import_string(self.func) if isinstance(self.func, str) else self.func


@dataclass(frozen=True)
class Pipeline:
    name: str
    steps: tuple[Step, ...]
    busy_error: type[PipelineBusy] = PipelineBusy
    # AutoLlmRun.run_key of a run's LLM calls is "<prefix>:<run id>".
    run_key_prefix: str = "pipeline-run"
    _by_name: dict[str, Step] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name = {step.name: step for step in self.steps}
        if len(by_name) != len(self.steps):
            raise ValueError(f"pipeline {self.name}: duplicate step names")
        for step in self.steps:
            missing = [name for name in step.depends_on if name not in by_name]
            if missing:
                raise ValueError(f"pipeline {self.name}: step {step.name} depends on unknown {missing}")
        object.__setattr__(self, "_by_name", by_name)
        self.order()  # refuse cycles at definition time

    @property
    def step_names(self) -> list[str]:
        return [step.name for step in self.steps]

    def step(self, name: str) -> Step:
        try:
            return self._by_name[name]
        except KeyError:
            raise PipelineError(f"unknown step {name!r} of {self.name}; one of: {', '.join(self.step_names)}") from None

    def order(self) -> list[Step]:
        """Steps in dependency order; ties keep declaration order."""
        done: list[Step] = []
        remaining = list(self.steps)
        while remaining:
            ready = [step for step in remaining if all(dep in {d.name for d in done} for dep in step.depends_on)]
            if not ready:
                raise ValueError(f"pipeline {self.name}: dependency cycle among {[s.name for s in remaining]}")
            done.append(ready[0])
            remaining.remove(ready[0])
        return done


@contextlib.contextmanager
def pipeline_lock(*, pipeline: Pipeline) -> Iterator[None]:
    """Hold the pipeline's PostgreSQL advisory lock, or raise ``pipeline.busy_error`` at once.

    The lock lives on a dedicated connection so that closing or recycling the request's own
    connection (Celery does that between tasks) can never release it mid-run.
    """
    key = int.from_bytes(hashlib.sha256(f"pipeline:{pipeline.name}".encode()).digest()[:8], "big", signed=True)
    connection = connections.create_connection("default")
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
            (acquired,) = cursor.fetchone()
        if not acquired:
            raise pipeline.busy_error(
                f"{pipeline.name} is already running; try again when the current run has finished"
            )
        _close_interrupted_runs(pipeline=pipeline)
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
    finally:
        connection.close()


def _close_interrupted_runs(*, pipeline: Pipeline) -> None:
    """Runs still marked running while we hold the lock died with their process: mark them failed."""
    interrupted = "interrupted: the process ended before the run finished"
    now = timezone.now()
    PipelineStepRun.objects.filter(run__pipeline=pipeline.name, status=StepStatus.RUNNING).update(
        status=StepStatus.FAILED, error=interrupted, finished_at=now
    )
    PipelineRun.objects.filter(pipeline=pipeline.name, status=RunStatus.RUNNING).update(
        status=RunStatus.FAILED, error=interrupted, finished_at=now
    )


def pipeline_execute(
    *,
    pipeline: Pipeline,
    day: date,
    mode: str,
    trigger: str,
    force: bool = False,
    step: str | None = None,
    token_budget: int | None = None,
) -> PipelineRun:
    """Run the whole DAG for ``day``, or only ``step`` (a manual retry). The caller holds the lock.

    Every read is from the primary (the cycle decides what to write from what it reads), and every
    log record inside carries the run's id and LLM run key.
    """
    if step is None:
        selected = pipeline.order()
    else:
        selected = [pipeline.step(step)]
        if not force:
            _check_dependencies(pipeline=pipeline, day=day, step=selected[0])
    run = PipelineRun.objects.create(
        pipeline=pipeline.name,
        day=day,
        trigger=trigger,
        mode=mode,
        options={"step": step, "force": force, "token_budget": token_budget},
    )
    context = StepContext(
        run_id=run.pk,
        day=day,
        mode=mode,
        force=force,
        run_key=f"{pipeline.run_key_prefix}:{run.pk}",
        token_budget=token_budget,
    )
    with primary_reads(), log_context(pipeline=pipeline.name, pipeline_run=run.pk, run_key=context.run_key):
        logger.info("%s for %s started (%s, %s)", pipeline.name, day, trigger, mode)
        _execute_steps(run=run, selected=selected, context=context)
        logger.info("%s for %s finished: %s", pipeline.name, day, run.status)
    return run


def _execute_steps(*, run: PipelineRun, selected: list[Step], context: StepContext) -> None:
    failed_root: dict[str, str] = {}  # step that did not succeed -> the failed step behind it
    budget_exhausted = False
    for node in selected:
        blocked = next((dep for dep in node.depends_on if dep in failed_root), None)
        if blocked is not None:
            _record_skip(run=run, step=node, blocked_by=blocked, failed_step=failed_root[blocked])
            failed_root[node.name] = failed_root[blocked]
            continue
        with log_context(step=node.name):
            row = _execute(run=run, step=node, context=context)
        if row.status == StepStatus.FAILED:
            failed_root[node.name] = node.name
            budget_exhausted = budget_exhausted or row.error.startswith(BUDGET_EXHAUSTED)
    failed = [name for name, root in failed_root.items() if name == root]
    run.status = RunStatus.FAILED if failed else RunStatus.SUCCEEDED
    if budget_exhausted:
        run.error = f"{BUDGET_EXHAUSTED}; failed steps: {', '.join(failed)}"
    elif failed:
        run.error = f"failed steps: {', '.join(failed)}"
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "error", "finished_at"])


def _check_dependencies(*, pipeline: Pipeline, day: date, step: Step) -> None:
    succeeded = set(
        PipelineStepRun.objects.filter(
            run__pipeline=pipeline.name, run__day=day, step__in=step.depends_on, status=StepStatus.SUCCEEDED
        ).values_list("step", flat=True)
    )
    missing = [name for name in step.depends_on if name not in succeeded]
    if missing:
        raise PipelineError(
            f"cannot run {step.name} for {day}: {', '.join(missing)} has not succeeded for that day "
            f"(run it first, or use force to skip the dependency check)"
        )


def _next_attempt(*, pipeline_name: str, day: date, step: str) -> int:
    """Attempts count per (day, step) across runs: re-running a step of a day is a retry."""
    previous = PipelineStepRun.objects.filter(run__pipeline=pipeline_name, run__day=day, step=step).aggregate(
        attempt=Max("attempt")
    )["attempt"]
    return (previous or 0) + 1


def _record_skip(*, run: PipelineRun, step: Step, blocked_by: str, failed_step: str) -> None:
    now = timezone.now()
    PipelineStepRun.objects.create(
        run=run,
        step=step.name,
        status=StepStatus.SKIPPED,
        attempt=_next_attempt(pipeline_name=run.pipeline, day=run.day, step=step.name),
        output={"skipped_reason": "dependency_failed", "blocked_by": blocked_by, "failed_step": failed_step},
        started_at=now,
        finished_at=now,
    )


def _execute(*, run: PipelineRun, step: Step, context: StepContext) -> PipelineStepRun:
    row = PipelineStepRun.objects.create(
        run=run,
        step=step.name,
        status=StepStatus.RUNNING,
        attempt=_next_attempt(pipeline_name=run.pipeline, day=run.day, step=step.name),
        started_at=timezone.now(),
    )
    try:
        output = step.resolve()(context)
        if not isinstance(output, dict):
            raise TypeError(f"step {step.name} returned {type(output).__name__}, expected a dict")
        # Round-trip so dates and decimals in an output are stored as JSON strings, not refused.
        row.output = json.loads(json.dumps(output, cls=DjangoJSONEncoder))
        row.status = StepStatus.SUCCEEDED
    except LlmBudgetExceeded as exc:
        logger.warning("%s %s: %s", run, step.name, exc)
        row.status = StepStatus.FAILED
        row.error = f"{BUDGET_EXHAUSTED}: {exc}"
    except Exception as exc:
        logger.exception("%s: step %s failed", run, step.name)
        row.status = StepStatus.FAILED
        row.error = f"{type(exc).__name__}: {exc}"
    row.finished_at = timezone.now()
    row.save(update_fields=["status", "output", "error", "finished_at"])
    logger.info("step %s %s in %.1f s", step.name, row.status, row.duration_seconds)
    return row
