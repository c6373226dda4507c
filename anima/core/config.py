"""Runtime configuration: defaults in code, validated overrides stored in the database.

Sections are read with ``config_get(section=...)`` and changed with
``config_update(...)``; a change is validated as a whole and either applied whole
or refused with a message naming the field — never half-applied.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models.signals import post_delete, post_save

from anima.core.models import RuntimeConfig, RuntimeConfigChange


@dataclass(frozen=True)
class Field:
    kind: type
    default: Any
    minimum: float | None = None
    maximum: float | None = None
    help: str = ""
    choices: tuple[str, ...] = ()

    def clean(self, name: str, value: Any) -> Any:
        if self.kind is bool:
            if not isinstance(value, bool):
                raise ValidationError({name: f"{name} must be true or false"})
            return value
        if self.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if self.kind is int and isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, self.kind):
            raise ValidationError({name: f"{name} must be of type {self.kind.__name__}"})
        if self.kind is float and not math.isfinite(value):
            raise ValidationError({name: f"{name} must be a finite number"})
        if self.kind is str and not value.strip():
            raise ValidationError({name: f"{name} must not be empty"})
        if self.choices and value not in self.choices:
            raise ValidationError({name: f"{name} must be one of {', '.join(self.choices)}"})
        if self.minimum is not None and value < self.minimum:
            raise ValidationError({name: f"{name} must be >= {self.minimum}"})
        if self.maximum is not None and value > self.maximum:
            raise ValidationError({name: f"{name} must be <= {self.maximum}"})
        return value


SCHEMA: dict[str, dict[str, Field]] = {
    "memory.temporal_summary": {
        "enabled": Field(bool, True),
        "chunk_chars": Field(int, 400, 50, 4000, "cap of one conversation's half-hour chunk"),
        "peer_rollup_chars": Field(int, 500, 50, 4000, "cap of one merged peer digest"),
        "day_chars": Field(int, 800, 100, 8000),
        "month_chars": Field(int, 2000, 100, 20000),
        "year_chars": Field(int, 2500, 100, 20000),
        "system_prompt_chars": Field(int, 6000, 500, 50000, "cap of the system prompt's time-summary section"),
        "redis_key_prefix": Field(str, "anima:temporal"),
        "peer_rollup_ttl_hours": Field(int, 36, 1, 24 * 14),
        "cross_person": Field(
            str,
            "topics",
            choices=("topics", "full", "none"),
            help="what a prompt shows of other people's conversations: their topic lines, their text, or nothing",
        ),
    },
    "memory.passive_recall": {
        "enabled": Field(bool, True),
        "limit": Field(int, 5, 1, 20),
        "min_score": Field(
            float,
            0.29,
            0.0,
            1.0,
            "offer a memory at least this likely to be relevant (recall's calibrated score, with vectors)",
        ),
        "min_share_of_best": Field(
            float,
            1.0,
            0.0,
            1.0,
            "with vectors: offer only memories scoring at least this share of their reading's best (the message alone,"
            " after the conversation; 1: each reading's best, and any as likely)",
        ),
        "min_relative_score": Field(
            float, 0.55, 0.0, 1.0, "keyword-only recall (no vectors): offer memories within this share of the best"
        ),
        "context_messages": Field(
            int, 8, 0, 20, "the message is also read after this many of the conversation's latest messages"
        ),
        "max_chars": Field(int, 2000, 100, 20000),
        "exclude_resident": Field(bool, True),
    },
    "memory.resident": {
        "pinned_limit": Field(int, 40, 0, 40, "pinned memories in the system prompt (hard cap 40)"),
        "top_referenced": Field(int, 20, 0, 200, "most-referenced memories added after the pinned ones"),
    },
    "sleep": {
        "token_budget": Field(int, 400_000, 1000, 100_000_000, "LLM tokens one sleep cycle may spend"),
        "dialogue_max_chars": Field(int, 120_000, 1000, 1_000_000, "light sleep: dialogue cap per conversation"),
        "deep_sleep_warn_bytes": Field(int, 10_000, 1000, 10_000_000),
        "deep_sleep_batch_bytes": Field(int, 300_000, 10_000, 10_000_000),
        "deep_sleep_change_share": Field(
            float, 0.2, 0.0, 1.0, "deep sleep: at most this share of the active memories changes in one night"
        ),
        "deep_sleep_min_changes": Field(
            int, 5, 0, 100_000, "deep sleep: changes a night may always make, however few memories there are"
        ),
        "dream_min_intensity": Field(float, 0.5, 0.0, 1.0),
        "limbic_min_intensity": Field(float, 0.3, 0.0, 1.0),
    },
    "stm": {
        "max_summary_chars": Field(int, 1500, 100, 20000),
        "summary_ttl_hours": Field(int, 24, 1, 24 * 30),
        "raw_ttl_hours": Field(int, 12, 1, 24 * 30),
        "consolidate_after_messages": Field(int, 60, 10, 10000),
        "retry_after_minutes": Field(
            int, 10, 1, 24 * 60, "after a failed consolidation, minutes before the model is asked again"
        ),
    },
}


def config_defaults(*, section: str) -> dict[str, Any]:
    return {name: field.default for name, field in _schema(section).items()}


# Every turn reads several sections and they change rarely (an operator's edit): each process keeps the
# stored overrides it read for this long. A change saved in this process clears them at once and at commit (the
# model's signals, below); other processes (web and Celery workers) see it within this time.
CONFIG_CACHE_SECONDS = 5.0
_stored: dict[str, tuple[float, dict[str, Any]]] = {}
_stored_lock = threading.Lock()


def config_get(*, section: str) -> dict[str, Any]:
    """The effective values of one section: defaults overlaid with stored overrides."""
    values = config_defaults(section=section)
    now = time.monotonic()
    cached = _stored.get(section)
    if cached is None or now - cached[0] > CONFIG_CACHE_SECONDS:
        row = RuntimeConfig.objects.filter(section=section).values_list("values", flat=True).first()
        cached = (now, dict(row or {}))
        with _stored_lock:
            _stored[section] = cached
    values.update({key: value for key, value in cached[1].items() if key in values})
    return values


def config_cache_clear(**_signal) -> None:
    """Forget the stored overrides read so far (a row changed, or a test's database rolled back)."""
    with _stored_lock:
        _stored.clear()


def _row_changed(*, using: str, **_signal) -> None:
    # At once, so the thread that saved reads its change; and again at commit: another thread of this process
    # reading meanwhile saw (and kept) the row as committed before.
    config_cache_clear()
    transaction.on_commit(config_cache_clear, using=using)


post_save.connect(_row_changed, sender=RuntimeConfig, dispatch_uid="anima-config-cache-save")
post_delete.connect(_row_changed, sender=RuntimeConfig, dispatch_uid="anima-config-cache-delete")


def config_validate(*, section: str, values: dict[str, Any]) -> dict[str, Any]:
    """Validate a partial update; returns the cleaned values or raises ValidationError naming fields."""
    schema = _schema(section)
    if not isinstance(values, dict):
        raise ValidationError({section: "values must be an object"})
    errors: dict[str, list[str]] = {}
    cleaned: dict[str, Any] = {}
    for name, value in values.items():
        if name not in schema:
            errors.setdefault(name, []).append(f"unknown setting {name!r} in {section}")
            continue
        try:
            cleaned[name] = schema[name].clean(name, value)
        except ValidationError as exc:
            for field, messages in exc.message_dict.items():
                errors.setdefault(field, []).extend(messages)
    if errors:
        raise ValidationError(errors)
    return cleaned


def config_update(*, section: str, values: dict[str, Any], changed_by: str = "") -> dict[str, Any]:
    """Apply a validated partial update atomically and record who changed what."""
    cleaned = config_validate(section=section, values=values)
    with transaction.atomic():
        row, _ = RuntimeConfig.objects.select_for_update().get_or_create(section=section)
        before = dict(row.values)
        row.values = {**before, **cleaned}
        row.save(update_fields=["values", "updated_at"])
        RuntimeConfigChange.objects.create(section=section, before=before, after=row.values, changed_by=changed_by)
    return config_get(section=section)


def _schema(section: str) -> dict[str, Field]:
    try:
        return SCHEMA[section]
    except KeyError:
        raise ValidationError({"section": f"unknown config section {section!r}; one of {', '.join(SCHEMA)}"}) from None
