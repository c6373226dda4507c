from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _enable_db_for_all_tests(db):
    """Every test runs against the real PostgreSQL (embedded, or DATABASE_URL)."""
