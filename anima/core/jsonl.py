"""Line-numbered JSONL import: validate each line, keep the good ones, report the bad by number."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from django.utils import timezone

from anima.core.calendar import moment_from_iso
from anima.core.models import ImportRun

T = TypeVar("T")


class LineError(ValueError):
    """A line that cannot be imported; the message names the offending field."""


@dataclass
class ImportReport:
    lines: int = 0
    imported: int = 0
    created: dict[str, int] = field(default_factory=dict)
    errors: list[tuple[int, str]] = field(default_factory=list)

    def count(self, what: str, n: int) -> None:
        self.created[what] = self.created.get(what, 0) + n

    @property
    def ok(self) -> bool:
        return not self.errors


def numbered_objects(lines: Iterable[str], report: ImportReport) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line that is a JSON object."""
    for number, raw in enumerate(lines, start=1):
        report.lines = number
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            report.errors.append((number, f"invalid JSON: {exc.msg} at column {exc.colno}"))
            continue
        if not isinstance(obj, dict):
            report.errors.append((number, "expected a JSON object"))
            continue
        yield number, obj


def batched(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def check_keys(obj: dict[str, Any], *, where: str, required: set[str], optional: set[str]) -> None:
    unknown = set(obj) - required - optional
    if unknown:
        raise LineError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    missing = [key for key in sorted(required) if obj.get(key) in (None, "")]
    if missing:
        raise LineError(f"{where}.{missing[0]} is required")


def text_field(obj: dict[str, Any], key: str, *, where: str, default: str = "", max_length: int | None = None) -> str:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise LineError(f"{where}.{key} must be a string")
    if max_length is not None and len(value) > max_length:
        raise LineError(f"{where}.{key} is longer than {max_length} characters")
    if "\x00" in value:
        raise LineError(f"{where}.{key} contains a NUL character, which PostgreSQL text cannot store")
    return value


def json_field(obj: dict[str, Any], key: str, *, where: str) -> Any:
    """Free-form JSON stored as JSONB, which cannot hold a NUL character in any string."""
    value = obj.get(key)
    if value is not None and "\\u0000" in json.dumps(value):
        raise LineError(f"{where}.{key} contains a NUL character, which PostgreSQL JSONB cannot store")
    return value


def datetime_field(obj: dict[str, Any], key: str, *, where: str) -> datetime | None:
    """An ISO-8601 timestamp; one without an offset is read in ANIMA_TIME_ZONE."""
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise LineError(f"{where}.{key} must be an ISO-8601 string")
    parsed = moment_from_iso(value)
    if parsed is None:
        raise LineError(f"{where}.{key} is not a valid ISO-8601 date-time: {value!r}")
    return parsed


ProgressCallback = Callable[[ImportReport], None]


def jsonl_import(
    *,
    kind: str,
    lines: Iterable[str],
    parse: Callable[[int, dict[str, Any]], T],
    store: Callable[[list[T], ImportReport], None],
    batch_lines: int,
    progress: ProgressCallback | None = None,
) -> ImportReport:
    """Validate lines with ``parse`` (raising LineError), hand each batch of good ones to ``store``.

    Every import, finished or stopped by an error, leaves an ``ImportRun`` row of ``kind`` with its counts.
    """
    report = ImportReport()
    started_at = timezone.now()
    try:
        for batch in batched(numbered_objects(lines, report), batch_lines):
            parsed: list[T] = []
            for number, obj in batch:
                try:
                    parsed.append(parse(number, obj))
                except LineError as exc:
                    report.errors.append((number, str(exc)))
            if parsed:
                store(parsed, report)
            if progress:
                progress(report)
    finally:
        ImportRun.objects.create(
            kind=kind, lines=report.lines, imported=report.imported, bad=len(report.errors), started_at=started_at
        )
    return report
