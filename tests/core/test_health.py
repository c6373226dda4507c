"""/healthz and /readyz: what a load balancer and an operator see, healthy and broken."""

from __future__ import annotations

import os

import psycopg
import pytest
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder

from anima.core import health
from anima.core.health import readiness_check_register


@pytest.fixture(autouse=True)
def _not_yet_found_migrated(monkeypatch):
    """Each test starts as a fresh process would: the database not yet found fully migrated."""
    monkeypatch.setattr(health, "_migrated", set())


def readyz(client) -> tuple[int, dict]:
    response = client.get("/readyz")
    assert response["Content-Type"] == "application/json"
    return response.status_code, response.json()


def test_healthz_answers_without_touching_the_database_whatever_the_host_header(client, django_assert_num_queries):
    with django_assert_num_queries(0):
        response = client.get("/healthz", HTTP_HOST="10.0.3.7:8000")  # a probe by pod IP, not in ALLOWED_HOSTS
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_ok_on_a_migrated_database_and_reports_what_is_not_required(client, settings, private_cache):
    settings.CELERY_BROKER_URL = ""
    status, body = readyz(client)
    assert status == 200
    assert body["status"] == "ok"
    assert body["checks"]["database"] == {"ok": True, "detail": body["checks"]["database"]["detail"]}
    assert "all migrations applied" in body["checks"]["database"]["detail"]
    # Not configured here, so reported but never failing.
    assert body["checks"]["cache"]["ok"] and "REDIS_URL unset" in body["checks"]["cache"]["detail"]
    assert body["checks"]["broker"]["ok"] and "CELERY_BROKER_URL unset" in body["checks"]["broker"]["detail"]
    assert body["checks"]["embeddings"] == {"ok": True, "detail": "off: keyword-only recall"}
    assert set(body["checks"]["pgvector"]) == {"ok", "detail"}
    assert "database_replica" not in body["checks"]
    for check in body["checks"].values():
        assert set(check) == {"ok", "detail"}


def test_a_missing_pgvector_or_embeddings_never_makes_the_process_unready(client, settings, monkeypatch):
    settings.ANIMA_EMBEDDINGS = "local"
    monkeypatch.setattr("anima.core.health.embedding_model", lambda: None)  # the local model cannot load here
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'")
        (installed,) = cursor.fetchone()
    status, body = readyz(client)
    assert status == 200
    assert body["checks"]["embeddings"]["ok"] is False
    assert body["checks"]["pgvector"]["ok"] is bool(installed)


def test_an_unapplied_migration_makes_the_process_unready_and_is_named(client):
    recorder = MigrationRecorder(connection)
    recorder.migration_qs.filter(app="sleep", name="0001_initial").delete()  # rolled back with the test
    status, body = readyz(client)
    assert status == 503
    assert body["status"] == "fail"
    assert body["checks"]["database"]["ok"] is False
    assert "1 unapplied migrations: sleep.0001_initial" in body["checks"]["database"]["detail"]


def test_a_migrated_database_is_checked_for_migrations_once_and_a_failure_until_it_is_fixed(client, monkeypatch):
    recorder = MigrationRecorder(connection)
    applied = recorder.migration_qs.get(app="sleep", name="0001_initial")
    applied.delete()  # rolled back with the test
    loaders = []
    build = health.MigrationExecutor
    monkeypatch.setattr(health, "MigrationExecutor", lambda conn: loaders.append(conn) or build(conn))

    assert [readyz(client)[0] for _ in range(2)] == [503, 503]  # a failure is never remembered
    recorder.record_applied("sleep", "0001_initial")
    answers = [readyz(client) for _ in range(3)]

    assert [status for status, _ in answers] == [200, 200, 200]
    assert all("all migrations applied" in body["checks"]["database"]["detail"] for _, body in answers)
    assert len(loaders) == 3  # two failing probes, the first passing one; none after


@pytest.mark.django_db(transaction=True)  # its connection is killed: no test transaction may live on it
def test_a_migrated_database_that_stops_answering_is_reported_at_once(client):
    assert readyz(client)[0] == 200
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (backend,) = cursor.fetchone()
    # The server ends this process's session, as a restart or an administrator would.
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [backend])

    try:
        status, body = readyz(client)
    finally:
        connection.close()  # the next query (the test's teardown) connects again

    assert status == 503
    assert body["checks"]["database"]["ok"] is False
    assert body["checks"]["database"]["detail"].startswith("OperationalError")


def test_an_unreachable_replica_makes_the_process_unready(client, closed_port_replica):
    status, body = readyz(client)
    assert status == 503
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["database_replica"]["ok"] is False
    assert body["checks"]["database_replica"]["detail"].startswith("OperationalError")


def test_a_configured_redis_that_does_not_answer_makes_the_process_unready(client, redis_down):
    status, body = readyz(client)
    assert status == 503
    assert body["checks"]["cache"]["ok"] is False
    assert "127.0.0.1:1" in body["checks"]["cache"]["detail"]


def test_a_configured_broker_that_does_not_answer_makes_the_process_unready_without_showing_its_password(
    client, settings
):
    settings.CELERY_BROKER_URL = "amqp://anima:hunter2@127.0.0.1:1//"
    status, body = readyz(client)
    assert status == 503
    assert body["checks"]["broker"]["ok"] is False
    assert body["checks"]["broker"]["detail"].startswith("OperationalError")
    assert "hunter2" not in str(body)


def test_a_check_that_raises_is_reported_as_failed_with_its_url_credentials_masked(client, monkeypatch):
    def broken():
        raise RuntimeError("cannot reach postgresql://anima:s3cret@db.internal:5432/anima\nsecond line")

    monkeypatch.setattr("anima.core.health._checks", {})
    readiness_check_register(name="custom", check=broken)
    status, body = readyz(client)
    assert status == 503
    assert body == {
        "status": "fail",
        "checks": {
            "custom": {"ok": False, "detail": "RuntimeError: cannot reach postgresql://***@db.internal:5432/anima"}
        },
    }


def test_only_get_and_head_are_answered(client):
    assert client.post("/readyz").status_code == 405
    assert client.head("/healthz").status_code == 200


@pytest.mark.integration
@pytest.mark.skipif(
    not (os.environ.get("REDIS_URL") and os.environ.get("CELERY_BROKER_URL")), reason="needs REDIS_URL and a broker"
)
def test_readyz_on_the_machines_redis_and_broker(client):
    status, body = readyz(client)
    assert status == 200, body
    assert body["checks"]["cache"] == {"ok": True, "detail": "Redis answers"}
    assert body["checks"]["broker"]["ok"] is True
