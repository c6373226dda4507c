"""``[[anima:ID]]`` citations in message bodies become memory references.

Only user and assistant bodies count; tool results, bare numbers and ids of
entities that do not exist never do. Limbic blocks are append-only (a database
trigger refuses any update), so they are not citable and carry no count. A
message counts only citations of what its conversation's person could see — their own entities
and global (person-less) ones — so a reply in Leo's conversation citing Maya's ids raises nothing
of hers (nor does one in a conversation whose human is unknown, except for global ones). A
message citing the same id twice counts once. The weight matches memory-ref-sync's rule (2 for a message under 30 days
old, else 1) so a nightly recalibration changes nothing when nothing drifted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from anima.core.models import BlockTag, Component, Entity
from conversations.models import Conversation, Message, Platform, Role
from conversations.selectors import conversations_persons
from memory.models import MemoryReference

CITATION_RE = re.compile(r"\[\[anima:(\d{1,18})\]\]")
CITING_ROLES = frozenset({Role.USER, Role.ASSISTANT})
RECENT_WINDOW = timedelta(days=30)


def cited_ids(text: str) -> set[int]:
    return {int(match) for match in CITATION_RE.findall(text or "")}


def cited_foreign(*, text: str, person_id: int | None) -> list[int]:
    """The ids ``text`` cites of entities that belong to someone other than ``person_id``.

    A text written about a person may cite that person's entities and global (person-less) ones only.
    """
    ids = cited_ids(text)
    if not ids:
        return []
    owners = Entity.objects.filter(pk__in=ids).values_list("pk", "person_id")
    return sorted(pk for pk, owner in owners if owner is not None and owner != person_id)


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
    conversation_ids = {message.conversation_id for message, _ in wanted}
    # Cron conversations are background jobs, not dialogue: as in memory_ref_sync, they never count.
    cron = set(
        Conversation.objects.filter(pk__in=conversation_ids, platform=Platform.CRON).values_list("pk", flat=True)
    )
    wanted = [(message, entity_id) for message, entity_id in wanted if message.conversation_id not in cron]
    owners = dict(
        Entity.objects.filter(pk__in={entity_id for _, entity_id in wanted})
        .exclude(primary_component=Component.CONTENT_BLOCK, tag=BlockTag.LIMBIC)
        .values_list("pk", "person_id")
    )
    persons = conversations_persons(conversation_ids=conversation_ids)
    rows = [
        MemoryReference(
            entity_id=entity_id,
            message_id=message.pk,
            weight=reference_weight(message_at=message.created_at, now=now),
            created_at=now,
        )
        for message, entity_id in wanted
        # Their own or a global one (owner None); a conversation of nobody known sees global ones only.
        if entity_id in owners and owners[entity_id] in (None, persons.get(message.conversation_id))
    ]
    # ON CONFLICT DO NOTHING: re-recording a message (re-import) never counts twice.
    MemoryReference.objects.bulk_create(rows, ignore_conflicts=True)


def citations_on_messages_stored(*, messages: Iterable[Message], **_signal) -> None:
    """``conversations.signals.messages_stored`` receiver: count the citations of messages just stored."""
    citing = [m for m in messages if CITATION_RE.search(m.content)]
    if citing:
        citations_record(messages=citing)


# Every (message, entity) a user/assistant message of a non-cron conversation cites, with its weight
# today, when the entity is the conversation's person's (``viewer_id``, resolved as
# conversations.selectors.conversation_person does) or global. The LIKE prefilter keeps the regex
# off messages that cannot contain a marker.
_WANTED_SQL = """
CREATE TEMP TABLE ref_sync_wanted ON COMMIT DROP AS
SELECT DISTINCT m.id AS message_id, e.id AS entity_id,
       CASE WHEN %(now)s - m.created_at < %(window)s THEN 2 ELSE 1 END AS weight,
       COALESCE(c.person_id, i.person_id) AS viewer_id
FROM messages m
JOIN conversations c ON c.id = m.conversation_id
LEFT JOIN identities i ON c.person_id IS NULL AND c.chat_id <> ''
    AND i.channel = COALESCE(NULLIF(c.channel, ''), c.platform) AND i.external_id = c.chat_id
