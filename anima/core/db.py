"""Database helpers: the read-replica router, telling an unreachable server from a refused statement,
searches under a time limit, reading dates Python cannot hold, and a throwaway database for benchmarks.

With ``DATABASE_REPLICA_URL`` set, settings add a ``replica`` alias. Reads go there only inside
``replica_reads()`` — recall and the console's GET pages, where a few hundred milliseconds of
replication lag are harmless — and only for Anima's own tables (sessions, users, tokens and beat
schedules always come from the primary, so a fresh login is never lost to lag). Everything else
(writes, the reads a write decides on, the nightly cycle) stays on the primary; ``primary_reads()``
pins a block there even when a caller further up asked for the replica.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import psycopg
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections, transaction
from psycopg.errors import QueryCanceled
from psycopg.types.datetime import DateLoader, TimestamptzLoader

from anima.core.errors import Unavailable

logger = logging.getLogger(__name__)

REPLICA = "replica"
# App labels whose tables the replica serves: Anima's own data.
REPLICATED_APPS = frozenset({"anima", "conversations", "temporal", "memory", "sleep"})

_PRIMARY, _REPLICA = "primary", "replica"
_reads: contextvars.ContextVar[str | None] = contextvars.ContextVar("anima_reads", default=None)


@contextlib.contextmanager
def replica_reads() -> Iterator[None]:
    """Inside the block, reads of Anima's tables use the replica when one is configured."""
    token = _reads.set(_PRIMARY if _reads.get() == _PRIMARY else _REPLICA)
    try:
        yield
    finally:
        _reads.reset(token)


@contextlib.contextmanager
def primary_reads() -> Iterator[None]:
    """Inside the block every read uses the primary, whatever an enclosing ``replica_reads`` said."""
    token = _reads.set(_PRIMARY)
    try:
        yield
    finally:
        _reads.reset(token)


def read_alias() -> str:
    """The alias raw SQL reads should run on here: the replica inside ``replica_reads``, else the primary."""
    return REPLICA if _reads.get() == _REPLICA and settings.DATABASE_REPLICA_URL else DEFAULT_DB_ALIAS


class ReplicaRouter:
    """Routes reads of Anima's tables to ``read_alias()``; writes and migrations to the primary."""

    def db_for_read(self, model, **hints) -> str | None:
        if model._meta.app_label in REPLICATED_APPS and read_alias() == REPLICA:
            return REPLICA
        return None

    def db_for_write(self, model, **hints) -> str:
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1, obj2, **hints) -> bool:
        # The replica holds the primary's rows: an object read from either may point to one from the other.
        return {obj1._state.db, obj2._state.db} <= {DEFAULT_DB_ALIAS, REPLICA, None}

    def allow_migrate(self, db: str, app_label: str, **hints) -> bool:
        return db == DEFAULT_DB_ALIAS


# SQLSTATEs of a server that is going away or not accepting connections (class 08 is connection exceptions).
_SHUTDOWN_STATES = {"57P01", "57P02", "57P03"}


def database_unreachable(exc: BaseException) -> bool:
    """True when ``exc`` says the database cannot be reached (refused, lost, shutting down), not that it refused
    a statement (bad data, a constraint, a timeout)."""
    if isinstance(exc, InterfaceError | psycopg.InterfaceError):
        return True
    cause = exc.__cause__ if isinstance(exc.__cause__, psycopg.Error) else exc
    if not isinstance(cause, psycopg.Error):
        return False
    state = cause.sqlstate
    if state is None:
        # Raised by the client, not the server: connection failed, closed, or lost mid-query.
        return isinstance(cause, psycopg.OperationalError | psycopg.InterfaceError)
    return state.startswith("08") or state in _SHUTDOWN_STATES


def row_id_parse(raw: str) -> int | None:
    """``raw`` as a row id, or None when it cannot be one: "²" or thirty digits is no row, not a 500."""
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 18 else None


# --- Searches under a time limit ---------------------------------------------------------------------


class SearchTimeout(Unavailable):
    """A search ran past ANIMA_RECALL_TIMEOUT and the database cancelled it."""


@contextmanager
def settings_local(cursor, wanted: dict[str, tuple[str, str]], *, restore: bool) -> Iterator[None]:
    """The block runs with each setting at its wanted value (transaction-local), then, with ``restore``, at
    its previous one (``wanted[name][1]`` when it was unset).

    Transaction-local settings outlive the block inside a caller's transaction: hence the restore. Without
    it (the transaction ends after the block, and its end drops them) two round trips are saved.
    """
    names = list(wanted)
    if restore:
        cursor.execute(
            "SELECT " + ", ".join("COALESCE(current_setting(%s, true), %s)" for _ in names),
            [value for name in names for value in (name, wanted[name][1])],
        )
        previous = list(cursor.fetchone())
    apply = "SELECT " + ", ".join("set_config(%s, %s, true)" for _ in names)
    cursor.execute(apply, [value for name in names for value in (name, wanted[name][0])])
    yield
    if restore:
        cursor.execute(apply, [value for name, old in zip(names, previous, strict=True) for value in (name, old)])


def _in_callers_transaction(connection) -> bool:
    """Whether a transaction the caller opened (atomic, or autocommit off) outlives what runs now."""
    return connection.in_atomic_block or not connection.get_autocommit()


