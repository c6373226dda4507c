"""Deep sleep: four ordered rounds over all active semantic memories.

1 contradiction_expiry, 2 split, 3 merge, 4 pin_maintenance. Nothing is ever deleted:
retired rows become ``expired`` with a reason and the id that superseded them, so
every change can be restored. The model may only act on ids it was shown.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from datetime import date, datetime, timedelta
from itertools import chain, combinations

from django.db import transaction
from django.utils import timezone

from anima.core.config import config_get
from anima.core.embeddings import EmbeddingsUnavailable
from anima.core.llm import llm_json
from anima.core.llm.schema import schema_array, schema_enum, schema_integer, schema_object, schema_string
from anima.core.models import MemoryStatus, MemoryType
from anima.core.segmentation import jieba_get
from anima.core.text import FUNCTION_WORDS, content_key
from memory.embedding import memory_vectors
from memory.models import SemanticMemory
from memory.selectors import RESIDENT_PINNED_HARD_CAP, active_semantic_memories
from memory.services import MemoryPart, memory_expire, memory_merge, memory_pin, memory_split, memory_unpin
from sleep.context import StepContext
from sleep.slots import Slot, memory_slot, restates, same_slot, slot_resolved, slots_aliased, supersedes

logger = logging.getLogger(__name__)

RECENT = timedelta(hours=24)
SENTENCE_MARKS = "。！？.!?；;"
SPLIT_MIN_CHARS = 50
CHANGE_REASON = "changed"
# Slots whose value never changes over time: a second value is a contradiction, not a change.
IMMUTABLE_ATTRIBUTES = frozenset({"zodiac", "birthday", "origin"})
# Cosine from which two memories of one person are asked about together (contradiction) or offered as merge
# candidates. Measured with bench/offline_mind.py on the bundled local model: facts stating the same thing
# score 0.89-1.0, but unrelated facts of one person reach 0.98 (p99 0.97), so closeness alone never merges
# anything; it only adds the closest pairs (about 1 in 100) to what keywords and slots already group.
CONTRADICTION_COSINE = 0.97
DUPLICATE_COSINE = 0.97
MEMORY_TYPES = list(MemoryType.values)

# Relation and time words (and function words): sharing one says nothing about sharing a subject.
_GROUP_STOPWORDS = FUNCTION_WORDS | frozenset(
    "喜欢 更喜欢 以前 今年 周末 一名 最近 经常 很多 就是 认为 now really likes like loves love prefers prefer works "
    "lives used any some more most".split()
)
_REASON = schema_string(max_length=300)
_COMMON = "Each memory is one compact JSON line. `changes` is the authoritative log of what earlier rounds changed."

CONTRADICTION_INSTRUCTIONS = (
    "Round 1, contradiction detection. All memories in `group` are about the same person and subject. Two "
    "memories contradict when they are mutually exclusive and the difference cannot be explained by change over "
    "time (「女儿属虎」 vs 「女儿属羊」). Memories that can coexist (「喜欢苹果」 vs 「喜欢樱桃」) are not "
    "contradictions. A later statement of change (「喜欢 Python」 → 「现在更喜欢 TypeScript」) is a change: "
    "expire the older one with kind 'change'. For a contradiction expire the less trustworthy (usually older) one "
    f"with kind 'contradiction'. Only ids from `group` may appear. {_COMMON} "
    'Answer JSON: {"expire": [{"id", "superseded_by", "kind", "reason"}]}.'
)
CONTRADICTION_SCHEMA = schema_object(
    {
        "expire": schema_array(
            schema_object(
                {
                    "id": schema_integer(),
                    "superseded_by": schema_integer(nullable=True),
                    "kind": schema_enum(["contradiction", "change"]),
                    "reason": _REASON,
                },
                required=["id", "kind", "reason"],
            )
        )
    },
    required=["expire"],
)
SPLIT_INSTRUCTIONS = (
    "Round 2, split. For each memory in `candidate_ids` that holds several independent facts, split it into "
    "self-contained single-fact memories (each naming its subject, same language as the original). Leave "
    f"single-fact memories and step-by-step procedures alone. {_COMMON} "
    'Answer JSON: {"splits": [{"id", "parts": [{"memory_type", "content"}]}]}.'
)
_PART = schema_object(
    {"memory_type": schema_enum(MEMORY_TYPES), "content": schema_string(min_length=1, max_length=600)},
    required=["memory_type", "content"],
)
SPLIT_SCHEMA = schema_object(
    {
        "splits": schema_array(
            schema_object({"id": schema_integer(), "parts": schema_array(_PART)}, required=["id", "parts"])
        )
    },
    required=["splits"],
)
MERGE_INSTRUCTIONS = (
    "Round 3, dedupe-merge. Find memories about the same person that say the same thing (duplicates or "
    "near-duplicates) and merge each set of two or more into one memory that keeps every detail, in the language "
    "of the sources. `candidates` lists groups of ids whose embeddings are very close: check those first, but "
    f"merge only what says the same thing. Never merge memories of different people. {_COMMON} "
    'Answer JSON: {"merges": [{"ids": [id, id, ...], "memory_type", "content"}]}.'
)
MERGE_SCHEMA = schema_object(
    {
        "merges": schema_array(
            schema_object(
                {
                    "ids": schema_array(schema_integer()),
                    "memory_type": schema_enum(MEMORY_TYPES),
                    "content": schema_string(min_length=1, max_length=1000),
                },
                required=["ids", "memory_type", "content"],
            )
        )
    },
    required=["merges"],
)
PINS_INSTRUCTIONS = (
    "Round 4, pin review. Pinned memories always ride in the system prompt (at most 40). Unpin ones that are "
    "expired, outdated or trivial; pin an active memory only when it is essential in every conversation (safety, "
    f"identity). {_COMMON} "
    'Answer JSON: {"unpin": [{"id", "reason"}], "pin": [{"id", "reason"}]}.'
)
_ID_REASONS = schema_array(schema_object({"id": schema_integer(), "reason": _REASON}, required=["id", "reason"]))
PINS_SCHEMA = schema_object({"unpin": _ID_REASONS, "pin": _ID_REASONS}, required=["unpin", "pin"])


def memory_json_line(memory: SemanticMemory, *, with_status: bool = False) -> str:
    body = memory.body or {}
    row = {
        "id": memory.pk,
        "type": memory.memory_type,
        "person": memory.person.slug if memory.person else None,
        "content": memory.content,
        "pinned": memory.pinned,
        "observed_at": body.get("observed_at"),
        "occurred_at": body.get("occurred_at"),
    }
    slot = memory_slot(memory)
    if slot is not None:
        row["slot"] = slot.as_body()
    if with_status:
        row["status"] = memory.status
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


def _active() -> list[SemanticMemory]:
    return list(active_semantic_memories().select_related("person").order_by("id"))


def _batches(lines: list[str], *, limit: int) -> list[list[str]]:
    """Split memory lines into batches of at most ``limit`` bytes (one batch when they fit)."""
    batches: list[list[str]] = [[]]
    size = 0
    for line in lines:
        length = len(line.encode()) + 1
        if batches[-1] and size + length > limit:
            batches.append([])
            size = 0
        batches[-1].append(line)
        size += length
    return [batch for batch in batches if batch]


ROUND_MAX_TOKENS = 8000


class _Round:
    def __init__(self, ctx: StepContext, *, log: list[dict], now: datetime) -> None:
        self.ctx = ctx
        self.log = log
        self.now = now
        self.changes: list[dict] = []
        self.rejected: list[int] = []
        config = config_get(section="sleep")
        self.warn_bytes = config["deep_sleep_warn_bytes"]
        self.batch_bytes = config["deep_sleep_batch_bytes"]

    def ask(self, *, purpose: str, instructions: str, schema: dict, payload: dict) -> dict:
        return llm_json(
            purpose=purpose,
            instructions=instructions,
            payload={**payload, "changes": self.log + self.changes},
            schema=schema,
            run_key=self.ctx.run_key,
            token_budget=self.ctx.token_budget,
            # A round over a large batch may rewrite many entries; a cut-off answer fails the round.
            max_tokens=ROUND_MAX_TOKENS,
        )

    def memory_batches(self, memories: list[SemanticMemory]) -> list[str]:
        lines = [memory_json_line(m) for m in memories]
        size = sum(len(line.encode()) + 1 for line in lines)
        if size > self.warn_bytes:
            logger.warning("deep sleep: %d bytes of memory lines in one round", size)
        return ["\n".join(batch) for batch in _batches(lines, limit=self.batch_bytes)]

    def record(self, action: str, *, before: str, after: str, ids: Iterable[int], **extra) -> None:
        self.changes.append({"action": action, "before": before, "after": after, "ids": list(ids), **extra})


def subject_keywords(memory: SemanticMemory) -> set[str]:
    """Content words of a memory, without its person's name: two memories sharing one share a subject."""
    names = set()
    if memory.person:
        names = {memory.person.slug.casefold(), (memory.person.display_name or "").casefold()}
    words = set()
    for token in jieba_get().cut(memory.content):
        word = token.strip().casefold()
        if word in names or word in _GROUP_STOPWORDS or not any(ch.isalnum() for ch in word):
            continue
        if len(word) >= 2 if not word.isascii() else len(word) >= 3:
            words.add(word.rstrip("s") if word.isascii() and len(word) > 3 else word)
    return words


