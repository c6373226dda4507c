"""`python manage.py temporal_tick [--at ISO-8601]`: one temporal tick, optionally on a simulated clock."""

from __future__ import annotations

import json
from datetime import datetime

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from temporal.tick import temporal_tick_run


def parse_at(value: str | None) -> datetime | None:
    """An ISO-8601 moment; a naive one is local time (ANIMA_TIME_ZONE)."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(f"--at must be ISO-8601 (e.g. 2026-11-28T15:30+08:00), got {value!r}") from None
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment)


class Command(BaseCommand):
    help = "Append a half-hour chunk to each conversation with new messages today, then warm peer rollups."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--at", help="run as of this moment (ISO-8601; naive = local time)")

    def handle(self, *args, **options) -> None:
        result = temporal_tick_run(at=parse_at(options["at"]))
        self.stdout.write(json.dumps(result, ensure_ascii=False))
