"""Readiness: a small list of named checks behind ``GET /readyz``.

Each check answers ``CheckResult(ok, detail, required)``. A required check that fails makes the
process not ready (HTTP 503); the others are reported only. Required: the database (reachable,
every migration applied), the replica when configured, and the cache and the broker when they are
configured (``REDIS_URL``, ``CELERY_BROKER_URL``). Reported: the embeddings provider and pgvector.
An app above adds its own with ``readiness_check_register`` at start-up.

The database's "every migration applied" is worked out until it is true, then remembered for the
life of the process; reachability is asked on every probe.

Details name states and versions, never secrets or user data; an error shows its type and message
with any credentials in a URL masked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import kombu
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor
from django_redis import get_redis_connection

from anima.core.db import REPLICA
from anima.core.embeddings import embedding_model

CONNECT_TIMEOUT_SECONDS = 2
UNAPPLIED_SHOWN = 5


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    detail: str
    required: bool = True


ReadinessCheck = Callable[[], CheckResult | None]
_checks: dict[str, ReadinessCheck] = {}


def readiness_check_register(*, name: str, check: ReadinessCheck) -> None:
    """Add (or replace) a check; it returns None when it does not apply to this deployment."""
    _checks[name] = check


def readiness_report() -> tuple[bool, dict[str, dict[str, object]]]:
    """(ready, {name: {"ok", "detail"}}): ready unless a required check failed."""
    ready, checks = True, {}
    for name, check in _checks.items():
        try:
            result = check()
        except Exception as exc:  # noqa: BLE001 (any failure of a check is its answer, not the endpoint's)
            result = CheckResult(ok=False, detail=error_detail(exc))
        if result is None:
            continue
        checks[name] = {"ok": result.ok, "detail": result.detail}
        ready = ready and (result.ok or not result.required)
    return ready, checks


_URL_CREDENTIALS = re.compile(r"(\w+://)[^/@\s]*@")


def error_detail(exc: BaseException) -> str:
    first_line = (str(exc).strip().splitlines() or [""])[0]
    return _URL_CREDENTIALS.sub(r"\1***@", f"{type(exc).__name__}: {first_line}")[:300]


# The database aliases found fully migrated by this process. Building the migration loader imports and
# links every migration module, too costly for every probe; once this code's migrations are all
# applied they stay so, so only a database not yet found migrated is asked again.
_migrated: set[str] = set()


def _unapplied_migrations(connection) -> list[tuple[str, str]]:
    loader = MigrationExecutor(connection).loader
    # Every migration of the code the database has not recorded, in dependency order (a plan towards the
    # leaves would skip a gap below an applied migration).
    ordered = dict.fromkeys(key for leaf in loader.graph.leaf_nodes() for key in loader.graph.forwards_plan(leaf))
    return [key for key in ordered if key not in loader.applied_migrations]


def database_check() -> CheckResult:
    connection = connections[DEFAULT_DB_ALIAS]
    with connection.cursor() as cursor:  # reachable: asked on every probe
        cursor.execute("SHOW server_version")
        (version,) = cursor.fetchone()
    unapplied = [] if DEFAULT_DB_ALIAS in _migrated else _unapplied_migrations(connection)
    if unapplied:
        names = ", ".join(f"{app}.{name}" for app, name in unapplied[:UNAPPLIED_SHOWN])
        more = f" and {len(unapplied) - UNAPPLIED_SHOWN} more" if len(unapplied) > UNAPPLIED_SHOWN else ""
        return CheckResult(
            ok=False, detail=f"PostgreSQL {version}; {len(unapplied)} unapplied migrations: {names}{more}"
        )
    _migrated.add(DEFAULT_DB_ALIAS)
    return CheckResult(ok=True, detail=f"PostgreSQL {version}; all migrations applied")


def replica_check() -> CheckResult | None:
    if not settings.DATABASE_REPLICA_URL:
        return None
    with connections[REPLICA].cursor() as cursor:
        cursor.execute("SELECT pg_is_in_recovery(), extract(epoch FROM now() - pg_last_xact_replay_timestamp())")
        in_recovery, lag = cursor.fetchone()
    if not in_recovery:
        return CheckResult(ok=True, detail="reachable (not a standby)")
    return CheckResult(ok=True, detail=f"reachable; standby, last replayed transaction {lag or 0:.1f} s ago")


def cache_check() -> CheckResult:
    if settings.CACHES["default"]["BACKEND"] != "django_redis.cache.RedisCache":
        return CheckResult(ok=True, detail="in-process cache (REDIS_URL unset)", required=False)
    get_redis_connection("default").ping()
    return CheckResult(ok=True, detail="Redis answers")


def broker_check() -> CheckResult:
    if not settings.CELERY_BROKER_URL:
        return CheckResult(ok=True, detail="no broker: tasks run in-process (CELERY_BROKER_URL unset)", required=False)
    with kombu.Connection(settings.CELERY_BROKER_URL, connect_timeout=CONNECT_TIMEOUT_SECONDS) as broker:
        broker.ensure_connection(max_retries=1, interval_start=0, timeout=CONNECT_TIMEOUT_SECONDS)
        transport = broker.transport_cls
    return CheckResult(ok=True, detail=f"{transport} broker answers")


def embeddings_check() -> CheckResult:
    if settings.ANIMA_EMBEDDINGS == "off":
        return CheckResult(ok=True, detail="off: keyword-only recall", required=False)
    model = embedding_model()
    if model is None:
        return CheckResult(
            ok=False, detail="local model cannot run on this machine: keyword-only recall", required=False
        )
    return CheckResult(
        ok=True, detail=f"{settings.ANIMA_EMBEDDINGS}: {model.name}, {model.dim} dimensions", required=False
    )


def pgvector_check() -> CheckResult:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(
            "SELECT e.extversion, a.default_version FROM pg_available_extensions a"
            " FULL JOIN pg_extension e ON e.extname = a.name WHERE coalesce(a.name, e.extname) = 'vector'"
        )
        row = cursor.fetchone()
    if row is None:
        return CheckResult(ok=False, detail="not available on this server", required=False)
    installed, available = row
    if installed:
        return CheckResult(ok=True, detail=f"vector {installed} installed", required=False)
    return CheckResult(ok=False, detail=f"vector {available} available, not installed", required=False)


readiness_check_register(name="database", check=database_check)
readiness_check_register(name="database_replica", check=replica_check)
readiness_check_register(name="cache", check=cache_check)
readiness_check_register(name="broker", check=broker_check)
readiness_check_register(name="embeddings", check=embeddings_check)
readiness_check_register(name="pgvector", check=pgvector_check)