def memory_owner(memory: SemanticMemory) -> str:
    """Whose fact this is: a person, else the one conversation it came from (unknown humans never mix)."""
    if memory.person_id:
        return f"person:{memory.person_id}"
    if memory.source_conversation_id:
        return f"conversation:{memory.source_conversation_id}"
    return "global"


def _union_groups(memories: list[SemanticMemory], links: Iterable[tuple[int, int]]) -> list[list[SemanticMemory]]:
    """Connected components (size ≥ 2) of ``memories`` under the id pairs ``links``."""
    parent = {m.pk: m.pk for m in memories}

    def find(pk: int) -> int:
        while parent[pk] != pk:
            parent[pk] = parent[parent[pk]]
            pk = parent[pk]
        return pk

    for a, b in links:
        parent[find(a)] = find(b)
    groups: dict[int, list[SemanticMemory]] = {}
    for memory in memories:
        groups.setdefault(find(memory.pk), []).append(memory)
    return [group for group in groups.values() if len(group) >= 2]


def _keyword_links(memories: list[SemanticMemory]) -> Iterator[tuple[int, int]]:
    owners: dict[tuple[str, str], int] = {}
    for memory in memories:
        for word in subject_keywords(memory):
            key = (memory_owner(memory), word)
            if key in owners:
                yield memory.pk, owners[key]
            else:
                owners[key] = memory.pk


