"""A real Celery worker on the Redis broker runs a sleep cycle against the test database."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import tempfile
import time
import uuid
import zoneinfo
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from django.conf import settings
from django.db import connection

from anima.core.models import AutoLlmRun
from conversations.models import Role
from memory.models import SemanticMemory
from sleep.models import PipelineRun
from sleep.tasks import run_sleep_cycle
from tests.factories import ConversationFactory, MessageFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

DAY = dt.date(2026, 11, 20)
WAIT_SECONDS = 180


def _skip_reason() -> str | None:
    if not settings.DATABASE_URL:
        return "needs DATABASE_URL (PostgreSQL on 127.0.0.1:5432) so that the worker can share the test database"
    if not settings.CELERY_BROKER_URL:
        return "needs CELERY_BROKER_URL (Redis on 127.0.0.1:6379)"
    try:
        redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=1).ping()
    except redis.RedisError as exc:
        return f"the Redis broker {settings.CELERY_BROKER_URL} does not answer: {exc}"
    return None


def _test_database_url() -> str:
    db = connection.settings_dict
    password = f":{quote(db['PASSWORD'])}" if db.get("PASSWORD") else ""
    return f"postgresql://{quote(db['USER'])}{password}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def worker_queue():
    """A solo worker on a queue of its own, so that no other worker takes (or steals) the task."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    queue = f"anima-it-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "DATABASE_URL": _test_database_url(), "DB_CONN_MAX_AGE": "0"}
    command = [sys.executable, "-m", "celery", "-A", "anima", "worker", "--pool=solo", "-c", "1", "-Q", queue]
    command += ["--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info"]
    with tempfile.TemporaryFile("w+") as log:
        worker = subprocess.Popen(
            command, cwd=Path(settings.BASE_DIR), env=env, stdout=log, stderr=subprocess.STDOUT, text=True
        )
        try:
            yield queue, log
        finally:
            worker.terminate()
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()


def _wait_for_finished_run(log) -> PipelineRun:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        run = PipelineRun.objects.filter(day=DAY, finished_at__isnull=False).first()
        if run is not None:
            return run
        time.sleep(1)
    log.seek(0)
    pytest.fail(f"no finished sleep-cycle run after {WAIT_SECONDS}s; worker log:\n{log.read()[-4000:]}")


def test_a_worker_runs_the_whole_cycle_end_to_end(worker_queue):
    queue, log = worker_queue
    conversation = ConversationFactory()
    at = dt.datetime.combine(DAY, dt.time(20), tzinfo=zoneinfo.ZoneInfo(settings.ANIMA_TIME_ZONE))
    MessageFactory(conversation=conversation, role=Role.USER, content="我女儿小雨属虎，今年上一年级。", created_at=at)
    MessageFactory(
        conversation=conversation,
        role=Role.ASSISTANT,
        content="记住了：小雨属虎，上一年级。",
        created_at=at + dt.timedelta(minutes=1),
    )

    run_sleep_cycle.apply_async(kwargs={"day": DAY.isoformat(), "trigger": "manual"}, queue=queue)
    run = _wait_for_finished_run(log)

    steps = dict(run.steps.values_list("step", "status"))
    assert run.status == "succeeded", list(run.steps.values("step", "status", "error"))
    assert len(steps) == 8 and set(steps.values()) == {"succeeded"}
    assert (run.trigger, run.mode) == ("manual", "full")
    # The worker's LLM calls (offline provider) are audited under the run's key.
    assert AutoLlmRun.objects.filter(run_key=f"sleep-run:{run.pk}", purpose="light-sleep.semantic").exists()
    assert SemanticMemory.objects.filter(source_conversation=conversation).exists()
