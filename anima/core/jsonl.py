"""Line-numbered JSONL import: validate each line, keep the good ones, report the bad by number.

An import never stops part-way on bad input: a line that cannot be read (not UTF-8, not JSON,
nested too deeply), that breaks a rule (a field's type, size or date range) or that the database
refuses is reported by its number with the reason and skipped, and every other line is stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, TypeVar

from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from anima.core.calendar import MomentError, datetime_parse
from anima.core.db import database_unreachable
from anima.core.forgotten import forgotten_among, forgotten_fingerprint
from anima.core.jsonvalue import JsonValueError, json_loads, unstorable, unstorable_paths
from anima.core.models import ImportRun
from anima.core.text import MAX_TEXT_CHARS


class LineError(ValueError):
    """A line that cannot be imported; the message names the offending field."""


class ParsedLine(Protocol):
    line: int


T = TypeVar("T", bound=ParsedLine)


@dataclass
class ImportReport:
    lines: int = 0
    imported: int = 0
    created: dict[str, int] = field(default_factory=dict)
    errors: list[tuple[int, str]] = field(default_factory=list)
    # Lines skipped (or, when allowed, imported) because a forget took what they hold: no failure.
    warnings: list[tuple[int, str]] = field(default_factory=list)

    def count(self, what: str, n: int) -> None:
        self.created[what] = self.created.get(what, 0) + n

    def merge(self, other: ImportReport) -> None:
        self.imported += other.imported
        for what, n in other.created.items():
            self.count(what, n)
        self.errors.extend(other.errors)

    @property
    def ok(self) -> bool:
        return not self.errors


def numbered_objects(lines: Iterable[str | bytes], report: ImportReport) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line that is a JSON object.

    Lines may be bytes (a file opened in binary): each is decoded on its own, so a line that is
    not UTF-8 is reported with the byte at fault and the lines after it are still read.
    """
    offset = 0
    for number, raw in enumerate(lines, start=1):
        report.lines = number
        if isinstance(raw, bytes):
            start, offset = offset, offset + len(raw)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                where = f"byte {exc.start + 1} of the line, offset {start + exc.start} in the file"
                report.errors.append((number, f"not UTF-8 ({exc.reason} at {where})"))
                continue
        else:
            text = raw
        if not text.strip():
            continue
        try:
            obj = json_loads(text, where="line")
        except json.JSONDecodeError as exc:
            report.errors.append((number, f"invalid JSON: {exc.msg} at column {exc.colno}"))
            continue
        except JsonValueError as exc:
            report.errors.append((number, str(exc)))
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
        names = ", ".join(sorted(name if not unstorable(name) else repr(name) for name in unknown))
        raise LineError(f"{where}: unknown field(s) {names}")
    missing = [key for key in sorted(required) if obj.get(key) in (None, "")]
    if missing:
        raise LineError(f"{where}.{missing[0]} is required")


def text_field(
    obj: dict[str, Any],
    key: str,
    *,
    where: str,
    default: str = "",
    max_length: int = MAX_TEXT_CHARS,
    required: bool = False,
) -> str:
    """A string field: at most ``max_length`` characters, storable; ``required`` refuses one that is blank."""
    value = obj.get(key)
    if value is None:
        value = default
    if not isinstance(value, str):
        raise LineError(f"{where}.{key} must be a string")
    if len(value) > max_length:
        raise LineError(f"{where}.{key} is longer than {max_length} characters ({len(value)})")
    if unstorable(value):
        raise LineError(f"{where}.{key} contains a NUL character or a lone surrogate, which text cannot store")
    if required and not value.strip():
        raise LineError(f"{where}.{key} must not be empty")
    return value


def json_field(obj: dict[str, Any], key: str, *, where: str) -> Any:
    """Free-form JSON stored as JSONB, which cannot hold a NUL character or a lone surrogate in any string."""
    value = obj.get(key)
    paths = unstorable_paths(value)
    if paths:
        raise LineError(f"{where}.{key}: {paths[0]} contains a NUL character or a lone surrogate")
    return value


