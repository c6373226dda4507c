from __future__ import annotations

from anima.core.commands import JsonlImportCommand
from memory.imports import memories_import


class Command(JsonlImportCommand):
    help = (
        "Import memories from JSONL: semantic types become semantic memories; limbic, narrative and dream "
        "become diary blocks of the created_at day. Idempotent; bad lines are reported by number and skipped."
    )
    what = "memories"

    def importer(self):
        return memories_import
