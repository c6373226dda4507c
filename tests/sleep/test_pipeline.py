from __future__ import annotations

import datetime as dt
import logging

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from anima.core.db import REPLICA, replica_reads
from anima.core.llm import LlmBudgetExceeded, LlmBudgetReserved, llm_json
from anima.core.llm.schema import schema_object, schema_string
from anima.core.llm.testing import scripted
from memory.models import SemanticMemory
from memory.selectors import memory_recall
from sleep.context import StepContext
from sleep.models import PipelineItemRun, PipelineRun, PipelineStepRun
from sleep.pipeline import (
    Fanout,
    Pipeline,
    PipelineBusy,
    PipelineError,
    PipelineItemBusy,
    Step,
    pipeline_execute,
    pipeline_fanout_join,
    pipeline_fanout_waiting,
    pipeline_item_run,
    pipeline_lock,
    pipeline_runs_reap,
)
from tests.factories import SemanticMemoryFactory

DAY = dt.date(2026, 11, 20)


class Recorder:
    """Fake step functions that record the contexts they ran with."""

    def __init__(self) -> None:
        self.contexts: dict[str, StepContext] = {}
        self.broken: set[str] = set()

    def step(self, name: str):
        def run(ctx: StepContext) -> dict:
            self.contexts[name] = ctx
            if name in self.broken:
                raise RuntimeError(f"{name} hit a wall")
            return {"wrote": [name], "day": ctx.day}

        return run


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def pipeline(recorder) -> Pipeline:
    # a ─► b ─► c ─► d      a ─► e
    return Pipeline(
        name="test-pipeline",
        steps=(
            Step("a", recorder.step("a")),
            Step("b", recorder.step("b"), ("a",)),
            Step("c", recorder.step("c"), ("b",)),
            Step("d", recorder.step("d"), ("c",)),
            Step("e", recorder.step("e"), ("a",)),
        ),
    )


def execute(pipeline: Pipeline, **overrides) -> PipelineRun:
    return pipeline_execute(**{"pipeline": pipeline, "day": DAY, "mode": "full", "trigger": "manual", **overrides})


def statuses(run: PipelineRun) -> dict[str, str]:
    return dict(run.steps.values_list("step", "status"))


def test_a_successful_run_records_every_step_with_its_output(pipeline, recorder):
    run = execute(pipeline, token_budget=5000)

    assert run.status == "succeeded" and run.error == "" and run.finished_at
    assert list(run.steps.values_list("step", flat=True)) == ["a", "b", "c", "d", "e"]
    rows = list(run.steps.all())
    assert all(row.status == "succeeded" and row.attempt == 1 and row.duration_seconds >= 0 for row in rows)
    assert rows[0].output == {"wrote": ["a"], "day": "2026-11-20"}
    assert recorder.contexts["e"] == StepContext(
        run_id=run.pk, day=DAY, mode="full", force=False, run_key=f"pipeline-run:{run.pk}", token_budget=5000
    )


def test_a_failed_step_skips_its_dependants_while_siblings_go_on(pipeline, recorder):
    recorder.broken.add("b")

    run = execute(pipeline)

    assert statuses(run) == {"a": "succeeded", "b": "failed", "c": "skipped", "d": "skipped", "e": "succeeded"}
    assert run.status == "failed" and run.error == "failed steps: b"
    failed = run.steps.get(step="b")
    assert failed.error == "RuntimeError: b hit a wall"
    assert run.steps.get(step="d").output == {
        "skipped_reason": "dependency_failed",
        "blocked_by": "c",
        "failed_step": "b",
    }
    assert "c" not in recorder.contexts and "d" not in recorder.contexts