def datetime_field(obj: dict[str, Any], key: str, *, where: str) -> datetime | None:
    """An ISO-8601 timestamp within the accepted range; one without an offset is read in ANIMA_TIME_ZONE."""
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise LineError(f"{where}.{key} must be an ISO-8601 string")
    try:
        return datetime_parse(value, field=f"{where}.{key}")
    except MomentError as exc:
        raise LineError(str(exc)) from None


ProgressCallback = Callable[[ImportReport], None]
Store = Callable[[list[T], ImportReport], None]
# What of a line a forget may have taken: (fingerprint kind, text, what to call it in a warning).
Forgettable = Callable[[T], list[tuple[str, str, str]]]


def jsonl_import(
    *,
    kind: str,
    lines: Iterable[str | bytes],
    parse: Callable[[int, dict[str, Any]], T],
    store: Store,
    batch_lines: int,
    lock: int,
    progress: ProgressCallback | None = None,
    forgettable: Forgettable | None = None,
    allow_forgotten: bool = False,
) -> ImportReport:
    """Validate lines with ``parse`` (raising LineError), hand each batch of good ones to ``store``.

    A line holding what a forget took (``forgettable``, matched by the tombstones' fingerprints) is
    skipped with a warning naming it, unless ``allow_forgotten``: an old export must not undo an erasure.

    Each batch is stored in one transaction holding the advisory lock ``lock``, so concurrent
    imports of one kind take turns per batch and each sees what the other stored (no
    IntegrityError, true counts). A batch the database refuses is stored again line by line:
    the line at fault is reported with the database's reason, the others are kept. Every import,
    finished or stopped by an error, leaves an ``ImportRun`` row of ``kind`` with its counts.
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
            if parsed and forgettable is not None:
                parsed = _unforgotten(parsed, forgettable=forgettable, allow=allow_forgotten, report=report)
            if parsed:
                _store_batch(parsed, store=store, lock=lock, report=report)
            if progress:
                progress(report)
    finally:
        ImportRun.objects.create(
            kind=kind, lines=report.lines, imported=report.imported, bad=len(report.errors), started_at=started_at
        )
    report.errors.sort(key=lambda error: error[0])
    return report


def _unforgotten(parsed: list[T], *, forgettable: Forgettable, allow: bool, report: ImportReport) -> list[T]:
    held = {
        id(item): [(forgotten_fingerprint(kind=kind, text=text), label) for kind, text, label in forgettable(item)]
        for item in parsed
    }
    forgotten = forgotten_among(fingerprints=(fp for pairs in held.values() for fp, _ in pairs))
    if not forgotten:
        return parsed
    outcome = "imported anyway (--allow-forgotten)" if allow else "line not imported"
    kept = []
    for item in parsed:
        labels = list(dict.fromkeys(label for fp, label in held[id(item)] if fp in forgotten))
        if labels:
            report.warnings.append((item.line, f"{', '.join(labels)} was forgotten; {outcome}"))
            if not allow:
                continue
        kept.append(item)
    return kept


def _store_batch(parsed: list[T], *, store: Store, lock: int, report: ImportReport) -> None:
    try:
        report.merge(_store_locked(parsed, store=store, lock=lock))
        return
    except DatabaseError as exc:
        if database_unreachable(exc):
            raise
        if len(parsed) == 1:
            _refused(parsed[0], exc, report)
            return
    for item in parsed:
        try:
            report.merge(_store_locked([item], store=store, lock=lock))
        except DatabaseError as exc:
            if database_unreachable(exc):
                raise
            _refused(item, exc, report)


def _store_locked(parsed: list[T], *, store: Store, lock: int) -> ImportReport:
    batch_report = ImportReport()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [lock])
        store(parsed, batch_report)
    return batch_report


def _refused(item: ParsedLine, exc: DatabaseError, report: ImportReport) -> None:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    report.errors.append((item.line, f"refused by the database: {reason}"))
