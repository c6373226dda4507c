"""`python manage.py temporal_tick [--at ISO-8601]`: one temporal tick, optionally on a simulated clock."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandParser

from anima.core.commands import moment_arg
from temporal.tick import temporal_tick_run


class Command(BaseCommand):
    help = "Append a half-hour chunk to each conversation with new messages today, then warm peer rollups."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--at", type=moment_arg, help="run as of this moment (ISO-8601; naive = local time)")

    def handle(self, *args, **options) -> None:
        result = temporal_tick_run(at=options["at"])
        self.stdout.write(json.dumps(result, ensure_ascii=False))