def test_a_step_that_did_part_of_its_work_is_partial_its_dependants_run_and_the_run_says_what_failed(pipeline):
    def part(ctx: StepContext) -> dict:
        return {"done": [1, 3], "failures": [{"item": 2, "error": "LlmInvalidOutput: not JSON"}]}

    partial = Pipeline(name="test-pipeline", steps=(pipeline.step("a"), Step("b", part, ("a",)), pipeline.step("c")))

    run = execute(partial)
    single = execute(partial, step="c")  # a partial dependency counts as done

    assert statuses(run) == {"a": "succeeded", "b": "partial", "c": "succeeded"}
    assert run.status == "partial" and run.error == "partial: b: item 2: LlmInvalidOutput: not JSON"
    assert run.steps.get(step="b").error == "item 2: LlmInvalidOutput: not JSON"
    assert single.status == "succeeded"


def test_a_failed_step_beside_a_partial_one_fails_the_run_and_names_both(pipeline, recorder):
    recorder.broken.add("e")
    partial = Pipeline(
        name="test-pipeline",
        steps=(
            pipeline.step("a"),
            Step("b", lambda ctx: {"failures": [{"item": 2, "error": "boom"}]}, ("a",)),
            pipeline.step("e"),
        ),
    )

    run = execute(partial)

    assert statuses(run) == {"a": "succeeded", "b": "partial", "e": "failed"}
    assert run.status == "failed" and run.error == "failed steps: e; partial: b: item 2: boom"


def test_failures_without_a_reason_fail_the_step(pipeline):
    run = execute(Pipeline(name="test-pipeline", steps=(Step("a", lambda ctx: {"failures": [{"item": 2}]}),)))

    assert run.status == "failed"
    assert run.steps.get().error == "TypeError: step a: failures must be a list of objects, each with an error"


def test_a_step_that_returns_no_dict_fails(recorder):
    pipeline = Pipeline(name="test-pipeline", steps=(Step("a", lambda ctx: ["not", "a", "dict"]),))

    run = execute(pipeline)

    assert run.status == "failed"
    assert run.steps.get().error == "TypeError: step a returned list, expected a dict"


def test_retrying_a_step_adds_a_row_with_the_next_attempt(pipeline, recorder):
    recorder.broken.add("b")
    first = execute(pipeline)
    recorder.broken.clear()

    retry = execute(pipeline, step="b")
    again = execute(pipeline, step="b")

    assert first.steps.get(step="b").status == "failed"
    assert [(row.step, row.attempt, row.status) for row in retry.steps.all()] == [("b", 2, "succeeded")]
    assert again.steps.get().attempt == 3
    assert retry.options["step"] == "b" and retry.status == "succeeded"
    assert PipelineStepRun.objects.filter(step="b").count() == 3


def test_a_step_whose_dependencies_have_not_succeeded_is_refused_unless_forced(pipeline, recorder):
    recorder.broken.add("b")
    execute(pipeline)

    with pytest.raises(PipelineError, match=r"cannot run c for 2026-11-20: b has not succeeded"):
        execute(pipeline, step="c")
    assert PipelineRun.objects.count() == 1

    forced = execute(pipeline, step="c", force=True)
    assert statuses(forced) == {"c": "succeeded"}
    assert recorder.contexts["c"].force is True


def test_dependencies_may_have_succeeded_in_an_earlier_run_of_the_same_day(pipeline, recorder):
    execute(pipeline, step="a", force=True)

    run = execute(pipeline, step="b")

    assert statuses(run) == {"b": "succeeded"}
    with pytest.raises(PipelineError, match="a has not succeeded"):
        execute(pipeline, step="b", day=DAY + dt.timedelta(days=1))


def test_unknown_steps_and_broken_dags_are_refused(pipeline):
    with pytest.raises(PipelineError, match="unknown step 'z' of test-pipeline; one of: a, b, c, d, e"):
        execute(pipeline, step="z")
    with pytest.raises(ValueError, match="dependency cycle"):
        Pipeline(name="loop", steps=(Step("x", print, ("y",)), Step("y", print, ("x",))))
    with pytest.raises(ValueError, match="depends on unknown"):
        Pipeline(name="dangling", steps=(Step("x", print, ("nowhere",)),))