def _slot_links(memories: list[SemanticMemory]) -> Iterator[tuple[int, int]]:
    slotted = [(m, memory_slot(m)) for m in memories]
    slotted = [(m, slot) for m, slot in slotted if slot is not None]
    for (a, slot_a), (b, slot_b) in combinations(slotted, 2):
        if memory_owner(a) == memory_owner(b) and same_slot(slot_a, slot_b):
            yield a.pk, b.pk


def similar_pairs(memories: list[SemanticMemory], *, threshold: float) -> list[tuple[int, int, float]]:
    """Pairs of one owner's memories whose embeddings' cosine is at least ``threshold``; [] without embeddings.

    The vectors are the backfill's stored ones where they exist (``memory_vectors``): a night embeds only
    what changed since, and compares each owner's memories among themselves only.
    """
    by_owner: dict[str, list[SemanticMemory]] = {}
    for memory in memories:
        by_owner.setdefault(memory_owner(memory), []).append(memory)
    compared = [group for group in by_owner.values() if len(group) >= 2]
    if not compared:
        return []
    try:
        vectors = memory_vectors(memories=[memory for group in compared for memory in group])
    except EmbeddingsUnavailable:
        return []
    import numpy as np  # here, not at start-up: only the night's deep sleep compares vectors

    pairs = []
    for group in compared:
        group = [memory for memory in group if memory.pk in vectors]  # one deleted meanwhile has none
        if len(group) < 2:
            continue
        matrix = np.array([vectors[memory.pk] for memory in group], dtype=np.float64)
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)  # stored ones are half floats
        cosines = matrix @ matrix.T
        for i, j in combinations(range(len(group)), 2):
            if cosines[i, j] >= threshold:
                pairs.append((group[i].pk, group[j].pk, float(cosines[i, j])))
    return pairs


