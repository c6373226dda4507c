from __future__ import annotations

import pytest
from django.core.cache import caches


@pytest.fixture(autouse=True)
def _keyword_only_unless_marked(request, settings):
    """Most tests run keyword-only (fast); those marked ``local_embeddings`` use the bundled model."""
    settings.ANIMA_EMBEDDINGS = "local" if request.node.get_closest_marker("local_embeddings") else "off"


@pytest.fixture(autouse=True)
def _enable_db_for_all_tests(db):
    """Every test runs against the real PostgreSQL (embedded, or DATABASE_URL)."""


CLOSED_PORT_REDIS = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": "redis://127.0.0.1:1/0",
        "OPTIONS": {
            "CLIENT_CLASS": "django_redis.client.DefaultClient",
            "SOCKET_CONNECT_TIMEOUT": 0.2,
            "SOCKET_TIMEOUT": 0.2,
        },
    }
}


@pytest.fixture
def private_cache(settings):
    """An empty in-process default cache for one test, whatever REDIS_URL says.

    Test databases restart their ids, so keys such as peer-rollup fingerprints would repeat
    across runs on a shared Redis; the integration tests cover Redis itself.
    """
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "tests"}}
    caches["default"].clear()


@pytest.fixture
def redis_down(settings, monkeypatch):
    settings.CACHES = CLOSED_PORT_REDIS
    # The outage pause is process-wide: undo it so later tests see a healthy cache again.
    monkeypatch.setattr("anima.core.cache._down_until", 0.0)