def fetch_under(*, sql: str, params: dict, wanted: dict[str, tuple[str, str]], using: str = DEFAULT_DB_ALIAS) -> list:
    """The rows of ``sql`` run with each setting at its wanted value (as ``settings_local``) for it alone.

    Outside a transaction the settings and the statement travel in one message, which the server runs as one
    implicit transaction whose end drops the settings: one round trip where a transaction of its own takes four
    (BEGIN, the settings, the statement, COMMIT). Inside a caller's transaction they are set and then restored.
    """
    connection = connections[using]
    with connection.cursor() as cursor:
        if _in_callers_transaction(connection):
            with settings_local(cursor, wanted, restore=True):
                cursor.execute(sql, params)
                return cursor.fetchall()
        values, calls = {}, []
        for index, (name, (value, _)) in enumerate(wanted.items()):
            values[f"setting{index}"], values[f"setting{index}_value"] = name, value
            calls.append(f"set_config(%(setting{index})s, %(setting{index}_value)s, true)")
        # Client-side binding (Django's psycopg cursor) sends it as a simple query, which may hold several.
        cursor.execute(f"SELECT {', '.join(calls)}; {sql}", {**params, **values})
        cursor.nextset()
        return cursor.fetchall()


def advisory_lock_key(name: str) -> int:
    """The 64-bit key of the advisory lock called ``name``."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


@contextmanager
def advisory_lock(name: str) -> Iterator[bool]:
    """Try PostgreSQL's session advisory lock ``name``; yields whether it is held (and releases it after).

    The lock lives on a dedicated connection so that closing or recycling the caller's own
    connection (Celery does that between tasks) can never release it early; when the process
    dies, PostgreSQL drops the connection and the lock with it.
    """
    key = advisory_lock_key(name)
    connection = connections.create_connection(DEFAULT_DB_ALIAS)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
            (acquired,) = cursor.fetchone()
        try:
            yield acquired
        finally:
            if acquired:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [key])
    finally:
        connection.close()


def search_timeout_setting() -> dict[str, tuple[str, str]]:
    """ANIMA_RECALL_TIMEOUT as a ``settings_local`` entry: the server cancels a statement past it."""
    return {"statement_timeout": (f"{max(1, round(settings.ANIMA_RECALL_TIMEOUT * 1000))}ms", "0")}


@contextmanager
def search_cancelled_as_timeout(*, what: str) -> Iterator[None]:
    """A statement of the block cancelled by its timeout raises SearchTimeout (503) naming ``what``."""
    try:
        yield
    except OperationalError as exc:
        if not isinstance(exc.__cause__, QueryCanceled):
            raise
        raise SearchTimeout(
            f"{what} took longer than {settings.ANIMA_RECALL_TIMEOUT:g} s (ANIMA_RECALL_TIMEOUT) and was cancelled"
        ) from exc


@contextmanager
def search_time_limit(*, what: str, using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """The block's queries in one transaction, each under ANIMA_RECALL_TIMEOUT; one past it raises SearchTimeout."""
    connection = connections[using]
    # Outside a caller's transaction the block's own ends with it, and so does the timeout.
    restore = _in_callers_transaction(connection)
    with (
        search_cancelled_as_timeout(what=what),
        transaction.atomic(using=using),
        connection.cursor() as cursor,
        settings_local(cursor, search_timeout_setting(), restore=restore),
    ):
        yield


@contextmanager
def throwaway_database(*, keep: str = "") -> Iterator[None]:
    """Run the block against a fresh migrated database ``anima_bench_<pid>``, dropped afterwards.

    ``keep``: the database of that name instead, created and migrated if missing and kept afterwards, so a
    benchmark whose data takes long to build can measure again on it.
    """
    connection = connections["default"]
    connection.settings_dict["TEST"]["NAME"] = keep or f"anima_bench_{os.getpid()}"
    connection.creation.create_test_db(verbosity=0, autoclobber=not keep, serialize=False, keepdb=bool(keep))
    try:
        yield
    finally:
        if not keep:
            connection.creation.destroy_test_db(connection.settings_dict["NAME"], verbosity=0)


# --- Reading dates Python cannot hold ------------------------------------------------------------

# PostgreSQL stores years Python's datetime cannot (before year 1, after 9999). Every entry point
# refuses them, but a row written by hand must not make every read of its table fail ("timestamp
# too small"): such a value is read as the nearest one Python can hold, a day inside the edge so
# that local-time conversion cannot overflow, and a warning is logged.
_EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
_LATEST = datetime(9999, 12, 30, tzinfo=UTC)


def _before_year_one(data) -> bool:
    return bytes(data).rstrip().endswith(b"BC")


class _TolerantTimestamptzLoader(TimestamptzLoader):
    timezone = UTC

    def load(self, data):
        try:
            value = super().load(data)
        except psycopg.DataError:
            value = _EARLIEST if _before_year_one(data) else _LATEST
            logger.warning("a stored timestamp (%s) is outside Python's range; read as %s", bytes(data), value)
        return value.replace(tzinfo=self.timezone) if self.timezone is not None else value.replace(tzinfo=None)


class _TolerantDateLoader(DateLoader):
    def load(self, data):
        try:
            return super().load(data)
        except psycopg.DataError:
            value = _EARLIEST.date() if _before_year_one(data) else _LATEST.date()
            logger.warning("a stored date (%s) is outside Python's range; read as %s", bytes(data), value)
            return value


def tolerant_date_loaders_register(*, connection, **kwargs) -> None:
    """``connection_created`` receiver: read out-of-range dates and timestamps instead of failing."""
    if connection.vendor != "postgresql":
        return
    # Django re-registers its own timestamptz loader on a cursor whose loader's zone differs from the connection's.
    loader = type("TolerantTimestamptzLoader", (_TolerantTimestamptzLoader,), {"timezone": connection.timezone})
    connection.connection.adapters.register_loader("timestamptz", loader)
    connection.connection.adapters.register_loader("date", _TolerantDateLoader)
