"""A generic DAG runner whose every node execution is a ``PipelineStepRun`` row.

Steps run one at a time in topological order (declaration order among ready steps). Branches
could run concurrently, but sequential execution keeps each step on the caller's database
connection and transaction, and the cycle is dominated by LLM latency inside steps anyway.
Steps are not wrapped in a transaction: each step commits its own work, so the audit rows of
its LLM calls survive a failure. Every step is idempotent, so a run whose process died is carried
on (``pipeline_run_continue``) by re-running what it had not finished; a run nobody works on is
closed (``pipeline_runs_reap``), never left "running".

A failed step marks its transitive dependants ``skipped``; independent steps go on. A step that
could do its work for some items only (one conversation of the night failed) says so in its
output's ``failures``: it is ``partial``, its dependants run on what it did, and the run is
``partial`` with every failure in its error.

A step declared with a ``Fanout`` may instead be fanned out (``fan_out=True``, under a broker): the
run stops at that step, waiting, while one task per item carries out the item's work
(``pipeline_item_run``, one ``PipelineItemRun`` row each); the last of them triggers the join
(``pipeline_fanout_join``), which does the step's shared work and carries the run on. No process
holds the lock meanwhile: a waiting run counts as alive while its items make progress.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta

from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from anima.core.db import advisory_lock, advisory_lock_key, primary_reads
from anima.core.llm import LlmBudgetExceeded, LlmBudgetReserved
from anima.core.logs import log_context
from sleep.context import StepContext
from sleep.models import (
    ACTIVE_STATUSES,
    DONE_STATUSES,
    PipelineItemRun,
    PipelineRun,
    PipelineStepRun,
    RunStatus,
    StepStatus,
)
from sleep.step_runs import BUDGET_EXHAUSTED, step_attempt_next, step_work_record

logger = logging.getLogger(__name__)

StepFunction = Callable[[StepContext], dict]


class PipelineError(Exception):
    """A pipeline request that cannot be carried out; the message says why."""


class PipelineBusy(PipelineError):
    """Another run of the same pipeline is active; ``run_id`` names it when known."""

    def __init__(self, message: str, *, run_id: int | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id


class PipelineItemBusy(PipelineError):
    """Another task is carrying out the same item right now."""


@dataclass(frozen=True)
class Fanout:
    """How a step splits into independent items, each carried out by a task of its own, then joined.

    Dotted paths: ``items(ctx) -> list[int]``; ``item(ctx, item) -> dict``, the item's own work only,
    safe to run twice; ``join(ctx, outputs) -> dict``, the shared work once every item is done.
    """

    items: str
    item: str
    join: str


@dataclass(frozen=True)
class Step:
    name: str
    # A callable, or the dotted path of one (imported when the step runs).
    func: StepFunction | str
    depends_on: tuple[str, ...] = ()
    fanout: Fanout | None = None

    def resolve(self) -> StepFunction:
        return import_string(self.func) if isinstance(self.func, str) else self.func


@dataclass(frozen=True)
class Pipeline:
    name: str
    steps: tuple[Step, ...]
    busy_error: type[PipelineBusy] = PipelineBusy
    # AutoLlmRun.run_key of a run's LLM calls is "<prefix>:<run id>".
    run_key_prefix: str = "pipeline-run"
    # A run waiting for a fan-out's items is closed as interrupted when none has started or finished this long.
    fanout_stall: timedelta = timedelta(hours=3)
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
    """Hold the pipeline's advisory lock, or raise ``pipeline.busy_error`` at once."""
    with advisory_lock(f"pipeline:{pipeline.name}") as acquired:
        if not acquired:
            active = PipelineRun.objects.filter(pipeline=pipeline.name, status__in=ACTIVE_STATUSES).first()
            raise pipeline.busy_error(
                f"{pipeline.name} is already running"
                + (f" (run {active.pk})" if active else "")
                + "; try again when the current run has finished",
                run_id=active.pk if active else None,
            )
        _close_interrupted_runs(pipeline=pipeline)
        yield


INTERRUPTED = "interrupted: the process ended before the run finished"
# Whether the pipeline's advisory lock is held right now, by any session of this database.
_LOCK_FREE = (
    "NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND classid::bigint = %(hi)s AND objid::bigint = %(lo)s)"
)


# Whether run r waits for a fan-out whose items started or finished lately.
_FANOUT_ALIVE = (
    "EXISTS (SELECT 1 FROM pipeline_step_run f WHERE f.run_id = r.id AND f.status = 'running'"
    " AND f.output -> 'fanout' IS NOT NULL AND GREATEST(f.started_at,"
    " (SELECT max(GREATEST(i.started_at, i.finished_at)) FROM pipeline_item_run i WHERE i.step_run_id = f.id))"
    " > %(stalled)s)"
)


