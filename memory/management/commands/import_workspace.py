from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory.workspace import WorkspaceError, workspace_import


class Command(BaseCommand):
    help = (
        "Import a person-memory workspace from DIR (layout of export_workspace). Idempotent and all-or-nothing: "
        "any bad file is reported as file:line and nothing is written."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dir", help="workspace directory")
        parser.add_argument("--force", action="store_true", help="also overwrite a locked self-layer block")

    def handle(self, *args, dir: str, force: bool, **options) -> None:
        try:
            counts = workspace_import(root=Path(dir), force=force)
        except WorkspaceError as exc:
            raise CommandError(f"{dir}: not imported\n{exc}") from None
        created = ", ".join(f"{n} {what}" for what, n in sorted(counts.items())) or "nothing new"
        self.stdout.write(f"imported {dir}: {created}")
