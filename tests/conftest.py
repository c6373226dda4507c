from __future__ import annotations

import io
import json
import logging.config
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from celery import current_app
from django.conf import settings as django_settings
from django.core.cache import caches
from django.db import connections
from django.db.utils import load_backend

from anima.agent.demo import FIXTURES as DEMO_FIXTURES
from anima.core import embeddings
from anima.core.config import config_cache_clear
from anima.core.db import REPLICA
from anima.core.llm import providers
from anima.core.llm.dialects import dialects_forget
from anima.core.llm.testing import StubLlmServer
from anima.core.logs import logging_config
from conversations.services import conversations_import
from memory.imports import memories_import
from sleep.models import PipelineRun
from tests.celery_worker import worker_queue  # noqa: F401 (a fixture of the integration tests)
from tests.embeddings_server import CONCEPT_DIM, EmbeddingsServer, concept_vector


@pytest.fixture(autouse=True)
def _keyword_only_unless_marked(request, settings):
    """Most tests run keyword-only (fast); those marked ``local_embeddings`` use the bundled model."""
    settings.ANIMA_EMBEDDINGS = "local" if request.node.get_closest_marker("local_embeddings") else "off"
    # A stub embeddings server of another test may reuse a port, and so a cached query's key.
    embeddings._query_vectors.clear()
    # So may a stub LLM server of another kind, and so the dialect remembered for its URL.
    dialects_forget()


@pytest.fixture(autouse=True)
def _config_read_fresh():
    """Each test's database starts without overrides: none read by an earlier test may linger."""
    config_cache_clear()


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


def _broker_at(url: str, settings, monkeypatch) -> None:
    """A broker is configured at ``url``: tasks are sent to it, not run in-process."""
    settings.CELERY_BROKER_URL = url
    # The Celery app read Django's settings once, under their CELERY_ names, and keeps the connection pools of the
    # broker it first sent to: new ones are made for ``url`` (the old ones come back afterwards).
    monkeypatch.setitem(current_app.conf, "CELERY_BROKER_URL", url)
    monkeypatch.setitem(current_app.conf, "CELERY_TASK_ALWAYS_EAGER", False)
    monkeypatch.setattr(current_app, "_pool", None)
    monkeypatch.setattr(current_app.amqp, "_producer_pool", None)


@pytest.fixture
def broker_down(settings, monkeypatch):
    """A broker is configured and it does not answer: a closed port."""
    _broker_at("redis://127.0.0.1:1/0", settings, monkeypatch)


@pytest.fixture
def memory_broker(settings, monkeypatch) -> Iterator[Callable[[], list[dict]]]:
    """A broker is configured: kombu's in-process transport, emptied for the test. Yields a function that takes the
    messages sent to the default queue so far, as ``{"task", "kwargs"}`` each."""
    _broker_at("memory://", settings, monkeypatch)

    def taken() -> list[dict]:
        messages = []
        with current_app.connection_for_write() as connection:
            queue = connection.SimpleQueue(current_app.conf.task_default_queue)
            while queue.qsize():
                message = queue.get(block=False)
                messages.append({"task": message.headers["task"], "kwargs": message.decode()[1]})
                message.ack()
            queue.close()
        return messages

    taken()
    yield taken


def _replica_alias(settings, **overrides) -> Iterator[None]:
    """DATABASE_REPLICA_URL set, its ``replica`` connection on the test database unless ``overrides`` say otherwise.

    Set up as a connection Django's test case did not see at its start, which it lets through.
    """
    settings_dict = {**connections["default"].settings_dict, **overrides}
    settings.DATABASE_REPLICA_URL = "postgresql://replica-of-the-test-database"
    connections[REPLICA] = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, alias=REPLICA)
    try:
        yield
    finally:
        connections[REPLICA].close()
        del connections[REPLICA]


@pytest.fixture
def replica(transactional_db, settings) -> Iterator[None]:
    """A replica on the test database: a second connection, so what it should see must be committed."""
    yield from _replica_alias(settings)


@pytest.fixture
def closed_port_replica(settings) -> Iterator[None]:
    yield from _replica_alias(
        settings, ENGINE="django.db.backends.postgresql", HOST="127.0.0.1", PORT=1, OPTIONS={"connect_timeout": 2}
    )


@pytest.fixture
def json_logs() -> Iterator[Callable[[], list[dict]]]:
    """Logging as with LOG_FORMAT=json LOG_LEVEL=INFO; yields a reader of every record written so far."""
    config = logging_config(log_format="json", level="INFO")
    stream = io.StringIO()
    config["handlers"]["console"]["stream"] = stream
    logging.config.dictConfig(config)

    def records() -> list[dict]:
        return [json.loads(line) for line in stream.getvalue().splitlines()]

    try:
        yield records
    finally:
        logging.config.dictConfig(django_settings.LOGGING)


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
        # Named, so a test's requests are its own (no probe) and its prompt carries no schema; the dialect
        # tests use ``auto`` against stubs that enforce as real servers do.
        settings.ANIMA_LLM_STRUCTURED = "json_schema"
        yield server


@pytest.fixture
def concept_embeddings(settings):
    """ANIMA_EMBEDDINGS=openai against a local server embedding in the toy concept space (real HTTP)."""
    with EmbeddingsServer(embed=concept_vector) as server:
        settings.ANIMA_EMBEDDINGS = "openai"
        settings.ANIMA_EMBEDDINGS_BASE_URL = server.base_url
        settings.ANIMA_EMBEDDINGS_MODEL = "concept-stub"
        settings.ANIMA_EMBEDDINGS_DIM = CONCEPT_DIM
        yield server


@pytest.fixture
def demo_sample():
    """The demo's bundled sample imported (persons leo and maya, their conversations and memories)."""
    for name, importer in (("conversations.jsonl", conversations_import), ("memories.jsonl", memories_import)):
        with (DEMO_FIXTURES / name).open(encoding="utf-8") as handle:
            importer(lines=handle)
