"""Shared pieces of management commands: ISO moment arguments, and the JSONL import command's shape
(progress on stderr, bad lines by number, exit 1 if any)."""

from __future__ import annotations

import argparse
import sys
import time
import zoneinfo
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from anima.core.calendar import DATE_RANGE_TEXT, MomentError, datetime_parse, moment_check
from anima.core.jsonl import ImportReport, ProgressCallback

MAX_ERRORS_SHOWN = 50


def moment_arg(value: str) -> datetime:
    """An argparse ``type=`` for ``--at``-style options: an ISO-8601 moment, naive = local time."""
    try:
        return datetime_parse(value, field="moment")
    except MomentError:
        raise argparse.ArgumentTypeError(
            f"must be ISO-8601 (e.g. 2026-11-28T15:30+08:00) and {DATE_RANGE_TEXT}, got {value!r}"
        ) from None


def time_zone_arg(value: str) -> zoneinfo.ZoneInfo:
    """An argparse ``type=`` for ``--time-zone``: an IANA zone such as Asia/Shanghai."""
    try:
        return zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise argparse.ArgumentTypeError(f"must be an IANA time zone such as Asia/Shanghai, got {value!r}") from None


def date_arg(value: str) -> date:
    """An argparse ``type=`` for ``--day``-style options: YYYY-MM-DD within the accepted range."""
    try:
        day = date.fromisoformat(value)
        moment_check(day, field="date")
    except (ValueError, MomentError):
        raise argparse.ArgumentTypeError(f"expected a date as YYYY-MM-DD {DATE_RANGE_TEXT}, got {value!r}") from None
    return day


class JsonlImportCommand(BaseCommand):
    what = "lines"

    def importer(self) -> Callable[..., ImportReport]:
        raise NotImplementedError

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="JSONL file, one object a line ('-' reads standard input)")
        parser.add_argument("--quiet", action="store_true", help="no progress output")
        parser.add_argument(
            "--allow-forgotten",
            action="store_true",
            help="also import lines holding what was forgotten (an erased person, a forgotten memory), named",
        )

    def handle(self, *args, file: str, quiet: bool, allow_forgotten: bool, **options) -> None:
        started = time.monotonic()
        progress = None if quiet else self._progress(started)
        # Bytes: each line is decoded on its own, so one that is not UTF-8 is reported and skipped.
        if file == "-":
            report = self.importer()(lines=sys.stdin.buffer, progress=progress, allow_forgotten=allow_forgotten)
        else:
            path = Path(file)
            if not path.is_file():
                raise CommandError(f"{file}: no such file")
            with path.open("rb") as handle:
                report = self.importer()(lines=handle, progress=progress, allow_forgotten=allow_forgotten)
        elapsed = max(time.monotonic() - started, 1e-9)
        created = ", ".join(f"{n} {what}" for what, n in sorted(report.created.items())) or "nothing new"
        self.stdout.write(
            f"{report.imported} {self.what} read from {report.lines} lines in {elapsed:.1f}s; stored {created}."
        )
        for number, message in report.warnings:
            self.stderr.write(f"line {number}: warning: {message}")
        for number, message in report.errors[:MAX_ERRORS_SHOWN]:
            self.stderr.write(f"line {number}: {message}")
        if len(report.errors) > MAX_ERRORS_SHOWN:
            self.stderr.write(f"… and {len(report.errors) - MAX_ERRORS_SHOWN} more bad lines")
        if report.errors:
            raise CommandError(f"{len(report.errors)} bad line(s) skipped; the other lines were imported", returncode=1)

    def _progress(self, started: float) -> ProgressCallback:
        last = [started]

        def report_progress(report: ImportReport) -> None:
            now = time.monotonic()
            if now - last[0] < 1.0:
                return
            last[0] = now
            rate = report.lines / max(now - started, 1e-9)
            self.stderr.write(f"… {report.lines} lines ({rate:,.0f} lines/s), {len(report.errors)} bad")

        return report_progress
