"""gunicorn settings for Anima's web process: ``gunicorn -c gunicorn.conf.py`` (the Procfile's ``web``).

Every knob comes from the environment (see README, "Running it for real"). The threaded worker
(gthread) keeps a slow or streaming response from holding a whole worker; Prometheus metrics are
collected across workers in ``PROMETHEUS_MULTIPROC_DIR`` (default ``var/prometheus``), emptied when
gunicorn starts and cleaned of each worker that exits.
"""

from __future__ import annotations

import gc
import os
import shutil
from pathlib import Path

from django.conf import settings

from anima.core.env import env_choice, env_int, env_str
from anima.core.segmentation import segmentation_load

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anima.settings")  # as anima.wsgi, which the workers load
# Reading the settings sets this process's time zone to TIME_ZONE, as it does in each worker: every line of the
# log is on one clock.
_var_dir = settings.VAR_DIR
# Set before prometheus_client is imported anywhere: it picks its multiprocess mode at import.
_metrics_dir = Path(os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(_var_dir / "prometheus")))

from prometheus_client import multiprocess  # noqa: E402

wsgi_app = "anima.wsgi:application"
bind = [env_str("GUNICORN_BIND") or f"0.0.0.0:{env_int('PORT', 8000, minimum=1, maximum=65535)}"]
workers = env_int("WEB_CONCURRENCY", max(2, os.cpu_count() or 1), minimum=1)
worker_class = "gthread"
threads = env_int("GUNICORN_THREADS", 4, minimum=1)
# With gthread this is the silence after which a stuck worker is replaced, not a per-request limit.
timeout = env_int("GUNICORN_TIMEOUT", 60, minimum=1)
graceful_timeout = env_int("GUNICORN_GRACEFUL_TIMEOUT", 30, minimum=1)
# Longer than a load balancer's idle timeout is typical; connections stay open between its requests.
keepalive = env_int("GUNICORN_KEEPALIVE", 5, minimum=0)
# Recycle workers now and then (jittered, so they do not all restart at once): bounds slow leaks.
max_requests = env_int("GUNICORN_MAX_REQUESTS", 10_000, minimum=0)
max_requests_jitter = max_requests // 10
if Path("/dev/shm").is_dir():
    worker_tmp_dir = "/dev/shm"  # heartbeat files on a RAM disk: a slow disk cannot stall workers
# Signals (HUP reload, TTIN/TTOU scale) manage gunicorn; no control socket shared by every instance of the user.
control_socket_disable = True

# Access log: path without the query string (queries carry what people asked), status, bytes, milliseconds.
accesslog = "-"
access_log_format = '%(h)s "%(m)s %(U)s" %(s)s %(B)s %(M)sms'
errorlog = "-"
loglevel = env_choice("LOG_LEVEL", "INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR")).lower()
if env_choice("LOG_FORMAT", "plain", choices=("plain", "json")) == "json":
    _json_handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "anima.core.logs.JsonFormatter"}},
        "handlers": {"console": _json_handler},
        "root": {"level": loglevel.upper(), "handlers": ["console"]},
        "loggers": {
            "gunicorn.error": {"level": loglevel.upper(), "handlers": ["console"], "propagate": False},
            "gunicorn.access": {"level": "INFO", "handlers": ["console"], "propagate": False},
        },
    }


def on_starting(server) -> None:
    # Files of a previous run would add its counts to this one's.
    shutil.rmtree(_metrics_dir, ignore_errors=True)
    _metrics_dir.mkdir(parents=True)
    # jieba's tables are plain Python data, safe to fork: loaded once here, every worker (a replaced one too)
    # starts with them instead of loading them in its first requests.
    segmentation_load(tags=True)
    # See post_worker_init; here also so that the workers' collections leave these pages shared.
    _freeze_loaded()


def post_worker_init(worker) -> None:
    from anima.core.embeddings import embedding_model

    # The embedding model loads in each worker, after the fork (its runtime's threads do not survive one), and
    # before the worker takes requests: else its first recalls wait a second or more for it, after every restart.
    model = embedding_model()
    # What is loaded by now lives as long as the worker. A full garbage collection walked all of it (~150 ms of
    # one thread holding the GIL: every request of the worker waits), as often as every forty recalls.
    _freeze_loaded()
    # "Booting worker" comes before the app loads; this line says the worker takes requests.
    worker.log.info("Worker %s is ready (embeddings: %s)", worker.pid, model.name if model else "off")


def _freeze_loaded() -> None:
    """Leave every object alive now out of later collections; the garbage loading made goes first (frozen, it
    would never be freed)."""
    gc.collect()
    gc.freeze()


def child_exit(server, worker) -> None:
    multiprocess.mark_process_dead(worker.pid)
