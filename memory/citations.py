"""``[[anima:ID]]`` citations in message bodies become memory references (SPEC M5).

Only user and assistant bodies count; tool results, bare numbers and ids of
entities that do not exist never do. A message citing the same id twice counts
once. The weight matches memory-ref-sync's rule (2 for a message under 30 days
old, else 1) so a nightly recalibration changes nothing when nothing drifted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.utils import timezone

from anima.models import Entity
from conversations.models import Message, Role
from memory.models import MemoryReference

CITATION_RE = re.compile(r"\[\[anima:(\d{1,18})\]\]")
CITING_ROLES = frozenset({Role.USER, Role.ASSISTANT})
RECENT_WINDOW = timedelta(days=30)


def cited_ids(text: str) -> set[int]:
    return {int(match) for match in CITATION_RE.findall(text or "")}


def reference_weight(*, message_at: datetime, now: datetime) -> int:
    return 2 if now - message_at < RECENT_WINDOW else 1


def citations_record(*, messages: Iterable[Message], now: datetime | None = None) -> None:
    """Insert the references the given (saved) messages make; already-recorded ones are left as they are."""
    now = now or timezone.now()
    wanted: list[tuple[Message, int]] = [
        (message, entity_id)
        for message in messages
        if message.role in CITING_ROLES
        for entity_id in cited_ids(message.content)
    ]
    if not wanted:
        return
    existing = set(Entity.objects.filter(pk__in={entity_id for _, entity_id in wanted}).values_list("pk", flat=True))
    rows = [
        MemoryReference(
            entity_id=entity_id,
            message_id=message.pk,
            weight=reference_weight(message_at=message.created_at, now=now),
            created_at=now,
        )
        for message, entity_id in wanted
        if entity_id in existing
    ]
    # ON CONFLICT DO NOTHING: re-recording a message (re-import) never counts twice.
    MemoryReference.objects.bulk_create(rows, ignore_conflicts=True)
