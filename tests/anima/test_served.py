"""The web process as production runs it: gunicorn with gunicorn.conf.py, after collectstatic."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from django.conf import settings
from prometheus_client.parser import text_string_to_metric_families

from tests.served import gunicorn, run_manage, served_env


def test_gunicorn_serves_collected_static_files_health_and_metrics_of_all_workers_in_json_logs(tmp_path):
    static_root = tmp_path / "static"
    run_manage("collectstatic", "--noinput", env=served_env(ANIMA_STATIC_ROOT=str(static_root)))
    assert (static_root / "admin/css/base.css.gz").exists()  # compressed copies for clients that accept them
    assert (static_root / "drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js").exists()

    with gunicorn(
        log=tmp_path / "gunicorn.log",
        ANIMA_STATIC_ROOT=str(static_root),
        WEB_CONCURRENCY="2",
        LOG_FORMAT="json",
    ) as app:
        css = app.get("/static/admin/css/base.css", {"Accept-Encoding": "gzip"})
        assert css.status == 200
        assert css.headers["content-type"].startswith("text/css")
        assert css.headers["content-encoding"] == "gzip"
        ready = app.get("/readyz")
        assert ready.status == 200, ready.body
        assert json.loads(ready.body)["status"] == "ok"
        for _ in range(4):
            assert app.get("/admin/login/?next=/admin/private-query").status == 200
        scraped = app.get("/metrics")
    assert scraped.status == 200
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(scraped.body.decode())
        for sample in family.samples
    }
    # Two workers served the four requests; the scrape counts them all.
    assert (
        samples[
            ("django_http_requests_latency_seconds_by_view_method_count", (("method", "GET"), ("view", "admin:login")))
        ]
        == 4
    )

    records = [json.loads(line) for line in app.log_lines()]  # every line one JSON object
    access = [record["message"] for record in records if record["logger"] == "gunicorn.access"]
    assert sum(bool(re.search(r'"GET /admin/login/" 200 \d+ \d+ms', line)) for line in access) == 4
    assert not [line for line in access if "private-query" in line]  # no query strings in the access log
    assert any(record["logger"] == "gunicorn.error" and "Booting worker" in record["message"] for record in records)


def test_gunicorn_without_its_database_is_alive_but_not_ready(tmp_path):
    with gunicorn(
        log=tmp_path / "gunicorn.log",
        WEB_CONCURRENCY="1",
        DATABASE_URL="postgresql://anima@127.0.0.1:1/anima",
    ) as app:
        assert app.get("/healthz").status == 200
        ready = app.get("/readyz")
    assert ready.status == 503
    body = json.loads(ready.body)
    assert body["status"] == "fail"
    assert body["checks"]["database"]["ok"] is False
    assert body["checks"]["database"]["detail"].startswith("OperationalError")


@pytest.mark.local_embeddings
def test_gunicorn_workers_load_the_embedding_model_before_they_take_requests(tmp_path):
    with gunicorn(log=tmp_path / "gunicorn.log", WEB_CONCURRENCY="2", ANIMA_EMBEDDINGS="local") as app:
        ready = app.workers_ready(2)
    assert all(
        line.endswith("is ready (embeddings: multilingual-e5-small-q4+use-multilingual-v3)") for line in ready
    ), ready


# gunicorn's hooks run in a process of their own: the file sets PROMETHEUS_MULTIPROC_DIR as gunicorn loads it.
_HOOKS_PROBE = """
import gc, logging, os, runpy
hooks = runpy.run_path("gunicorn.conf.py")
hooks["on_starting"](None)
master = len(gc.get_objects())
import django; django.setup()
loaded = len(gc.get_objects())
worker = type("Worker", (), {"pid": os.getpid(), "log": logging.getLogger("gunicorn.error")})()
hooks["post_worker_init"](worker)
print(master, loaded, len(gc.get_objects()))
"""


def test_what_gunicorn_loads_before_taking_requests_is_left_out_of_garbage_collections(tmp_path):
    probe = subprocess.run(
        [sys.executable, "-c", _HOOKS_PROBE],
        cwd=settings.BASE_DIR,
        env=served_env(PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics")),
        capture_output=True,
        text=True,
        check=True,
    )
    master, loaded, ready = map(int, probe.stdout.split())
    # jieba's tables, frozen in the master, are not walked; Django's modules, loaded after, are until the worker's
    # hook freezes them too.
    assert master < 1_000
    assert loaded > 50_000
    assert ready < 1_000


def test_every_line_of_gunicorns_log_is_on_the_companions_clock(tmp_path):
    # India keeps one offset all year: the expected one does not depend on the day the test runs.
    with gunicorn(log=tmp_path / "gunicorn.log", WEB_CONCURRENCY="1", ANIMA_TIME_ZONE="Asia/Kolkata") as app:
        app.workers_ready(1)
    offsets = {match.group(1) for line in app.log_lines() if (match := re.match(r"\[[-\d :]+ ([+-]\d{4})\]", line))}
    assert offsets == {"+0530"}, app.log_lines()