def test_an_exhausted_token_budget_fails_the_step_and_says_so_on_the_run():
    def chatty(ctx: StepContext) -> dict:
        for _ in range(3):
            llm_json(
                purpose="dream",
                instructions="dream",
                payload={"anchors": ["x" * 400]},
                schema=schema_object({"text": schema_string()}, required=["text"]),
                run_key=ctx.run_key,
                token_budget=ctx.token_budget,
            )
        return {"dreams": 3}

    pipeline = Pipeline(
        name="test-pipeline",
        steps=(Step("chatty", chatty), Step("after", lambda ctx: {}, ("chatty",)), Step("other", lambda ctx: {})),
    )
    with scripted({"dream": [{"text": "a"}, {"text": "b"}, {"text": "c"}]}) as provider:
        run = execute(pipeline, token_budget=150)

    # ~130 tokens a call: the second starts under the budget, the third finds it spent and is not sent.
    assert len(provider.calls) == 2
    assert run.status == "failed"
    assert run.error == "token budget exhausted; failed steps: chatty"
    chatty_row = run.steps.get(step="chatty")
    assert chatty_row.error.startswith("token budget exhausted: ")
    assert statuses(run) == {"chatty": "failed", "after": "skipped", "other": "succeeded"}


def test_budget_errors_raised_directly_by_a_step_count_the_same(recorder):
    def spent(ctx: StepContext) -> dict:
        raise LlmBudgetExceeded("no tokens left")

    run = execute(Pipeline(name="test-pipeline", steps=(Step("a", spent),)))

    assert run.error.startswith("token budget exhausted")


def test_a_second_run_while_the_lock_is_held_is_refused_at_once(pipeline):
    with pipeline_lock(pipeline=pipeline):
        with pytest.raises(PipelineBusy, match="test-pipeline is already running"):
            with pipeline_lock(pipeline=pipeline):
                pass
    with pipeline_lock(pipeline=pipeline):  # released again afterwards
        pass


def test_runs_left_running_by_a_dead_process_are_closed_when_the_lock_is_next_taken(pipeline):
    dead = PipelineRun.objects.create(pipeline="test-pipeline", day=DAY)
    dead.steps.create(step="a", status="running")
    other = PipelineRun.objects.create(pipeline="another-pipeline", day=DAY)

    with pipeline_lock(pipeline=pipeline):
        pass

    dead.refresh_from_db()
    assert dead.status == "failed" and dead.error.startswith("interrupted") and dead.finished_at
    assert dead.steps.get().status == "failed"
    other.refresh_from_db()
    assert other.status == "running"  # guarded by its own lock


def test_every_log_record_of_a_run_carries_its_ids_so_a_night_can_be_traced(json_logs):
    def thinking(ctx: StepContext) -> dict:
        llm_json(
            purpose="dream",
            instructions="dream",
            payload={},
            schema=schema_object({"text": schema_string()}, required=["text"]),
            run_key=ctx.run_key,
        )
        logging.getLogger("sleep.steps.test").warning("half way")
        return {}

    pipeline = Pipeline(name="test-pipeline", steps=(Step("thinking", thinking), Step("other", lambda ctx: {})))
    with scripted({"dream": [{"text": "a"}]}):
        run = execute(pipeline)
    logging.getLogger("sleep.steps.test").warning("after the run")

    records = json_logs()
    ids = {"pipeline": "test-pipeline", "pipeline_run": run.pk, "run_key": f"pipeline-run:{run.pk}"}
    in_run = [record for record in records if record.get("pipeline_run") == run.pk]
    assert [record["message"] for record in records if record not in in_run] == ["after the run"]
    assert all(record.items() >= ids.items() for record in in_run)
    by_message = {record["message"].split(":")[0]: record for record in in_run}
    assert by_message["llm call dream"]["step"] == "thinking"
    assert by_message["llm call dream"]["llm_purpose"] == "dream"
    assert by_message["half way"]["step"] == "thinking"
    assert by_message["step other succeeded in 0.0 s"]["step"] == "other"
    assert {"test-pipeline for 2026-11-20 started (manual, full)", "test-pipeline for 2026-11-20 finished"} <= set(
        by_message
    )


