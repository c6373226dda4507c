"""Light sleep fanned out over Celery worker processes: one process against four, same night's work.

Run from the repository root, with the machine's PostgreSQL and Redis:

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/anima_bench \\
    CELERY_BROKER_URL=redis://127.0.0.1:6379/10 \\
    python bench/fanout.py [--conversations 100] [--delay 0.5] [--processes 1,4]

A throwaway database (``anima_bench_<pid>`` on DATABASE_URL's server, dropped afterwards) gets one
day of ``--conversations`` conversations per measured worker size (a day each, so no run finds
another's work done). A local stub model (a real HTTP server in this process) answers every
light-sleep call after ``--delay`` seconds. For each size, ``celery -A anima worker -c N`` is
started on a queue of its own, a light-sleep run of that size's day is sent to it, and the wall
time from sending to the run's end is reported, with the number of model calls and the tokens
the run spent against its budget. The baseline is the first size (one process) in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
import zoneinfo
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anima.settings")

import django

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

from anima.core.db import throwaway_database  # noqa: E402
from anima.core.llm.testing import StubLlmServer  # noqa: E402
from anima.core.models import AutoLlmRun  # noqa: E402
from conversations.models import Conversation, Platform, Role  # noqa: E402
from conversations.services import message_create, person_ensure  # noqa: E402
from sleep.models import PipelineRun  # noqa: E402
from sleep.tasks import run_sleep_cycle  # noqa: E402
from sleep.testing import light_sleep_responder  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIRST_DAY = dt.date(2026, 11, 2)
TIMEOUT_SECONDS = 1800
SAID = (
    "我女儿小雨属虎，今年上一年级，最近在学游泳。",
    "I live in Lisbon and I work at a bakery near the river.",
    "我对花生过敏，千万别给我推荐花生酱。",
    "I prefer green tea over coffee these days, it helps me sleep.",
)


def populate(*, day: dt.date, conversations: int, tag: str) -> None:
    at = dt.datetime.combine(day, dt.time(20), tzinfo=zoneinfo.ZoneInfo(settings.ANIMA_TIME_ZONE))
    for index in range(conversations):
        conversation = Conversation.objects.create(
            person=person_ensure(slug=f"{tag}-{index}"),
            platform=Platform.TELEGRAM,
            channel="telegram",
            chat_id=f"{tag}-{index}",
            external_id=f"{tag}-{index}",
            title=f"{tag} {index}",
        )
        said = f"{SAID[index % len(SAID)]} ({tag} {index})"
        message_create(conversation=conversation, role=Role.USER, content=said, created_at=at)
        message_create(conversation=conversation, role=Role.ASSISTANT, content="记住了。", created_at=at)


def database_url() -> str:
    db = connection.settings_dict
    password = f":{quote(db['PASSWORD'])}" if db.get("PASSWORD") else ""
    return f"postgresql://{quote(db['USER'])}{password}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


@contextlib.contextmanager
def worker(*, processes: int, queue: str, stub: StubLlmServer, log) -> Iterator[None]:
    """``celery -A anima worker -c N`` on ``queue``, returned once it is ready, stopped afterwards."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "ANIMA_LLM_PROVIDER": "openai",
        "ANIMA_LLM_BASE_URL": stub.base_url,
        "ANIMA_LLM_MODEL": "stub",
        "ANIMA_EMBEDDINGS": "off",
        "OMP_NUM_THREADS": "1",
    }
    command = [sys.executable, "-m", "celery", "-A", "anima", "worker", "-c", str(processes), "-Q", queue]
    command += ["--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while "ready." not in Path(log.name).read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the worker did not start:\n{Path(log.name).read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def measure(*, processes: int, day: dt.date, stub: StubLlmServer) -> dict:
    queue = f"anima-bench-{os.getpid()}-{processes}"
    with (
        tempfile.NamedTemporaryFile("w+", suffix=".log") as log,
        worker(processes=processes, queue=queue, stub=stub, log=log),
    ):
        calls_before = len(stub.requests)
        kwargs = {"day": day.isoformat(), "trigger": "manual", "step": "light-sleep", "force": True}
        started = time.monotonic()
        run_sleep_cycle.apply_async(kwargs=kwargs, queue=queue)
        deadline = started + TIMEOUT_SECONDS
        while (run := PipelineRun.objects.filter(day=day, finished_at__isnull=False).first()) is None:
            if time.monotonic() > deadline:
                raise SystemExit(f"no finished run after {TIMEOUT_SECONDS}s:\n{Path(log.name).read_text()[-3000:]}")
            time.sleep(0.1)
        seconds = time.monotonic() - started
    if run.status != "succeeded":
        raise SystemExit(f"run {run.pk} {run.status}: {run.error}")
    light = run.steps.get(step="light-sleep")
    tokens = sum(AutoLlmRun.objects.filter(run_key=f"sleep-run:{run.pk}").values_list("total_tokens", flat=True))
    return {
        "processes": processes,
        "seconds": seconds,
        "conversations": len(light.output["conversations"]),
        "fanned_out": "fanout" in light.output,
        "calls": len(stub.requests) - calls_before,
        "tokens": tokens,
        "budget": run.options.get("token_budget"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=100)
    parser.add_argument("--delay", type=float, default=0.5, help="seconds the stub model takes per call")
    parser.add_argument("--processes", default="1,4", help="worker sizes to measure; the first is the baseline")
    args = parser.parse_args()
    if not (settings.DATABASE_URL and settings.CELERY_BROKER_URL and settings.ANIMA_SLEEP_FANOUT):
        raise SystemExit("needs DATABASE_URL (shared with the workers) and a Redis CELERY_BROKER_URL")
    sizes = [int(size) for size in args.processes.split(",")]
    print(f"{args.conversations} conversations, stub model {args.delay} s a call", flush=True)
    print("| worker processes | wall time | speed-up | model calls | tokens / budget |")
    print("|---|---|---|---|---|")
    with throwaway_database(), StubLlmServer(responder=light_sleep_responder, delay=args.delay) as stub:
        results = []
        for index, processes in enumerate(sizes):
            day = FIRST_DAY + dt.timedelta(days=index)
            populate(day=day, conversations=args.conversations, tag=f"p{processes}")
            result = measure(processes=processes, day=day, stub=stub)
            assert result["fanned_out"] and result["conversations"] == args.conversations, result
            results.append(result)
            speed_up = results[0]["seconds"] / result["seconds"]
            print(
                f"| {processes} | {result['seconds']:.1f} s | {speed_up:.2f}× | {result['calls']}"
                f" | {result['tokens']:,} / {result['budget']:,} |",
                flush=True,
            )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
