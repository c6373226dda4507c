"""Database helpers: telling an unreachable server from a refused statement, and throwaway benchmark databases."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import psycopg
from django.db import InterfaceError, connections
from psycopg.types.datetime import DateLoader, TimestamptzLoader

logger = logging.getLogger(__name__)

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


@contextmanager
def throwaway_database() -> Iterator[None]:
    """Run the block against a fresh migrated database ``anima_bench_<pid>``, dropped afterwards."""
    connection = connections["default"]
    connection.settings_dict["TEST"]["NAME"] = f"anima_bench_{os.getpid()}"
    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        yield
    finally:
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
