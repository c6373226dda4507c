from __future__ import annotations

import threading
import time

import pytest
from django.core.cache import caches

from anima.core.llm import providers
from anima.core.llm.testing import StubLlmServer
from sleep.models import PipelineRun


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


@pytest.fixture
def finished_run():
    """``finished_run(pk)``: wait for a sleep run carried out in a background thread to finish.

    The test must be transactional (the thread has its own connection); every such thread is
    joined at teardown, so none writes into the next test's database.
    """

    def wait(pk: int, timeout: float = 60) -> PipelineRun:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = PipelineRun.objects.get(pk=pk)
            if run.finished_at is not None:
                return run
            time.sleep(0.1)
        pytest.fail(f"sleep run {pk} did not finish within {timeout}s")

    yield wait
    for thread in threading.enumerate():
        if thread.name.startswith("sleep-run-"):
            thread.join(timeout=60)


@pytest.fixture
def llm_stub(settings, monkeypatch):
    """The openai provider against a local OpenAI-compatible stub server (real sockets on 127.0.0.1)."""
    monkeypatch.setattr(providers, "RETRY_BACKOFF_SECONDS", 0)
    with StubLlmServer() as server:
        settings.ANIMA_LLM_PROVIDER = "openai"
        settings.ANIMA_LLM_BASE_URL = server.base_url
        settings.ANIMA_LLM_MODEL = "stub-model"
        settings.ANIMA_LLM_MAX_RETRIES = 2
        yield server
