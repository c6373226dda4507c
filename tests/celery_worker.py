"""Real Celery workers for the integration tests: a process on the machine's Redis broker, on a queue of its own,
against the test database."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from django.conf import settings
from django.db import connection


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


def worker_database_url() -> str:
    """The test database's URL, for a worker process or a second connection."""
    db = connection.settings_dict
    password = f":{quote(db['PASSWORD'])}" if db.get("PASSWORD") else ""
    return f"postgresql://{quote(db['USER'])}{password}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


@contextlib.contextmanager
def celery_worker(queue: str, log, processes: int = 1, **env: str) -> Iterator[subprocess.Popen]:
    """A Celery worker on ``queue`` against the test database, stopped (if still alive) on exit.

    Solo (the task runs in the worker's own process) unless ``processes`` asks for a prefork pool.
    """
    env = {**os.environ, "DATABASE_URL": worker_database_url(), "DB_CONN_MAX_AGE": "0", **env}
    pool = "--pool=solo" if processes == 1 else "--pool=prefork"
    command = [sys.executable, "-m", "celery", "-A", "anima", "worker", pool, "-c", str(processes), "-Q", queue]
    command += ["--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info"]
    worker = subprocess.Popen(command, cwd=Path(settings.BASE_DIR), env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield worker
    finally:
        if worker.poll() is None:
            worker.terminate()
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()


@pytest.fixture
def worker_queue():
    """A queue of its own (so that no other worker takes, or steals, the task) and a log file."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    with tempfile.TemporaryFile("w+") as log:
        yield f"anima-it-{uuid.uuid4().hex[:8]}", log
