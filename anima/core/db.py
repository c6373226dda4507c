"""Database helpers for benchmarks: a throwaway database on the configured server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections


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
