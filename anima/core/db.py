"""Database helpers: the read-replica router, and a throwaway database for benchmarks.

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
import os
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

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