def test_the_cycle_reads_the_primary_even_when_its_caller_asked_for_the_replica(replica):
    SemanticMemoryFactory(content="Leo 的邮箱是 leo@example.com")
    found: dict[str, list] = {}

    def recalling(ctx: StepContext) -> dict:
        found["recall"] = memory_recall(query="邮箱")
        found["memories"] = list(SemanticMemory.objects.values_list("content", flat=True))
        return {}

    with CaptureQueriesContext(connections[REPLICA]) as on_replica, replica_reads():
        run = execute(Pipeline(name="test-pipeline", steps=(Step("recalling", recalling),)))
    assert statuses(run) == {"recalling": "succeeded"}
    assert len(found["recall"]) == 1 and found["memories"] == ["Leo 的邮箱是 leo@example.com"]
    assert on_replica.captured_queries == []


# A fanned-out step "spread" over items 1, 2, 3 between "a" and "after"; what each part did is recorded here.
FANOUT_LOG: list[tuple] = []
FANOUT_BROKEN_ITEMS: set[int] = set()
FANOUT_WAITING_ITEMS: set[int] = set()


def spread_items(ctx: StepContext) -> list[int]:
    return [1, 2, 3]


def spread_item(ctx: StepContext, item: int) -> dict:
    FANOUT_LOG.append(("item", item))
    if item in FANOUT_BROKEN_ITEMS:
        raise RuntimeError(f"item {item} hit a wall")
    if item in FANOUT_WAITING_ITEMS:
        raise LlmBudgetReserved(f"token budget exhausted: item {item} found the rest reserved")
    return {"item": item, "squared": item * item}


def spread_join(ctx: StepContext, outputs: list[dict]) -> dict:
    FANOUT_LOG.append(("join", [output["item"] for output in outputs]))
    return {"total": sum(output["squared"] for output in outputs)}


def spread_whole(ctx: StepContext) -> dict:
    return spread_join(ctx, [spread_item(ctx, item) for item in spread_items(ctx)])


@pytest.fixture
def fanned(recorder) -> Pipeline:
    FANOUT_LOG.clear()
    FANOUT_BROKEN_ITEMS.clear()
    FANOUT_WAITING_ITEMS.clear()
    here = __name__
    spread = Fanout(items=f"{here}.spread_items", item=f"{here}.spread_item", join=f"{here}.spread_join")
    return Pipeline(
        name="test-pipeline",
        steps=(
            Step("a", recorder.step("a")),
            Step("spread", f"{here}.spread_whole", ("a",), fanout=spread),
            Step("after", recorder.step("after"), ("spread",)),
        ),
    )


def items_run(pipeline: Pipeline, run: PipelineRun) -> None:
    row, pending = pipeline_fanout_waiting(run=run)
    for item in pending:
        pipeline_item_run(pipeline=pipeline, step_run_id=row.pk, item=item)


def test_a_fanned_out_step_waits_for_its_items_and_its_join_carries_the_run_on(fanned, recorder):
    run = execute(fanned, fan_out=True)

    assert run.status == "running" and statuses(run) == {"a": "succeeded", "spread": "running"}
    _, pending = pipeline_fanout_waiting(run=run)
    assert pending == [1, 2, 3] and "after" not in recorder.contexts
    items_run(fanned, run)
    assert pipeline_fanout_waiting(run=run)[1] == []
    run = pipeline_fanout_join(pipeline=fanned, run=run)

    assert run.status == "succeeded" and statuses(run) == {
        "a": "succeeded",
        "spread": "succeeded",
        "after": "succeeded",
    }
    assert run.steps.get(step="spread").output["total"] == 14
    assert FANOUT_LOG == [("item", 1), ("item", 2), ("item", 3), ("join", [1, 2, 3])]
    assert pipeline_fanout_waiting(run=run) is None