def subject_groups(memories: list[SemanticMemory]) -> list[list[SemanticMemory]]:
    """Memories of one person about one subject: a shared keyword, the same slot or close embeddings."""
    similar = ((a, b) for a, b, _ in similar_pairs(memories, threshold=CONTRADICTION_COSINE))
    return _union_groups(memories, chain(_keyword_links(memories), _slot_links(memories), similar))


def _chronological(memories: Iterable[SemanticMemory]) -> list[SemanticMemory]:
    return sorted(memories, key=lambda m: (m.source_day or date.min, (m.body or {}).get("observed_at") or "", m.pk))


def _told_together(a: SemanticMemory, b: SemanticMemory) -> bool:
    """Said in one conversation on one day: two values there ("engineer", "team lead") describe, not change."""
    return a.source_conversation_id is not None and (a.source_conversation_id, a.source_day) == (
        b.source_conversation_id,
        b.source_day,
    )


def _slot_changes(r: _Round) -> None:
    """A newer fact in the same slot with another value supersedes the older one ("is 7" → "turned 8")."""
    memories = _chronological(_active())
    slots = {m.pk: memory_slot(m) for m in memories}
    by_owner: dict[str, list[Slot]] = {}
    for memory in memories:
        if slots[memory.pk] is not None:
            by_owner.setdefault(memory_owner(memory), []).append(slots[memory.pk])
    aliases = {owner: slots_aliased(owned) for owner, owned in by_owner.items()}
    slots = {
        m.pk: slot_resolved(slots[m.pk], aliases[memory_owner(m)]) if slots[m.pk] is not None else None
        for m in memories
    }
    with transaction.atomic():
        for index, older in enumerate(memories):
            old_slot = slots[older.pk]
            if old_slot is None:
                continue
            newer = next(
                (
                    m
                    for m in reversed(memories[index + 1 :])
                    if memory_owner(m) == memory_owner(older)
                    and not _told_together(m, older)
                    and slots[m.pk] is not None
                    and supersedes(slots[m.pk], old_slot)
                ),
                None,
            )
            if newer is None:
                continue
            kind, reason = "change", CHANGE_REASON
            if old_slot.attribute in IMMUTABLE_ATTRIBUTES:
                # A zodiac or a birthday does not change over time: two values contradict, the newer stands.
                kind = "contradiction"
                values = f"{old_slot.value} vs {slots[newer.pk].value}"
                reason = f"contradiction: {old_slot.attribute}: {values}; the newer statement stands"
            memory_expire(memory=older, reason=reason, superseded_by=newer)
            r.record(
                "expire", before=older.content, after=newer.content, ids=[older.pk, newer.pk], kind=kind, reason=reason
            )


def _contradiction_round(r: _Round) -> str:
    _slot_changes(r)
    groups = subject_groups(_active())
    for group in groups:
        by_id = {m.pk: m for m in group}
        answer = r.ask(
            purpose="deep-sleep.contradiction",
            instructions=CONTRADICTION_INSTRUCTIONS,
            schema=CONTRADICTION_SCHEMA,
            payload={"group": "\n".join(memory_json_line(m) for m in group)},
        )
        with transaction.atomic():
            for item in answer["expire"]:
                memory = by_id.get(item["id"])
                successor = by_id.get(item["superseded_by"]) if item.get("superseded_by") is not None else None
                valid_successor = item.get("superseded_by") is None or (
                    successor is not None and successor is not memory and successor.status == MemoryStatus.ACTIVE
                )
                # Only ids of the group shown may be retired, and each only once.
                if memory is None or memory.status != MemoryStatus.ACTIVE or not valid_successor:
                    r.rejected.append(item["id"])
                    continue
                reason = CHANGE_REASON if item["kind"] == "change" else f"contradiction: {item['reason']}".strip()
                memory_expire(memory=memory, reason=reason, superseded_by=successor)
                r.record(
                    "expire",
                    before=memory.content,
                    after=successor.content if successor else "",
                    ids=[memory.pk] + ([successor.pk] if successor else []),
                    kind=item["kind"],
                    reason=reason,
                )
    return f"{len(groups)} subject groups checked, {len(r.changes)} memories expired"


