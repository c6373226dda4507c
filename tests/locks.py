"""Another database session holding a table: a statement that reads it waits, a stand-in for one that runs too long."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction


@contextmanager
def table_locked(table: str) -> Iterator[None]:
    """During the block another session holds ``table`` in ACCESS EXCLUSIVE mode (needs a transactional test)."""
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
                locked.set()
                release.wait(30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10), f"{table} was not locked in time"
        yield
    finally:
        release.set()
        holder.join()