CROSS JOIN LATERAL regexp_matches(m.content, '\\[\\[anima:(\\d{1,18})\\]\\]', 'g') AS marker
JOIN entities e ON e.id = marker[1]::bigint AND NOT (e.primary_component = 'content_block' AND e.tag = 'limbic')
    AND (e.person_id IS NULL OR e.person_id = COALESCE(c.person_id, i.person_id))
WHERE m.role IN ('user', 'assistant') AND c.platform <> 'cron' AND m.content LIKE '%%[[anima:%%'
"""

# A citation of a memory that was merged or split also counts for what carries its content now (following
# chains of merges), so consolidation never costs a fact its weight; a memory retired because the fact
# changed keeps its citations to itself. What carries it counts only when the citing conversation's
# person could see it too.
_CARRY_SQL = """
INSERT INTO ref_sync_wanted (message_id, entity_id, weight, viewer_id)
WITH RECURSIVE carried(message_id, entity_id, weight, viewer_id, depth) AS (
    SELECT w.message_id, e.superseded_by_id, w.weight, w.viewer_id, 1
    FROM ref_sync_wanted w JOIN entities e ON e.id = w.entity_id
    WHERE e.superseded_by_id IS NOT NULL
      AND (e.expired_reason LIKE 'merged into %%' OR e.expired_reason LIKE 'split into %%')
    UNION
    SELECT c.message_id, e.superseded_by_id, c.weight, c.viewer_id, c.depth + 1
    FROM carried c JOIN entities e ON e.id = c.entity_id
    WHERE e.superseded_by_id IS NOT NULL AND c.depth < 32
      AND (e.expired_reason LIKE 'merged into %%' OR e.expired_reason LIKE 'split into %%')
)
SELECT DISTINCT c.message_id, c.entity_id, c.weight, c.viewer_id FROM carried c
JOIN entities successor ON successor.id = c.entity_id
    AND (successor.person_id IS NULL OR successor.person_id = c.viewer_id)
WHERE NOT EXISTS (SELECT 1 FROM ref_sync_wanted w WHERE w.message_id = c.message_id AND w.entity_id = c.entity_id)
"""

_SYNC_STEPS = {
    "references_removed": """
        DELETE FROM memory_references r
        WHERE NOT EXISTS (
            SELECT 1 FROM ref_sync_wanted w WHERE w.message_id = r.message_id AND w.entity_id = r.entity_id)
    """,
    "weights_changed": """
        UPDATE memory_references r SET weight = w.weight
        FROM ref_sync_wanted w
        WHERE w.message_id = r.message_id AND w.entity_id = r.entity_id AND r.weight <> w.weight
    """,
    "references_added": """
        INSERT INTO memory_references (message_id, entity_id, weight, created_at)
        SELECT w.message_id, w.entity_id, w.weight, %(now)s FROM ref_sync_wanted w
        ON CONFLICT (message_id, entity_id) DO NOTHING
    """,
    # The triggers kept counts in step with the rows above; this also repairs counts that had drifted.
    "counts_changed": """
        UPDATE entities e SET reference_count = COALESCE(totals.total, 0)
        FROM entities target
        LEFT JOIN (SELECT entity_id, SUM(weight) AS total FROM memory_references GROUP BY entity_id) totals
            ON totals.entity_id = target.id
        WHERE e.id = target.id AND e.reference_count IS DISTINCT FROM COALESCE(totals.total, 0)
    """,
}


def memory_ref_sync(*, now: datetime | None = None) -> dict[str, int]:
    """Rebuild references from the messages and recalibrate every ``reference_count`` (nightly step).

    Set-based SQL in one transaction; returns how many rows each step changed.
    """
    params = {"now": now or timezone.now(), "window": RECENT_WINDOW}
    summary: dict[str, int] = {}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_WANTED_SQL, params)
        cursor.execute(_CARRY_SQL, params)
        cursor.execute("SELECT count(*) FROM ref_sync_wanted")
        summary["citations"] = cursor.fetchone()[0]
        for name, sql in _SYNC_STEPS.items():
            cursor.execute(sql, params)
            summary[name] = cursor.rowcount
        # ON COMMIT DROP does not fire when the caller's transaction is still open.
        cursor.execute("DROP TABLE ref_sync_wanted")
    return summary