def _split_candidates(memories: list[SemanticMemory], *, incremental: bool, now: datetime) -> list[SemanticMemory]:
    return [
        m
        for m in memories
        if (len(m.content) > SPLIT_MIN_CHARS or sum(m.content.count(mark) for mark in SENTENCE_MARKS) >= 2)
        and (not incremental or m.updated_at >= now - RECENT)
    ]


def _split_round(r: _Round) -> str:
    memories = _active()
    candidates = _split_candidates(memories, incremental=r.ctx.mode == "incremental", now=r.now)
    if not candidates:
        return "no split candidates"
    by_id = {m.pk: m for m in candidates}
    for batch in r.memory_batches(memories):
        answer = r.ask(
            purpose="deep-sleep.split",
            instructions=SPLIT_INSTRUCTIONS,
            schema=SPLIT_SCHEMA,
            payload={"memories": batch, "candidate_ids": sorted(by_id)},
        )
        with transaction.atomic():
            for item in answer["splits"]:
                source = by_id.get(item["id"])
                if source is None or source.status != MemoryStatus.ACTIVE or len(item["parts"]) < 2:
                    r.rejected.append(item["id"])
                    continue
                # The source's updated_at is in the id: a split that an operator restored can split again.
                version = int(source.updated_at.timestamp() * 1000)
                distinct = {content_key(part["content"]): part for part in item["parts"]}
                parts = memory_split(
                    memory=source,
                    parts=[
                        MemoryPart(
                            memory_type=part["memory_type"],
                            content=part["content"],
                            external_id=f"ds:split:{source.pk}:{version}:{key}",
                        )
                        for key, part in distinct.items()
                    ],
                )
                r.record(
                    "split",
                    before=source.content,
                    after=" | ".join(p.content for p in parts),
                    ids=[source.pk, *(p.pk for p in parts)],
                )
    return f"{len(candidates)} candidates, {len(r.changes)} split"


def _slot_restatements(r: _Round) -> None:
    """Memories restating one fact (same slot, same value, or the same text) merge into one, whoever answers."""
    memories = _chronological(_active())
    slots = {m.pk: memory_slot(m) for m in memories}
    groups: list[list[SemanticMemory]] = []
    for memory in memories:
        slot = slots[memory.pk]
        group = next(
            (
                g
                for g in groups
                if memory_owner(g[0]) == memory_owner(memory)
                and (
                    content_key(g[0].content) == content_key(memory.content)
                    or (slot is not None and slots[g[0].pk] is not None and restates(slot, slots[g[0].pk]))
                )
            ),
            None,
        )
        if group is None:
            groups.append([memory])
        else:
            group.append(memory)
    with transaction.atomic():
        for sources in (g for g in groups if len(g) >= 2):
            richest = max(sources, key=lambda m: (len(m.content), -m.pk))
            versions = ",".join(f"{s.pk}@{s.updated_at.timestamp()}" for s in sources)
            merged = memory_merge(
                sources=sources,
                content=richest.content,
                memory_type=richest.memory_type,
                external_id=f"ds:merge:{hashlib.sha1(versions.encode()).hexdigest()[:16]}",
                body={"slot": slots[richest.pk].as_body()} if slots[richest.pk] is not None else None,
            )
            ids = [s.pk for s in sources]
            r.record(
                "merge", before=" | ".join(s.content for s in sources), after=merged.content, ids=[*ids, merged.pk]
            )


def merge_candidates(memories: list[SemanticMemory]) -> list[list[int]]:
    """Groups of one owner's memories whose embeddings are close enough to say the same thing."""
    pairs = [(a, b) for a, b, _ in similar_pairs(memories, threshold=DUPLICATE_COSINE)]
    return [sorted(m.pk for m in group) for group in _union_groups(memories, pairs)]


