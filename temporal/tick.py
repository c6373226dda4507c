"""The half-hourly temporal tick: one chunk per conversation with new messages today.

Each user-facing conversation (cron and debug excluded, as for light sleep: they are not
dialogue with a person) with dialogue after its watermark in the local day gets one chunk
``{at, bucket, summary, who, topic, watermark_message_id, watermark_at}`` appended to
``conversations.temporal_day`` ``{cst_date, chunks[]}``. Chunks are never changed once
written; a new local day starts a new list.

Two ticks may run at once (beat + an operator): each conversation is claimed with a
transaction-level advisory lock and its watermark re-read inside the lock, so a second tick
either skips a conversation being written or finds nothing new — no duplicate, no lost chunk.
The row itself is not locked during the LLM call, so new messages keep flowing meanwhile.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from anima.core.calendar import bucket_label, bucket_start, day_start, local_day, moment_iso
from anima.core.config import config_get
from anima.core.llm import LlmError, LlmInvalidOutput, llm_json
from anima.core.llm.schema import schema_object, schema_string
from conversations.models import Conversation, Message
from conversations.selectors import conversation_person
from temporal.models import TickMark
from temporal.privacy import TOPIC_RULE, topic_line
from temporal.rollup import peer_rollups_warm
from temporal.selectors import DIALOGUE_ROLES, EXCLUDED_PLATFORMS, DayConversation, person_label
from temporal.services import chars_budget, summary_clean

logger = logging.getLogger(__name__)

# Messages up to a minute ahead of the tick still count: beat may fire a little early.
LOOKAHEAD = timedelta(seconds=60)
_LOCK_NAMESPACE = 0x7E4D
_MESSAGE_CHARS = 1000
# A first consolidation (conversations/stm.py) may span thousands of messages: the newest that fit are sent.
_DIALOGUE_CHARS = 60_000

CHUNK_INSTRUCTIONS = (
    "Summarise what this conversation covered in the new messages, as one objective digest: the themes and "
    "outcomes, not a replay. `earlier_chunks` are today's earlier digests of the same conversation, given as "
    "context only: do not repeat them. Omit internal ids, step-by-step tool or configuration actions and "
    "timestamps. Write in the language of the messages, at most `max_chars` characters, with no preamble. "
    f"Add `topic`: {TOPIC_RULE}. "
    'Answer JSON: {"summary": str, "topic": str}.'
)
CHUNK_SCHEMA = schema_object(
    {"summary": schema_string(max_length=20000), "topic": schema_string(max_length=2000)}, required=["summary", "topic"]
)


@dataclass(frozen=True)
class Digest:
    summary: str
    # The validated topic line others may be shown (temporal.privacy).
    topic: str


# Acknowledgement openers a model puts before the digest ("好的，", "Sure, here is …:").


def day_chunks(*, conversation: Conversation, day: date) -> list[dict]:
    """The conversation's chunks of ``day`` (an older list counts as empty)."""
    state = conversation.temporal_day or {}
    return list(state.get("chunks") or []) if state.get("cst_date") == day.isoformat() else []


def messages_digest(
    *, conversation: Conversation, messages: list[Message], earlier: list[str], max_chars: int
) -> Digest:
    """One objective digest of ``messages`` and its topic line (LLM purpose ``temporal.chunk``); raises LlmError,
    LlmInvalidOutput for an answer with no digest in it."""
    item = DayConversation(conversation, messages)
    dialogue, used = [], 0
    for turn in reversed(item.dialogue()):
        used += min(len(turn["content"]), _MESSAGE_CHARS)
        if used > _DIALOGUE_CHARS:
            break
        dialogue.append({**turn, "content": turn["content"][:_MESSAGE_CHARS]})
    dialogue.reverse()
    answer = llm_json(
        purpose="temporal.chunk",
        instructions=CHUNK_INSTRUCTIONS,
        payload={**item.meta(), "earlier_chunks": earlier, "dialogue": dialogue, "max_chars": max_chars},
        schema=CHUNK_SCHEMA,
        max_tokens=chars_budget(max_chars),
    )
    summary = summary_clean(answer["summary"], max_chars=max_chars)
    if not summary:
        # An empty digest would stand for these messages: the tick's watermark, or the short-term summary, would
        # move past them with nothing said about them.
        raise LlmInvalidOutput("temporal.chunk: the answer's summary is empty")
    source = "\n".join(turn["content"] for turn in dialogue)
    return Digest(summary=summary, topic=topic_line(answer["topic"], source=source))


