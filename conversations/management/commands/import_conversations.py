from __future__ import annotations

from anima.core.commands import JsonlImportCommand
from conversations.services import conversations_import


class Command(JsonlImportCommand):
    help = (
        "Import conversations from JSONL: one {conversation: {...}, messages: [...]} per line. "
        "Idempotent; bad lines are reported by number and skipped."
    )
    what = "conversations"

    def importer(self):
        return conversations_import