def _close_interrupted_runs(*, pipeline: Pipeline, unless_locked: bool = False) -> int:
    """Mark runs still ``running`` (and their running steps) failed: nobody works on them.

    Holding the lock, every running run is a dead process's, unless it waits for a fan-out whose
    items make progress. Without the lock (``unless_locked``), its absence is checked in the same
    statement, so a run that a worker is starting is never touched. Returns how many runs were closed.
    """
    key = advisory_lock_key(f"pipeline:{pipeline.name}")
    now = timezone.now()
    params = {"pipeline": pipeline.name, "error": INTERRUPTED, "now": now, "stalled": now - pipeline.fanout_stall}
    params.update(hi=(key >> 32) & 0xFFFFFFFF, lo=key & 0xFFFFFFFF)
    condition = f" AND NOT {_FANOUT_ALIVE}" + (f" AND {_LOCK_FREE}" if unless_locked else "")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE pipeline_step_run s SET status = 'failed', error = %(error)s, finished_at = %(now)s"
            " FROM pipeline_run r WHERE s.run_id = r.id AND r.pipeline = %(pipeline)s AND s.status = 'running'"
            + condition,
            params,
        )
        cursor.execute(
            "UPDATE pipeline_run r SET status = 'failed', error = %(error)s, finished_at = %(now)s"
            " WHERE r.pipeline = %(pipeline)s AND r.status = 'running'" + condition,
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


def run_interrupted(run: PipelineRun) -> bool:
    """Closed because the process working on it died (``_close_interrupted_runs``), not because it failed."""
    return run.status == RunStatus.FAILED and run.error.startswith(INTERRUPTED)


def run_resumable(run: PipelineRun) -> bool:
    """Queued, or left unfinished by a process that died: its task (redelivered) may carry it on."""
    return run.status in ACTIVE_STATUSES or run_interrupted(run)


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


def pipeline_execute(
    *, pipeline: Pipeline, day: date, mode: str, trigger: str, fan_out: bool = False, **options
) -> PipelineRun:
    """Create a run (see ``pipeline_run_create``) and carry it out. The caller holds the lock."""
    with primary_reads():
        run = pipeline_run_create(pipeline=pipeline, day=day, mode=mode, trigger=trigger, **options)
        return pipeline_run_continue(pipeline=pipeline, run=run, fan_out=fan_out)


def pipeline_run_continue(*, pipeline: Pipeline, run: PipelineRun, fan_out: bool = False) -> PipelineRun:
    """Carry out ``run`` — queued, or resumed after its process died. The caller holds the lock.

    Steps that already succeeded in this run are kept; the others run (again, as a new attempt),
    which is safe because every step is idempotent. With ``fan_out`` the run stops, still running, at
    a step declared with a ``Fanout``: ``pipeline_fanout_waiting`` then names the items to hand out.
    Every read is from the primary (the cycle decides what to write from what it reads), and every
    log record inside carries the run's id and LLM run key.
    """
    with primary_reads():
        return _run_continue(pipeline=pipeline, run=run, fan_out=fan_out)


def _run_continue(*, pipeline: Pipeline, run: PipelineRun, fan_out: bool) -> PipelineRun:
    done = _done_steps(run)
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
    context = _context(pipeline=pipeline, run=run)
    with log_context(pipeline=pipeline.name, pipeline_run=run.pk, run_key=context.run_key):
        logger.info("%s for %s started (%s, %s)", pipeline.name, run.day, run.trigger, run.mode)
        _execute_steps(pipeline=pipeline, run=run, context=context, done=done, fan_out=fan_out)
    return run


def _done_steps(run: PipelineRun) -> set[str]:
    return set(run.steps.filter(status__in=DONE_STATUSES).values_list("step", flat=True))


def _context(*, pipeline: Pipeline, run: PipelineRun) -> StepContext:
    return StepContext(
        run_id=run.pk,
        day=run.day,
        mode=run.mode,
        force=bool(run.options.get("force")),
        run_key=f"{pipeline.run_key_prefix}:{run.pk}",
        token_budget=run.options.get("token_budget"),
    )


def _selected(*, pipeline: Pipeline, run: PipelineRun) -> list[Step]:
    step = run.options.get("step")
    return pipeline.order() if step is None else [pipeline.step(step)]


def _execute_steps(
    *,
    pipeline: Pipeline,
    run: PipelineRun,
    context: StepContext,
    done: set[str],
    fan_out: bool,
    failed_root: dict[str, str] | None = None,
) -> None:
    """Run the selected steps not ``done``, then close the run; or stop at a step to fan out, the run still running."""
    failed_root = dict(failed_root or {})  # step that did not succeed -> the failed step behind it
    for node in _selected(pipeline=pipeline, run=run):
        if node.name in done or node.name in failed_root:
            continue
        blocked = next((dep for dep in node.depends_on if dep in failed_root), None)
        if blocked is not None:
            _record_skip(run=run, step=node, blocked_by=blocked, failed_step=failed_root[blocked])
            failed_root[node.name] = failed_root[blocked]
            continue
        with log_context(step=node.name):
            if fan_out and node.fanout is not None:
                _fanout_start(run=run, step=node, context=context, failed_root=failed_root)
                return
            row = _execute(run=run, step=node, context=context)
        if row.status == StepStatus.FAILED:
            failed_root[node.name] = node.name
    failed = [name for name, root in failed_root.items() if name == root]
    partial = "; ".join(f"{row.step}: {row.error}" for row in run.steps.filter(status=StepStatus.PARTIAL))
    run.status = RunStatus.FAILED if failed else RunStatus.PARTIAL if partial else RunStatus.SUCCEEDED
    budget_exhausted = run.steps.filter(
        step__in=failed, status=StepStatus.FAILED, error__startswith=BUDGET_EXHAUSTED
    ).exists()
    if budget_exhausted:
        run.error = f"{BUDGET_EXHAUSTED}; failed steps: {', '.join(failed)}"
    elif failed:
        run.error = f"failed steps: {', '.join(failed)}"
    if partial:
        run.error = f"{run.error}; partial: {partial}" if run.error else f"partial: {partial}"
    run.finished_at = timezone.now()
    run.save(update_fields=["status", "error", "finished_at"])
    logger.info("%s for %s finished: %s", pipeline.name, run.day, run.status)


def _fanout_start(
    *, run: PipelineRun, step: Step, context: StepContext, failed_root: dict[str, str]
) -> PipelineStepRun:
    """The running row of ``step``'s fan-out: the one a resumed run was waiting for, else a new attempt.

    It keeps the steps that failed so far, so that the join goes on where this left off.
    """
    row = _fanout_row(run=run)
    if row is None:
        items = list(import_string(step.fanout.items)(context))
        row = PipelineStepRun.objects.create(
            run=run,
            step=step.name,
            status=StepStatus.RUNNING,
            attempt=step_attempt_next(pipeline_name=run.pipeline, day=run.day, step=step.name),
            output={"fanout": {"items": items, "failed": failed_root}},
            started_at=timezone.now(),
        )
    logger.info("step %s fanned out over %d items", step.name, len(row.output["fanout"]["items"]))
    return row


def _fanout_row(*, run: PipelineRun) -> PipelineStepRun | None:
    return run.steps.filter(status=StepStatus.RUNNING, output__has_key="fanout").order_by("-id").first()


def pipeline_fanout_waiting(*, run: PipelineRun) -> tuple[PipelineStepRun, list[int]] | None:
    """The fan-out ``run`` waits for and its items not done yet (in flight, lost, or never started); None if none."""
    row = _fanout_row(run=run) if run.status == RunStatus.RUNNING else None
    if row is None:
        return None
    finished = set(row.items.exclude(status=StepStatus.RUNNING).values_list("item", flat=True))
    return row, [item for item in row.output["fanout"]["items"] if item not in finished]


def pipeline_item_run(
    *, pipeline: Pipeline, step_run_id: int, item: int, wait_for_budget: bool = False
) -> PipelineItemRun | None:
    """Carry out one item of a fan-out, once: an item already done is returned as it is.

    None when its run no longer waits for it (finished, or closed). Raises ``PipelineItemBusy``
    while another task carries out the same item, and with ``wait_for_budget`` while the rest of
    the token budget is reserved by other items' calls in flight (else the item fails, budget
    exhausted). A task whose worker died left its row running, and the next delivery does the
    item again (its work is idempotent).
    """
    with primary_reads():
        row = PipelineStepRun.objects.select_related("run").filter(pk=step_run_id, status=StepStatus.RUNNING).first()
        if row is None or row.run.status != RunStatus.RUNNING or "fanout" not in row.output:
            return None
        step = pipeline.step(row.step)
        with advisory_lock(f"item:{step_run_id}:{item}") as acquired:
            if not acquired:
                raise PipelineItemBusy(f"item {item} of {row.step} (run {row.run_id}) is being carried out")
            ledger, created = PipelineItemRun.objects.get_or_create(step_run=row, item=item)
            if ledger.status != StepStatus.RUNNING:
                return ledger
            if not created:
                ledger.started_at = timezone.now()
                ledger.save(update_fields=["started_at"])
            context = _context(pipeline=pipeline, run=row.run)
            work = import_string(step.fanout.item)
            with log_context(pipeline=pipeline.name, pipeline_run=row.run_id, run_key=context.run_key, step=row.step):
                try:
                    step_work_record(
                        ledger,
                        f"{step.name} item {item}",
                        lambda: work(context, item),
                        passes=(LlmBudgetReserved,) if wait_for_budget else (),
                    )
                except LlmBudgetReserved as exc:
                    raise PipelineItemBusy(f"item {item} of {row.step} waits for budget: {exc}") from None
            return ledger


def pipeline_fanout_join(*, pipeline: Pipeline, run: PipelineRun) -> PipelineRun:
    """Finish the fanned-out step ``run`` waits for, once every item is done, and carry the run on.

    The caller holds the lock. Items not done yet (``pipeline_fanout_waiting``) leave the run
    waiting. A run that waits for nothing is a dead process's (a join killed after the fan-out, say
    mid deep sleep): running, or already closed as interrupted (taking the lock closes it), it is
    carried on, so that the join's redelivery finishes the night.
    """
    with primary_reads():
        run.refresh_from_db()
        if run.status != RunStatus.RUNNING and not run_interrupted(run):
            return run
        waiting = pipeline_fanout_waiting(run=run)
        if waiting is None:
            return _run_continue(pipeline=pipeline, run=run, fan_out=True)
        row, pending = waiting
        if pending:
            return run
        context = _context(pipeline=pipeline, run=run)
        join = import_string(pipeline.step(row.step).fanout.join)
        by_item = {ledger.item: ledger for ledger in row.items.all()}
        ledgers = [by_item[item] for item in row.output["fanout"]["items"]]
        with log_context(pipeline=pipeline.name, pipeline_run=run.pk, run_key=context.run_key, step=row.step):
            fanout = row.output["fanout"]
            step_work_record(
                row, f"step {row.step}", lambda: join(context, _items_done(ledgers)), keep={"fanout": fanout}
            )
            done = _done_steps(run)
            failed_root = dict(fanout["failed"])
            if row.status == StepStatus.FAILED:
                failed_root[row.step] = row.step
            _execute_steps(
                pipeline=pipeline, run=run, context=context, done=done, fan_out=True, failed_root=failed_root
            )
        return run


def _items_done(items: list[PipelineItemRun]) -> list[dict]:
    """The items' outputs, or the error of the step: the first item that failed, and how many did."""
    failed = [ledger for ledger in items if ledger.status == StepStatus.FAILED]
    if not failed:
        return [ledger.output for ledger in items]
    summary = f"{len(failed)} of {len(items)} items failed; item {failed[0].item}: {failed[0].error}"
    if any(ledger.error.startswith(BUDGET_EXHAUSTED) for ledger in failed):
        raise LlmBudgetExceeded(summary)
    raise FanoutItemsFailed(summary)


class FanoutItemsFailed(PipelineError):
    """Some items of a fanned-out step failed: its join does not run."""


def _check_dependencies(*, pipeline: Pipeline, day: date, step: Step) -> None:
    succeeded = set(
        PipelineStepRun.objects.filter(
            run__pipeline=pipeline.name, run__day=day, step__in=step.depends_on, status__in=DONE_STATUSES
        ).values_list("step", flat=True)
    )
    missing = [name for name in step.depends_on if name not in succeeded]
    if missing:
        raise PipelineError(
            f"cannot run {step.name} for {day}: {', '.join(missing)} has not succeeded for that day "
            f"(run it first, or use force to skip the dependency check)"
        )


def _record_skip(*, run: PipelineRun, step: Step, blocked_by: str, failed_step: str) -> None:
    now = timezone.now()
    PipelineStepRun.objects.create(
        run=run,
        step=step.name,
        status=StepStatus.SKIPPED,
        attempt=step_attempt_next(pipeline_name=run.pipeline, day=run.day, step=step.name),
        output={"skipped_reason": "dependency_failed", "blocked_by": blocked_by, "failed_step": failed_step},
        started_at=now,
        finished_at=now,
    )


def _execute(*, run: PipelineRun, step: Step, context: StepContext) -> PipelineStepRun:
    row = PipelineStepRun.objects.create(
        run=run,
        step=step.name,
        status=StepStatus.RUNNING,
        attempt=step_attempt_next(pipeline_name=run.pipeline, day=run.day, step=step.name),
        started_at=timezone.now(),
    )
    step_work_record(row, f"step {step.name}", lambda: step.resolve()(context))
    return row