def temporal_tick_run(*, at: datetime | None = None) -> dict:
    """Run one tick as of ``at`` (default now); returns what it did."""
    now = at or timezone.now()
    config = config_get(section="memory.temporal_summary")
    if not config["enabled"]:
        return {"skipped_reason": "disabled"}
    # The tick at 10:30 closes the 10:00 bucket; the one at 00:00 closes yesterday's last.
    reference = now - LOOKAHEAD
    day = local_day(reference)
    recent = Message.objects.filter(
        conversation=OuterRef("pk"),
        role__in=DIALOGUE_ROLES,
        created_at__gte=day_start(day),
        created_at__lte=now + LOOKAHEAD,
    )
    candidates = list(
        Conversation.objects.exclude(platform__in=EXCLUDED_PLATFORMS)
        .filter(Exists(recent))
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    outcomes = {"written": 0, "unchanged": 0, "busy": 0, "failed": 0}
    for conversation_id in candidates:
        outcome = _conversation_tick(
            conversation_id=conversation_id,
            day=day,
            bucket=bucket_start(reference),
            now=now,
            max_chars=config["chunk_chars"],
        )
        outcomes[outcome] += 1
    tick_mark_advance(bucket=bucket_start(reference), now=now)
    return {
        "at": moment_iso(now),
        "cst_date": day.isoformat(),
        "conversations": len(candidates),
        "chunks_written": outcomes["written"],
        "unchanged": outcomes["unchanged"],
        "busy": outcomes["busy"],
        "failed": outcomes["failed"],
        "rollups_warmed": peer_rollups_warm(day=day, now=now),
    }


def tick_mark_advance(*, bucket: datetime, now: datetime) -> None:
    """Record that ticks have summarised ``bucket``; the mark only moves forward (ticks may overlap)."""
    with transaction.atomic():
        mark, created = TickMark.objects.select_for_update().get_or_create(
            pk=1, defaults={"bucket": bucket, "finished_at": now}
        )
        if not created and bucket > mark.bucket:
            TickMark.objects.filter(pk=1).update(bucket=bucket, finished_at=now)


def tick_mark_bucket() -> datetime | None:
    """The newest bucket a finished tick has summarised, or None before the first tick."""
    return TickMark.objects.filter(pk=1).values_list("bucket", flat=True).first()


def _conversation_tick(*, conversation_id: int, day: date, bucket: datetime, now: datetime, max_chars: int) -> str:
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_try_advisory_xact_lock(%s, %s)", [_LOCK_NAMESPACE, conversation_id % 2_147_483_647]
            )
            if not cursor.fetchone()[0]:
                return "busy"  # another tick is writing this conversation's chunk right now
        # Re-read inside the lock: the watermark may have moved since the candidate scan.
        conversation = Conversation.objects.select_related("person").get(pk=conversation_id)
        chunks = day_chunks(conversation=conversation, day=day)
        new = list(_after_watermark(conversation=conversation, chunks=chunks, day=day, until=now + LOOKAHEAD))
        if not new:
            return "unchanged"
        try:
            digest = messages_digest(
                conversation=conversation,
                messages=new,
                earlier=[chunk["summary"] for chunk in chunks],
                max_chars=max_chars,
            )
        except LlmError as exc:
            # The watermark stays put, so the next tick covers these messages.
            logger.warning("temporal tick: no chunk for conversation %s: %s", conversation_id, exc)
            return "failed"
        last = new[-1]
        chunk = {
            "at": moment_iso(now),
            "bucket": bucket_label(bucket),
            "summary": digest.summary,
            # Who and what, for other people's prompts (temporal.privacy); the summary is for the person's own.
            "who": person_label(conversation_person(conversation=conversation)),
            "topic": digest.topic,
            "watermark_message_id": str(last.pk),
            "watermark_at": moment_iso(last.created_at),
        }
        Conversation.objects.filter(pk=conversation_id).update(
            temporal_day={"cst_date": day.isoformat(), "chunks": [*chunks, chunk]}
        )
    return "written"


def _after_watermark(*, conversation: Conversation, chunks: list[dict], day: date, until: datetime):
    messages = Message.objects.filter(
        conversation=conversation, role__in=DIALOGUE_ROLES, created_at__gte=day_start(day), created_at__lte=until
    )
    if chunks:
        mark_at = datetime.fromisoformat(chunks[-1]["watermark_at"])
        mark_id = int(chunks[-1]["watermark_message_id"])
        messages = messages.filter(Q(created_at__gt=mark_at) | Q(created_at=mark_at, pk__gt=mark_id))
    return messages.order_by("created_at", "pk")