def test_an_item_delivered_twice_is_done_once_and_an_early_join_waits(fanned):
    run = execute(fanned, fan_out=True)
    row, _ = pipeline_fanout_waiting(run=run)
    pipeline_item_run(pipeline=fanned, step_run_id=row.pk, item=1)
    pipeline_item_run(pipeline=fanned, step_run_id=row.pk, item=1)

    run = pipeline_fanout_join(pipeline=fanned, run=run)

    assert FANOUT_LOG == [("item", 1)]
    assert run.status == "running" and pipeline_fanout_waiting(run=run)[1] == [2, 3]


def test_an_item_left_running_by_a_dead_worker_is_done_again(fanned):
    run = execute(fanned, fan_out=True)
    row, _ = pipeline_fanout_waiting(run=run)
    PipelineItemRun.objects.create(step_run=row, item=2)  # its worker died mid-item

    assert pipeline_fanout_waiting(run=run)[1] == [1, 2, 3]
    items_run(fanned, run)

    assert sorted(FANOUT_LOG) == [("item", 1), ("item", 2), ("item", 3)]
    assert set(row.items.values_list("status", flat=True)) == {"succeeded"}


def test_a_failed_item_fails_the_step_without_its_join_and_skips_its_dependants(fanned, recorder):
    FANOUT_BROKEN_ITEMS.add(2)
    run = execute(fanned, fan_out=True)
    items_run(fanned, run)

    run = pipeline_fanout_join(pipeline=fanned, run=run)

    assert run.status == "failed" and run.error == "failed steps: spread"
    assert statuses(run) == {"a": "succeeded", "spread": "failed", "after": "skipped"}
    assert run.steps.get(step="spread").error == (
        "FanoutItemsFailed: 1 of 3 items failed; item 2: RuntimeError: item 2 hit a wall"
    )
    assert ("join", [1, 2, 3]) not in FANOUT_LOG


def test_without_fan_out_the_same_step_runs_whole_in_process(fanned, recorder):
    run = execute(fanned)

    assert run.status == "succeeded" and run.steps.get(step="spread").output == {"total": 14}
    assert FANOUT_LOG == [("item", 1), ("item", 2), ("item", 3), ("join", [1, 2, 3])]
    assert not PipelineItemRun.objects.exists()


def test_a_waiting_run_stays_alive_while_its_items_progress_and_is_closed_once_they_stall(fanned):
    run = execute(fanned, fan_out=True)
    row, _ = pipeline_fanout_waiting(run=run)

    with pipeline_lock(pipeline=fanned):  # taking the lock closes runs nobody works on...
        pass
    assert pipeline_runs_reap(pipeline=fanned, queued_expire=dt.timedelta(minutes=10)) == 0
    run.refresh_from_db()
    assert run.status == "running"  # ...but this one's items are still to come

    long_ago = timezone.now() - fanned.fanout_stall - dt.timedelta(minutes=1)
    PipelineStepRun.objects.filter(pk=row.pk).update(started_at=long_ago)
    PipelineItemRun.objects.create(step_run=row, item=1, started_at=long_ago)
    assert pipeline_runs_reap(pipeline=fanned, queued_expire=dt.timedelta(minutes=10)) == 1
    run.refresh_from_db()
    assert run.status == "failed" and run.error.startswith("interrupted")
    assert pipeline_item_run(pipeline=fanned, step_run_id=row.pk, item=2) is None  # a late item does nothing


def test_an_item_waits_while_other_calls_hold_the_rest_of_the_budget_and_fails_when_told_not_to(fanned):
    FANOUT_WAITING_ITEMS.add(2)
    run = execute(fanned, fan_out=True)
    row, _ = pipeline_fanout_waiting(run=run)

    with pytest.raises(PipelineItemBusy, match="waits for budget"):
        pipeline_item_run(pipeline=fanned, step_run_id=row.pk, item=2, wait_for_budget=True)
    assert pipeline_fanout_waiting(run=run)[1] == [1, 2, 3]  # still to do
    last = pipeline_item_run(pipeline=fanned, step_run_id=row.pk, item=2)

    assert last.status == "failed" and last.error.startswith("token budget exhausted")
