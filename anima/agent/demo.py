"""The demo's sample data and its prepared turn: Leo's morning Telegram chat, assembled on 2026-11-28's evening."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from anima.agent.turn import PEERS_NAME, messages_format, prepare_turn
from anima.core.calendar import BUCKET
from conversations.models import Conversation, Person
from memory.embedding import embed_backfill_run
from memory.selectors import memory_recall
from sleep.models import PipelineStepRun, StepStatus
from temporal.tick import temporal_tick_run

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "demo"
SAMPLE_DAYS = [dt.date(2026, 11, 26), dt.date(2026, 11, 27), dt.date(2026, 11, 28)]
DEMO_CONVERSATION = "demo-conv-leo-tg-1128-am"
CLEANUP_STEP = "conversation-cleanup"
DEMO_DAY_START = datetime.fromisoformat("2026-11-28T10:00+08:00")
# Evening, so Maya's 20:30 chat and Leo's 21:00 CLI chat sit in closed buckets as peers.
DEMO_AT = datetime.fromisoformat("2026-11-28T21:45+08:00")
DEMO_MESSAGE = "今晚上线顺利吗？小雨最近还好吗？"


def demo_conversation_lines(*, lines: Iterable[str]) -> tuple[list[str], int]:
    """The sample's conversation lines to import, and how many were left out.

    The sample's empty conversation is there for the first night's cleanup to delete. Once a sample
    night's cleanup has run, it is not imported again: only to be deleted again, it made every re-run
    report one conversation stored and one deleted.
    """
    lines = [line for line in lines if line.strip()]
    slept = PipelineStepRun.objects.filter(step=CLEANUP_STEP, status=StepStatus.SUCCEEDED, run__day__in=SAMPLE_DAYS)
    if not slept.exists():
        return lines, 0
    stored = set(Conversation.objects.values_list("external_id", flat=True))

    def deleted_by_cleanup(line: str) -> bool:
        record = json.loads(line)
        return not record.get("messages") and record["conversation"]["external_id"] not in stored

    kept = [line for line in lines if not deleted_by_cleanup(line)]
    return kept, len(lines) - len(kept)


def demo_prepared_turn(*, stdout) -> None:
    """Run the day's half-hourly ticks on a simulated clock, then print one prepared turn (not stored).

    Needs the bundled sample imported; safe to re-run (ticks add nothing new, rendered peer
    blocks are frozen).
    """
    conversation = Conversation.objects.select_related("person").filter(external_id=DEMO_CONVERSATION).first()
    if conversation is None:
        stdout.write(f"conversation {DEMO_CONVERSATION} not found: import the demo sample first")
        return
    tick = DEMO_DAY_START + BUCKET
    chunks = 0
    while tick <= DEMO_AT:
        chunks += temporal_tick_run(at=tick).get("chunks_written", 0)
        tick += BUCKET
    stdout.write(f"temporal ticks 10:30 … {(tick - BUCKET):%H:%M} on 2026-11-28 wrote {chunks} new chunks")
    messages = prepare_turn(conversation=conversation, user_message=DEMO_MESSAGE, now=DEMO_AT, store=False)
    names = [m["name"] for m in messages]
    stdout.write(
        f"prepare_turn --conversation {DEMO_CONVERSATION} --at {DEMO_AT.isoformat()} --no-store: "
        f"{len(messages)} messages, {names.count(PEERS_NAME)} temporal_summary_peers block(s), "
        f"passive recall {'yes' if 'passive_memory_context' in names else 'no'}"
    )
    stdout.write(messages_format(messages=messages))


# Shares no word with what is stored ("Maya works as a nurse in a hospital in Lisbon"): only the dense
# branch can find it.
MEANING_QUERY = "What is her job?"
MEANING_PERSON = "maya"


def demo_meaning_recall(*, stdout) -> None:
    """Embed what has no vector yet, then recall a memory by meaning alone (or say why recall is keyword-only)."""
    report = embed_backfill_run()
    if not report.available:
        stdout.write(f"no vectors: {report.reason}")
        return
    stdout.write(f"embedded {report.embedded} rows with {report.model} in {report.seconds:.1f} s")
    person = Person.objects.filter(slug=MEANING_PERSON).first()
    results = memory_recall(query=MEANING_QUERY, person=person, memory_types=["semantic"], limit=3)
    stdout.write(f"recall {MEANING_QUERY!r} for {MEANING_PERSON}:")
    for number, result in enumerate(results, start=1):
        branches = ", ".join(f"{branch} #{rank}" for branch, rank in sorted(result["ranks"].items()))
        stdout.write(f"  {number}. {result['snippet']}  (score {result['score']:.3f}: {branches})")
