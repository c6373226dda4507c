"""Peer rollups: one merged digest of the other conversations' chunks in a closed bucket.

Cached under ``{prefix}:peer_roll:{date}:{bucket}:{sources_fp}``; ``sources_fp`` is a 16-hex
fingerprint of the canonical sorted (conversation_id, at, summary) set without the viewer, so
viewers that exclude the same peers share one entry. A miss asks the LLM to merge; when no
LLM answers, the summaries are concatenated and truncated.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import date, datetime

from django.utils import timezone

from anima.core.cache import cache_get_json, cache_set_json
from anima.core.calendar import bucket_label, closed_buckets
from anima.core.config import config_get
from anima.core.llm import LlmError, llm_json
from anima.core.text import clip
from conversations.models import Conversation
from temporal.services import SUMMARY_SCHEMA, summary_clean

logger = logging.getLogger(__name__)

WARM_BUCKETS = 4
Source = tuple[int, str, str]  # (conversation_id, chunk at, chunk summary)

ROLLUP_INSTRUCTIONS = (
    "Merge these digests of other conversations during one half-hour into a single objective digest: the "
    "themes and outcomes across them, without repeating yourself. Omit internal ids, step-by-step tool or "
    "configuration actions and timestamps. Write in the dominant language of the digests, at most `max_chars` "
    'characters, with no preamble. Answer JSON: {"summary": str}.'
)


def day_chunks_by_conversation(*, day: date) -> dict[int, list[dict]]:
    """Every conversation's chunks of local ``day``."""
    rows = Conversation.objects.filter(temporal_day__cst_date=day.isoformat()).values_list("pk", "temporal_day")
    return {pk: state.get("chunks") or [] for pk, state in rows}


def bucket_sources(*, chunks: dict[int, list[dict]], bucket: datetime, viewer_id: int | None) -> list[Source]:
    """The canonical sorted peer set of ``bucket`` as seen from ``viewer_id`` (its own chunks left out)."""
    label = bucket_label(bucket)
    return sorted(
        (conversation_id, chunk["at"], chunk["summary"])
        for conversation_id, items in chunks.items()
        if conversation_id != viewer_id
        for chunk in items
        if chunk["bucket"] == label and chunk["summary"]
    )


def sources_fingerprint(sources: list[Source]) -> str:
    canonical = json.dumps(sorted(sources), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def peer_rollup_key(*, day: date, bucket: datetime, sources_fp: str, prefix: str | None = None) -> str:
    """The cache key; ``prefix`` defaults to config ``memory.temporal_summary.redis_key_prefix``."""
    prefix = prefix or config_get(section="memory.temporal_summary")["redis_key_prefix"]
    return f"{prefix}:peer_roll:{day.isoformat()}:{bucket_label(bucket)}:{sources_fp}"


def summaries_concat(summaries: list[str], *, max_chars: int) -> str:
    """The no-LLM merge: distinct summaries as bullet lines, hard-cut to the cap."""
    return clip("\n".join(f"- {text}" for text in dict.fromkeys(summaries)), max_chars)


def peer_rollup_get(*, day: date, bucket: datetime, sources: list[Source]) -> dict | None:
    """The cached ``{summary, sources_fp, created_at}`` for this peer set, merged on a miss; None without peers."""
    if not sources:
        return None
    config = config_get(section="memory.temporal_summary")
    fingerprint = sources_fingerprint(sources)
    key = peer_rollup_key(day=day, bucket=bucket, sources_fp=fingerprint, prefix=config["redis_key_prefix"])
    cached = cache_get_json(key=key)
    if cached is not None:
        return cached
    value = {
        "summary": _merge([summary for _, _, summary in sources], bucket=bucket, max_chars=config["peer_rollup_chars"]),
        "sources_fp": fingerprint,
        "created_at": timezone.now().isoformat(),
    }
    cache_set_json(key=key, value=value, timeout_seconds=config["peer_rollup_ttl_hours"] * 3600)
    return value


def _merge(summaries: list[str], *, bucket: datetime, max_chars: int) -> str:
    try:
        answer = llm_json(
            purpose="temporal.peer-rollup",
            instructions=ROLLUP_INSTRUCTIONS,
            payload={"bucket": bucket_label(bucket), "summaries": summaries, "max_chars": max_chars},
            schema=SUMMARY_SCHEMA,
        )
    except LlmError as exc:
        logger.warning("peer rollup for %s: no LLM answer (%s); concatenating", bucket_label(bucket), exc)
        return summaries_concat(summaries, max_chars=max_chars)
    return summary_clean(answer["summary"], max_chars=max_chars) or summaries_concat(summaries, max_chars=max_chars)


def peer_rollups_warm(*, day: date, now: datetime) -> int:
    """Fill the cache for the last closed buckets, for every distinct peer set a viewer may ask for."""
    chunks = day_chunks_by_conversation(day=day)
    warmed = 0
    for bucket in closed_buckets(day=day, now=now)[-WARM_BUCKETS:]:
        # A viewer with no chunk in the bucket sees everyone; one with a chunk sees everyone else.
        viewers = {None, *chunks}
        peer_sets = {tuple(bucket_sources(chunks=chunks, bucket=bucket, viewer_id=viewer)) for viewer in viewers}
        for sources in peer_sets:
            if sources:
                peer_rollup_get(day=day, bucket=bucket, sources=list(sources))
                warmed += 1
    return warmed
