from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from anima.core.commands import time_zone_arg
from memory.workspace import WorkspaceError, workspace_import


class Command(BaseCommand):
    help = (
        "Import a person-memory workspace from DIR (export_workspace's layout, or one nanobot wrote). Idempotent and "
        "all-or-nothing: any bad file is reported as file:line and nothing is written; what is skipped (unknown "
        "fields, prose outside lists, what a forget took) is a warning on standard error and the import goes on."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dir", help="workspace directory")
        parser.add_argument("--force", action="store_true", help="also overwrite a locked self-layer block")
        parser.add_argument(
            "--allow-forgotten",
            action="store_true",
            help="also import what was forgotten (an erased person, forgotten memories), still naming it",
        )
        parser.add_argument(
            "--time-zone", type=time_zone_arg, help="zone of timestamps without an offset (default: ANIMA_TIME_ZONE)"
        )

    def handle(self, *args, dir: str, force: bool, allow_forgotten: bool, time_zone, **options) -> None:
        try:
            result = workspace_import(root=Path(dir), force=force, tz=time_zone, allow_forgotten=allow_forgotten)
        except WorkspaceError as exc:
            raise CommandError(f"{dir}: not imported\n{exc}") from None
        for warning in result.warnings:
            self.stderr.write(f"warning: {warning}")
        created = ", ".join(f"{n} {what}" for what, n in sorted(result.counts.items())) or "nothing new"
        self.stdout.write(f"imported {dir}: {created}")