def _merge_round(r: _Round) -> str:
    _slot_restatements(r)
    memories = _active()
    by_id = {m.pk: m for m in memories}
    candidates = merge_candidates(memories)
    for batch in r.memory_batches(memories):
        shown = {json.loads(line)["id"] for line in batch.splitlines()}
        answer = r.ask(
            purpose="deep-sleep.merge",
            instructions=MERGE_INSTRUCTIONS,
            schema=MERGE_SCHEMA,
            payload={"memories": batch, "candidates": [g for g in candidates if set(g) <= shown]},
        )
        with transaction.atomic():
            for item in answer["merges"]:
                ids = sorted(set(item["ids"]))
                sources = [by_id.get(pk) for pk in ids]
                if (
                    len(ids) < 2
                    or any(s is None or s.status != MemoryStatus.ACTIVE for s in sources)
                    or len({memory_owner(s) for s in sources}) != 1
                ):
                    r.rejected.extend(ids)
                    continue
                versions = ",".join(f"{s.pk}@{s.updated_at.timestamp()}" for s in sources)
                digest = hashlib.sha1(versions.encode()).hexdigest()[:16]
                merged = memory_merge(
                    sources=sources,
                    content=item["content"],
                    memory_type=item["memory_type"],
                    external_id=f"ds:merge:{digest}",
                )
                r.record(
                    "merge", before=" | ".join(s.content for s in sources), after=merged.content, ids=[*ids, merged.pk]
                )
    return f"{len(r.changes)} merges"


def _pin_round(r: _Round) -> str:
    pinned = list(SemanticMemory.objects.filter(pinned=True).select_related("person").order_by("id"))
    active = _active()
    pinned_by_id = {m.pk: m for m in pinned}
    active_by_id = {m.pk: m for m in active}
    answer = r.ask(
        purpose="deep-sleep.pins",
        instructions=PINS_INSTRUCTIONS,
        schema=PINS_SCHEMA,
        payload={
            "pinned": "\n".join(memory_json_line(m, with_status=True) for m in pinned),
            "memories": "\n".join(memory_json_line(m) for m in active),
        },
    )
    pinned_count = sum(1 for m in pinned if m.status == MemoryStatus.ACTIVE)
    with transaction.atomic():
        for item in answer["unpin"]:
            memory = pinned_by_id.get(item["id"])
            if memory is None or not memory.pinned:
                r.rejected.append(item["id"])
                continue
            memory_unpin(memory=memory)
            pinned_count -= memory.status == MemoryStatus.ACTIVE
            r.record("unpin", before=memory.content, after="", ids=[memory.pk], reason=item["reason"])
        for item in answer["pin"]:
            memory = active_by_id.get(item["id"])
            if memory is None or memory.pinned or pinned_count >= RESIDENT_PINNED_HARD_CAP:
                r.rejected.append(item["id"])
                continue
            memory_pin(memory=memory)
            pinned_count += 1
            r.record("pin", before="", after=memory.content, ids=[memory.pk], reason=item["reason"])
    return f"{len(pinned)} pinned reviewed, {len(r.changes)} changed"


ROUNDS: tuple[tuple[str, Callable[[_Round], str]], ...] = (
    ("contradiction_expiry", _contradiction_round),
    ("split", _split_round),
    ("merge", _merge_round),
    ("pin_maintenance", _pin_round),
)
INCREMENTAL_SKIPPABLE = {"contradiction_expiry", "merge"}


def deep_sleep(ctx: StepContext) -> dict:
    now = timezone.now()
    log: list[dict] = []
    quiet = not active_semantic_memories().filter(updated_at__gte=now - RECENT).exists()
    rounds = []
    for name, run in ROUNDS:
        if ctx.mode == "incremental" and quiet and name in INCREMENTAL_SKIPPABLE:
            rounds.append({"round": name, "summary": "skipped: no active memory changed in 24 h", "changes": []})
            continue
        r = _Round(ctx, log=log, now=now)
        summary = run(r)
        log.extend(r.changes)
        entry = {"round": name, "summary": summary, "changes": r.changes}
        if r.rejected:
            entry["rejected_ids"] = r.rejected
        rounds.append(entry)
    return {"mode": ctx.mode, "rounds": rounds}
