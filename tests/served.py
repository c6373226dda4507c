"""Anima started the way the docs tell a user to: a real runserver or gunicorn process on 127.0.0.1.

The process uses the test database (an environment variable names it) and DEBUG unset. What it
should see must be committed, so tests that give it rows use ``transactional_db``.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.db import connections

START_SECONDS = 90
# No proxy from the environment between the test and 127.0.0.1.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Served:
    url: str
    log: Path

    def get(self, path: str, headers: dict[str, str] | None = None) -> Response:
        request = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with _opener.open(request, timeout=30) as response:
                return Response(response.status, {k.lower(): v for k, v in response.headers.items()}, response.read())
        except urllib.error.HTTPError as error:
            return Response(error.code, {k.lower(): v for k, v in error.headers.items()}, error.read())

    def log_lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()

    def workers_ready(self, count: int) -> list[str]:
        """The log's "is ready" lines once ``count`` workers wrote theirs (``/healthz`` answers after the first)."""
        deadline = time.monotonic() + START_SECONDS
        while len(ready := [line for line in self.log_lines() if " is ready" in line]) < count:
            assert time.monotonic() < deadline, self.log_lines()
            time.sleep(0.2)
        return ready


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def this_test_database_env() -> dict[str, str]:
    """The variables that point a new process at the database this test runs on."""
    db = connections["default"].settings_dict
    if db["ENGINE"] == "anima.core.embedded":
        return {"ANIMA_EMBEDDED_PG_DATABASE": db["NAME"]}
    credentials = quote(db["USER"] or "") + (f":{quote(db['PASSWORD'])}" if db["PASSWORD"] else "")
    return {"DATABASE_URL": f"postgresql://{credentials}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"}


def served_env(**overrides: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("DEBUG", "PROMETHEUS_MULTIPROC_DIR")}
    return {**env, "ANIMA_EMBEDDINGS": "off", **this_test_database_env(), **overrides}


def run_manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=settings.BASE_DIR, env=env, capture_output=True, text=True, check=True
    )


@contextlib.contextmanager
def served(command: list[str], *, port: int, log: Path, env: dict[str, str]) -> Iterator[Served]:
    """Run ``command`` (listening on ``port``) until ``/healthz`` answers; stop it and its workers afterwards."""
    app = Served(url=f"http://127.0.0.1:{port}", log=log)
    with log.open("w") as output:
        process = subprocess.Popen(
            command, cwd=settings.BASE_DIR, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + START_SECONDS
        while True:
            if process.poll() is not None:
                raise AssertionError(f"{command[:3]} exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            with contextlib.suppress(OSError):
                if app.get("/healthz").status == 200:
                    break
            if time.monotonic() > deadline:
                raise AssertionError(f"{command[:3]} did not answer in {START_SECONDS} s:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield app
    finally:
        with contextlib.suppress(ProcessLookupError):  # already gone (it failed to start)
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def runserver(*, log: Path, **env: str) -> contextlib.AbstractContextManager[Served]:
    """``python manage.py runserver`` as the docs' getting started runs it (no autoreloader in tests)."""
    port = free_port()
    command = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
    return served(command, port=port, log=log, env=served_env(**env))


def gunicorn(*, log: Path, **env: str) -> contextlib.AbstractContextManager[Served]:
    """The Procfile's web process (``gunicorn -c gunicorn.conf.py``), run by this interpreter; its metrics files
    beside ``log`` unless ``PROMETHEUS_MULTIPROC_DIR`` says where (gunicorn empties that folder as it starts)."""
    env.setdefault("PROMETHEUS_MULTIPROC_DIR", str(log.parent / "metrics"))
    port = free_port()
    procfile = (Path(settings.BASE_DIR) / "Procfile").read_text().splitlines()
    web = next(shlex.split(line.split(":", 1)[1]) for line in procfile if line.startswith("web:"))
    assert web[0] == "gunicorn", web
    command = [sys.executable, "-m", *web]
    return served(command, port=port, log=log, env=served_env(GUNICORN_BIND=f"127.0.0.1:{port}", **env))
