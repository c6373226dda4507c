"""A generic DAG runner whose every node execution is a ``PipelineStepRun`` row.

Steps run one at a time in topological order (declaration order among ready steps). Branches
could run concurrently, but sequential execution keeps each step on the caller's database
connection and transaction, and the cycle is dominated by LLM latency inside steps anyway.
Steps are not wrapped in a transaction: each step commits its own work, so the audit rows of
its LLM calls survive a failure. Every step is idempotent, so a run whose process died is carried
on (``pipeline_run_continue``) by re-running what it had not finished; a run nobody works on is
closed (``pipeline_runs_reap``), never left "running".

A failed step marks its transitive dependants ``skipped``; independent steps go on.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta

from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, connection, connections, transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.module_loading import import_string

from anima.core.db import primary_reads
from anima.core.llm import LlmBudgetExceeded
from anima.core.logs import log_context
from sleep.context import StepContext
from sleep.models import ACTIVE_STATUSES, PipelineRun, PipelineStepRun, RunStatus, StepStatus

logger = logging.getLogger(__name__)

StepFunction = Callable[[StepContext], dict]
BUDGET_EXHAUSTED = "token budget exhausted"


class PipelineError(Exception):
    """A pipeline request that cannot be carried out; the message says why."""


class PipelineBusy(PipelineError):
    """Another run of the same pipeline is active; ``run_id`` names it when known."""

    def __init__(self, message: str, *, run_id: int | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id


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


def _lock_key(pipeline: Pipeline) -> int:
    return int.from_bytes(hashlib.sha256(f"pipeline:{pipeline.name}".encode()).digest()[:8], "big", signed=True)


@contextlib.contextmanager
def pipeline_lock(*, pipeline: Pipeline) -> Iterator[None]:
    """Hold the pipeline's PostgreSQL advisory lock, or raise ``pipeline.busy_error`` at once.

    The lock lives on a dedicated connection so that closing or recycling the request's own
    connection (Celery does that between tasks) can never release it mid-run; when the process
    dies, PostgreSQL drops the connection and the lock with it.
    """
    key = _lock_key(pipeline)
    connection = connections.create_connection("default")
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
            (acquired,) = cursor.fetchone()
        if not acquired:
            active = PipelineRun.objects.filter(pipeline=pipeline.name, status__in=ACTIVE_STATUSES).first()
            raise pipeline.busy_error(
                f"{pipeline.name} is already running"
                + (f" (run {active.pk})" if active else "")
                + "; try again when the current run has finished",
                run_id=active.pk if active else None,
            )
        _close_interrupted_runs(pipeline=pipeline)
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
    finally:
        connection.close()


INTERRUPTED = "interrupted: the process ended before the run finished"
# Whether the pipeline's advisory lock is held right now, by any session of this database.
_LOCK_FREE = (
    "NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND classid::bigint = %(hi)s AND objid::bigint = %(lo)s)"
)


def _close_interrupted_runs(*, pipeline: Pipeline, unless_locked: bool = False) -> int:
    """Mark runs still ``running`` (and their running steps) failed: nobody works on them.

    Holding the lock, every running run is a dead process's. Without it (``unless_locked``), the
    lock's absence is checked in the same statement, so a run that a worker is starting is never
    touched. Returns how many runs were closed.
    """
    key = _lock_key(pipeline)
    params = {"pipeline": pipeline.name, "error": INTERRUPTED, "now": timezone.now()}
    params.update(hi=(key >> 32) & 0xFFFFFFFF, lo=key & 0xFFFFFFFF)
    condition = f" AND {_LOCK_FREE}" if unless_locked else ""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE pipeline_step_run s SET status = 'failed', error = %(error)s, finished_at = %(now)s"
            " FROM pipeline_run r WHERE s.run_id = r.id AND r.pipeline = %(pipeline)s AND s.status = 'running'"
            + condition,
            params,
        )
        cursor.execute(
            "UPDATE pipeline_run SET status = 'failed', error = %(error)s, finished_at = %(now)s"
            " WHERE pipeline = %(pipeline)s AND status = 'running'" + condition,
            params,
        )
        return cursor.rowcount


def pipeline_runs_reap(*, pipeline: Pipeline, queued_expire: timedelta) -> int:
    """Close what nobody works on: running runs whose process died, queued runs no worker took in time.

    Called whenever runs are shown or requested, so a dead run never stays "running". Returns
    how many runs were closed.
    """
    stale = PipelineRun.objects.filter(
        pipeline=pipeline.name, status=RunStatus.QUEUED, started_at__lt=timezone.now() - queued_expire
    )
    expired = stale.update(
        status=RunStatus.FAILED,
        error=f"not started: no worker took it within {queued_expire}",
        finished_at=timezone.now(),
    )
    return expired + _close_interrupted_runs(pipeline=pipeline, unless_locked=True)


def run_resumable(run: PipelineRun) -> bool:
    """Queued, or left unfinished by a process that died: its task (redelivered) may carry it on."""
    return run.status in ACTIVE_STATUSES or (run.status == RunStatus.FAILED and run.error.startswith(INTERRUPTED))


def pipeline_run_create(
    *,
    pipeline: Pipeline,
    day: date,
    mode: str,
    trigger: str,
    force: bool = False,
    step: str | None = None,
    token_budget: int | None = None,
    status: str = RunStatus.RUNNING,
    task_id: str = "",
) -> PipelineRun:
    """The row of a new run of the whole DAG for ``day``, or only ``step`` (a manual retry).

    Raises PipelineError for an unknown step or unmet dependencies (unless ``force``), and
    ``pipeline.busy_error`` naming the active run when another one is queued or running.
    """
    if step is not None:
        selected = pipeline.step(step)
        if not force:
            _check_dependencies(pipeline=pipeline, day=day, step=selected)
    options = {"step": step, "force": force, "token_budget": token_budget}
    if task_id:
        options["task_id"] = task_id
    try:
        with transaction.atomic():
            return PipelineRun.objects.create(
                pipeline=pipeline.name, day=day, trigger=trigger, mode=mode, status=status, options=options
            )
    except IntegrityError:
        active = PipelineRun.objects.filter(pipeline=pipeline.name, status__in=ACTIVE_STATUSES).first()
        if active is None:
            raise
        raise pipeline.busy_error(
            f"{pipeline.name} run {active.pk} ({active.day}) is {active.status}; try again when it has finished",
            run_id=active.pk,
        ) from None


def pipeline_execute(*, pipeline: Pipeline, day: date, mode: str, trigger: str, **options) -> PipelineRun:
    """Create a run (see ``pipeline_run_create``) and carry it out. The caller holds the lock."""
    with primary_reads():
        run = pipeline_run_create(pipeline=pipeline, day=day, mode=mode, trigger=trigger, **options)
        return pipeline_run_continue(pipeline=pipeline, run=run)


def pipeline_run_continue(*, pipeline: Pipeline, run: PipelineRun) -> PipelineRun:
    """Carry out ``run`` — queued, or resumed after its process died. The caller holds the lock.

    Steps that already succeeded in this run are kept; the others run (again, as a new attempt),
    which is safe because every step is idempotent. Every read is from the primary (the cycle decides
    what to write from what it reads), and every log record inside carries the run's id and LLM run key.
    """
    with primary_reads():
        return _run_continue(pipeline=pipeline, run=run)


def _run_continue(*, pipeline: Pipeline, run: PipelineRun) -> PipelineRun:
    done = set(run.steps.filter(status=StepStatus.SUCCEEDED).values_list("step", flat=True))
    options = dict(run.options)
    if run.steps.exists():
        options["resumed"] = options.get("resumed", 0) + 1
    started = run.started_at if run.status != RunStatus.QUEUED else timezone.now()
    try:
        with transaction.atomic():
            PipelineRun.objects.filter(pk=run.pk).update(
                status=RunStatus.RUNNING, error="", finished_at=None, options=options, started_at=started
            )
    except IntegrityError:
        raise pipeline.busy_error(f"{pipeline.name}: another run became active first", run_id=None) from None
    run.refresh_from_db()
    step = options.get("step")
    selected = pipeline.order() if step is None else [pipeline.step(step)]
    context = StepContext(
        run_id=run.pk,
        day=run.day,
        mode=run.mode,
        force=bool(options.get("force")),
        run_key=f"{pipeline.run_key_prefix}:{run.pk}",
        token_budget=options.get("token_budget"),
    )
    with log_context(pipeline=pipeline.name, pipeline_run=run.pk, run_key=context.run_key):
        logger.info("%s for %s started (%s, %s)", pipeline.name, run.day, run.trigger, run.mode)
        _execute_steps(run=run, selected=selected, context=context, done=done)
        logger.info("%s for %s finished: %s", pipeline.name, run.day, run.status)
    return run


def _execute_steps(*, run: PipelineRun, selected: list[Step], context: StepContext, done: set[str]) -> None:
    failed_root: dict[str, str] = {}  # step that did not succeed -> the failed step behind it
    budget_exhausted = False
    for node in selected:
        if node.name in done:
            continue
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
