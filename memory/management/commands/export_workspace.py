from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from anima.core.commands import time_zone_arg
from memory.workspace import workspace_export


class Command(BaseCommand):
    help = (
        "Export the person-memory workspace (SOUL.md, USER.md, memory/MEMORY.md, memory/history.jsonl, "
        "memory/identity_map.yaml, memory/persons/<p>/...) into DIR; files there with these names, and "
        "memory/persons, are replaced once every file is written."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dir", help="target directory (created if missing)")
        parser.add_argument(
            "--time-zone",
            type=time_zone_arg,
            help="zone the history timestamps are written in (default: ANIMA_TIME_ZONE)",
        )

    def handle(self, *args, dir: str, time_zone, **options) -> None:
        root = Path(dir)
        written = workspace_export(root=root, tz=time_zone)
        self.stdout.write(f"exported {len(written)} files to {root}")
