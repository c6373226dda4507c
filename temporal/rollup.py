"""Peer rollups: digests of the other conversations' chunks in a closed bucket, as one viewer may see them.

A viewer's peers split in two classes: *own* — chunks of other conversations of the viewer's
person (and, with ``cross_person`` = ``full``, everyone's) — merged from their summaries; and
*other* — other people's chunks, as their topic lines only (``topics``; none with ``none``).
Each class is cached under ``{prefix}:peer_roll:{date}:{bucket}:{sources_fp}:{viewer_class}``;
``sources_fp`` is a 16-hex fingerprint of the canonical sorted (conversation_id, at, text) set,
so viewers with the same peers of a class share one entry. An own miss asks the LLM to merge
(when no LLM answers, the summaries are concatenated and truncated); the other class is the
distinct topic lines, which no model rewrites.
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
from conversations.models import Conversation, Language
from conversations.selectors import conversation_language, conversations_persons
from temporal.privacy import FULL, TOPICS, chunk_topic, cross_person_mode
from temporal.services import SUMMARY_SCHEMA, chars_budget, summary_clean

logger = logging.getLogger(__name__)

WARM_BUCKETS = 4
Source = tuple[int, str, str]  # (conversation_id, chunk at, chunk summary or topic line)
OWN, OTHER = "own", "other"
VIEWER_CLASSES = (OWN, OTHER)

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


def bucket_sources(
    *,
    chunks: dict[int, list[dict]],
    bucket: datetime,
    viewer_id: int | None,
    owners: dict[int, int | None],
    viewer_person_id: int | None,
    mode: str,
    chinese: bool,
    script: str = "",
) -> dict[str, list[Source]]:
    """The canonical sorted peer sets of ``bucket`` seen from ``viewer_id``, by viewer class.

    ``owners`` maps each conversation to its person; the viewer's own chunks are left out. Topic lines are in
    the viewer's language (``chinese``) and characters (``script``), so each has its own fingerprint.
    """
    label = bucket_label(bucket)
    peers: dict[str, list[Source]] = {OWN: [], OTHER: []}
    for conversation_id, items in chunks.items():
        if conversation_id == viewer_id:
            continue
        own = viewer_person_id is not None and owners.get(conversation_id) == viewer_person_id
        for chunk in items:
            if chunk["bucket"] != label or not chunk["summary"]:
                continue
            if own or mode == FULL:
                peers[OWN].append((conversation_id, chunk["at"], chunk["summary"]))
            elif mode == TOPICS:
                peers[OTHER].append((conversation_id, chunk["at"], chunk_topic(chunk, chinese=chinese, script=script)))
    return {viewer_class: sorted(sources) for viewer_class, sources in peers.items()}


def sources_fingerprint(sources: list[Source]) -> str:
    canonical = json.dumps(sorted(sources), ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def peer_rollup_key(
    *, day: date, bucket: datetime, sources_fp: str, viewer_class: str, prefix: str | None = None
) -> str:
    """The cache key; ``prefix`` defaults to config ``memory.temporal_summary.redis_key_prefix``."""
    prefix = prefix or config_get(section="memory.temporal_summary")["redis_key_prefix"]
    return f"{prefix}:peer_roll:{day.isoformat()}:{bucket_label(bucket)}:{sources_fp}:{viewer_class}"


def summaries_concat(summaries: list[str], *, max_chars: int) -> str:
    """The no-LLM merge: distinct summaries as bullet lines, hard-cut to the cap."""
    return clip("\n".join(f"- {text}" for text in dict.fromkeys(summaries)), max_chars)


def peer_rollup_get(*, day: date, bucket: datetime, sources: list[Source], viewer_class: str) -> dict | None:
    """The cached ``{summary, sources_fp, created_at}`` of this peer set and class, made on a miss.

    None without peers.
    """
    if not sources:
        return None
    config = config_get(section="memory.temporal_summary")
    fingerprint = sources_fingerprint(sources)
    key = peer_rollup_key(
        day=day, bucket=bucket, sources_fp=fingerprint, viewer_class=viewer_class, prefix=config["redis_key_prefix"]
    )
    cached = cache_get_json(key=key)
    if cached is not None:
        return cached
    texts = [text for _, _, text in sources]
    max_chars = config["peer_rollup_chars"]
    summary = (
        _merge(texts, bucket=bucket, max_chars=max_chars)
        if viewer_class == OWN
        else summaries_concat(texts, max_chars=max_chars)
    )
    value = {"summary": summary, "sources_fp": fingerprint, "created_at": timezone.now().isoformat()}
    cache_set_json(key=key, value=value, timeout_seconds=config["peer_rollup_ttl_hours"] * 3600)
    return value


def peer_rollups(
    *,
    day: date,
    bucket: datetime,
    chunks: dict[int, list[dict]],
    owners: dict[int, int | None],
    viewer_id: int | None,
    viewer_person_id: int | None,
    chinese: bool,
    script: str,
) -> dict[str, str]:
    """The summary of each viewer class with peers in ``bucket``, as ``cross_person`` lets this viewer see them
    (other people's topics in the viewer's language, ``chinese``, and characters, ``script``)."""
    peers = bucket_sources(
        chunks=chunks,
        bucket=bucket,
        viewer_id=viewer_id,
        owners=owners,
        viewer_person_id=viewer_person_id,
        mode=cross_person_mode(),
        chinese=chinese,
        script=script,
    )
    rollups = {}
    for viewer_class, sources in peers.items():
        rollup = peer_rollup_get(day=day, bucket=bucket, sources=sources, viewer_class=viewer_class)
        if rollup and rollup["summary"]:
            rollups[viewer_class] = rollup["summary"]
    return rollups


def _merge(summaries: list[str], *, bucket: datetime, max_chars: int) -> str:
    try:
        answer = llm_json(
            purpose="temporal.peer-rollup",
            instructions=ROLLUP_INSTRUCTIONS,
            payload={"bucket": bucket_label(bucket), "summaries": summaries, "max_chars": max_chars},
            schema=SUMMARY_SCHEMA,
            max_tokens=chars_budget(max_chars),
        )
    except LlmError as exc:
        logger.warning("peer rollup for %s: no LLM answer (%s); concatenating", bucket_label(bucket), exc)
        return summaries_concat(summaries, max_chars=max_chars)
    return summary_clean(answer["summary"], max_chars=max_chars) or summaries_concat(summaries, max_chars=max_chars)


def peer_rollups_warm(*, day: date, now: datetime) -> int:
    """Fill the cache for the last closed buckets, for every distinct peer set a viewer may ask for."""
    chunks = day_chunks_by_conversation(day=day)
    owners = conversations_persons(conversation_ids=chunks)
    mode = cross_person_mode()
    # A viewer with no chunk in the bucket sees everyone, in either language; one with a chunk sees everyone else.
    viewers = [(None, False), (None, True)] + [
        (pk, conversation_language(conversation=conversation) == Language.ZH)
        for pk, conversation in Conversation.objects.in_bulk(list(chunks)).items()
    ]
    warmed = 0
    for bucket in closed_buckets(day=day, now=now)[-WARM_BUCKETS:]:
        wanted = set()
        for viewer, chinese in viewers:
            peers = bucket_sources(
                chunks=chunks,
                bucket=bucket,
                viewer_id=viewer,
                owners=owners,
                viewer_person_id=owners.get(viewer) if viewer is not None else None,
                mode=mode,
                chinese=chinese,
            )
            wanted |= {(viewer_class, tuple(sources)) for viewer_class, sources in peers.items() if sources}
        for viewer_class, sources in wanted:
            peer_rollup_get(day=day, bucket=bucket, sources=list(sources), viewer_class=viewer_class)
            warmed += 1
    return warmed
