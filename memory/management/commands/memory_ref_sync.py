from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from memory.citations import memory_ref_sync


class Command(BaseCommand):
    help = "Rebuild [[anima:ID]] references from user/assistant messages and recalibrate every reference_count."

    def handle(self, *args, **options) -> None:
        summary = memory_ref_sync()
        self.stdout.write(json.dumps(summary, sort_keys=True))
