from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from memory.workspace import workspace_export


class Command(BaseCommand):
    help = (
        "Export the person-memory workspace (SOUL.md, USER.md, memory/MEMORY.md, memory/history.jsonl, "
        "memory/identity_map.yaml, memory/persons/<p>/...) into DIR; files there with these names are overwritten."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dir", help="target directory (created if missing)")

    def handle(self, *args, dir: str, **options) -> None:
        root = Path(dir)
        written = workspace_export(root=root)
        self.stdout.write(f"exported {len(written)} files to {root}")
