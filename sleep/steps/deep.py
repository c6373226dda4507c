"""Deep sleep: four ordered rounds over all active semantic memories but the subjects' profiles.

1 contradiction_expiry, 2 split, 3 merge, 4 pin_maintenance. Nothing is ever deleted:
retired rows become ``expired`` with a reason and the id that superseded them, so
every change can be restored (a whole night at once: ``sleep.services``). A profile restates facts
(the ``subjects`` step rewrites it from them): merged, split or set against a fact, it would only echo
them, so no round sees one. The model may
only act on ids it was shown, and only as ``sleep.checks`` finds the memories themselves
justify; each refused proposal is recorded in its round's ``refused`` with the reason.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from anima.core.config import config_get
from anima.core.llm import llm_json
from anima.core.models import MemoryStatus
from anima.core.text import content_key
from memory.models import SemanticMemory
from memory.selectors import RESIDENT_PINNED_HARD_CAP
from memory.services import (
    MemoryPart,
    memory_expire,
    memory_merge,
    memory_pin,
    memory_sources_add,
    memory_split,
    memory_unpin,
)
from memory.subjects.selectors import active_facts, profile_q
from sleep.checks import (
    NightLimit,
    citations_refusal,
    memory_protected,
    memory_when,
    merge_refusal,
    retire_refusal,
    split_refusal,
)
from sleep.context import StepContext
from sleep.slots import Slot, memory_slot, restates, slot_resolved, slots_aliased, supersedes
from sleep.step_runs import FAILURES
from sleep.steps.deep_groups import memory_owner, merge_candidates, subject_groups
from sleep.steps.deep_prompts import (
    CONTRADICTION_INSTRUCTIONS,
    CONTRADICTION_SCHEMA,
    MERGE_INSTRUCTIONS,
    MERGE_SCHEMA,
    PINS_INSTRUCTIONS,
    PINS_SCHEMA,
    SPLIT_INSTRUCTIONS,
    SPLIT_SCHEMA,
)
from sleep.steps.outcome import answer_or_failure

logger = logging.getLogger(__name__)

RECENT = timedelta(hours=24)
SENTENCE_MARKS = "。！？.!?；;"
SPLIT_MIN_CHARS = 50
CHANGE_REASON = "changed"
# Who a pin of the nightly pin review is by (it may take back its own pins, never an operator's).
PIN_REVIEW = "deep-sleep"
# Slots whose value never changes over time: a second value is a contradiction, not a change.
IMMUTABLE_ATTRIBUTES = frozenset({"zodiac", "birthday", "origin"})


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
    return list(active_facts().select_related("person").order_by("id"))


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


# A round writes at most deep_prompts.MAX_CHANGES entries of an id and a short reason (~60 tokens each); a merge's
# text is one memory. 8000 let a small model generate for half an hour; a cut-off round is asked once with twice this.
ROUND_MAX_TOKENS = 2000


class _Round:
    def __init__(
        self, ctx: StepContext, *, log: list[dict], now: datetime, limit: NightLimit, failures: list[dict]
    ) -> None:
        self.ctx = ctx
        self.log = log
        self.failures = failures
        self.now = now
        self.limit = limit
        self.changes: list[dict] = []
        self.refused: list[dict] = []
        config = config_get(section="sleep")
        self.warn_bytes = config["deep_sleep_warn_bytes"]
        self.batch_bytes = config["deep_sleep_batch_bytes"]

    def ask(self, *, purpose: str, instructions: str, schema: dict, payload: dict) -> dict:
        """The model's answer; one it could not give (after its repair round) proposes nothing and is listed in
        the step's failures, so the other groups, batches and rounds still go on."""
        answer = answer_or_failure(
            lambda: llm_json(
                purpose=purpose,
                instructions=instructions,
                payload={**payload, "changes": self.log + self.changes},
                schema=schema,
                run_key=self.ctx.run_key,
                token_budget=self.ctx.token_budget,
                max_tokens=ROUND_MAX_TOKENS,
            ),
            failures=self.failures,
            call=purpose,
        )
        # Every answer of a round is lists of proposals: none is an empty list of each.
        return answer if answer is not None else {key: [] for key in schema["properties"]}

    def memory_batches(self, memories: list[SemanticMemory]) -> list[str]:
        lines = [memory_json_line(m) for m in memories]
        size = sum(len(line.encode()) + 1 for line in lines)
        if size > self.warn_bytes:
            logger.warning("deep sleep: %d bytes of memory lines in one round", size)
        return ["\n".join(batch) for batch in _batches(lines, limit=self.batch_bytes)]

    def record(self, action: str, *, before: str, after: str, ids: Iterable[int], **extra) -> None:
        self.changes.append({"action": action, "before": before, "after": after, "ids": list(ids), **extra})

    def refuse(self, action: str, *, ids: Iterable[int | None], reason: str) -> None:
        self.refused.append({"action": action, "ids": [pk for pk in ids if pk is not None], "reason": reason})

    def allowed(self, action: str, *, ids: list[int | None], refusal: str = "", count: int = 1) -> bool:
        """Whether a change of ``count`` memories may go ahead: not when a check gave a ``refusal``, nor past the
        night's change limit. A refused change is recorded with its reason."""
        refusal = refusal or self.limit.take(count, owner=_owner_of(ids))
        if refusal:
            self.refuse(action, ids=ids, reason=refusal)
        return not refusal


def _owner_of(ids: list[int | None]) -> str:
    """Whose memory a change takes out first (a merge's or a split's sources are one owner's: checked before)."""
    found = SemanticMemory.objects.in_bulk([pk for pk in ids if pk is not None])
    memory = next((found[pk] for pk in ids if pk in found), None)
    return memory_owner(memory) if memory is not None else "global"


def _shown(memory: SemanticMemory | None) -> str:
    return "" if memory is not None and memory.status == MemoryStatus.ACTIVE else "not an active memory it was shown"


def _chronological(memories: Iterable[SemanticMemory]) -> list[SemanticMemory]:
    return sorted(memories, key=memory_when)


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
            if newer is None or not r.allowed("expire", ids=[older.pk, newer.pk], refusal=memory_protected(older)):
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
                named = item.get("superseded_by")
                successor = by_id.get(named) if named is not None else None
                reason = CHANGE_REASON if item["kind"] == "change" else f"contradiction: {item['reason']}".strip()
                refusal = _expire_refusal(memory, successor, named=named, reason=reason)
                if not r.allowed("expire", ids=[item["id"], named], refusal=refusal):
                    continue
                memory_expire(memory=memory, reason=reason, superseded_by=successor)
                r.record(
                    "expire",
                    before=memory.content,
                    after=successor.content,
                    ids=[memory.pk, successor.pk],
                    kind=item["kind"],
                    reason=reason,
                )
    return f"{len(groups)} subject groups checked, {len(r.changes)} memories expired"


def _expire_refusal(
    memory: SemanticMemory | None, successor: SemanticMemory | None, *, named: int | None, reason: str
) -> str:
    """Only ids of the group shown may be retired, each once, and only as the two texts justify."""
    if named is not None and (successor is None or successor is memory):
        return "its successor is not another memory of the group shown"
    return (
        _shown(memory)
        or (_shown(successor) if successor is not None else "")
        or memory_protected(memory)
        or retire_refusal(memory, successor)
        or citations_refusal(reason, person_id=memory.person_id)
    )


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
                refusal = _shown(source) or memory_protected(source) or split_refusal(source, item["parts"])
                if not r.allowed("split", ids=[item["id"]], refusal=refusal):
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


def _restatement_groups(memories: list[SemanticMemory]) -> list[list[SemanticMemory]]:
    """One owner's memories restating one fact (same slot and value, or the same text), oldest first."""
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
    return [g for g in groups if len(g) >= 2]


def _slot_restatements(r: _Round) -> None:
    """Memories restating one fact merge into one, whoever answers; a pinned or hand-edited one stays as it is
    and the others retire into it."""
    with transaction.atomic():
        for sources in _restatement_groups(_chronological(_active())):
            kept = next((s for s in sources if memory_protected(s)), None)
            if kept is not None:
                for source in (s for s in sources if not memory_protected(s)):
                    if r.allowed("expire", ids=[source.pk, kept.pk]):
                        reason = f"restates #{kept.pk}"
                        memory_expire(memory=source, reason=reason, superseded_by=kept)
                        # The kept fact was said where its restatement was: recall ranks it with those lines.
                        kept = memory_sources_add(memory=kept, sources=[source])
                        r.record(
                            "expire", before=source.content, after=kept.content, ids=[source.pk, kept.pk], reason=reason
                        )
                continue
            ids = [s.pk for s in sources]
            if not r.allowed("merge", ids=ids, count=len(sources) - 1):
                continue
            richest = max(sources, key=lambda m: (len(m.content), -m.pk))
            slot = memory_slot(richest)
            merged = memory_merge(
                sources=sources,
                content=richest.content,
                memory_type=richest.memory_type,
                external_id=_merge_id(sources),
                body={"slot": slot.as_body()} if slot is not None else None,
            )
            r.record(
                "merge", before=" | ".join(s.content for s in sources), after=merged.content, ids=[*ids, merged.pk]
            )


def _merge_id(sources: list[SemanticMemory]) -> str:
    versions = ",".join(f"{s.pk}@{s.updated_at.timestamp()}" for s in sources)
    return f"ds:merge:{hashlib.sha1(versions.encode()).hexdigest()[:16]}"


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
                refusal = _merge_refusal(sources, item["content"])
                if not r.allowed("merge", ids=ids, refusal=refusal, count=len(ids) - 1):
                    continue
                merged = memory_merge(
                    sources=sources,
                    content=item["content"],
                    memory_type=item["memory_type"],
                    external_id=_merge_id(sources),
                )
                r.record(
                    "merge", before=" | ".join(s.content for s in sources), after=merged.content, ids=[*ids, merged.pk]
                )
    return f"{len(r.changes)} merges"


def _merge_refusal(sources: list[SemanticMemory | None], content: str) -> str:
    if len(sources) < 2:
        return "a merge needs two or more memories"
    for source in sources:
        if refusal := _shown(source) or memory_protected(source):
            return refusal
    if len({memory_owner(s) for s in sources}) != 1:
        return "memories of different people"
    return merge_refusal(sources, content)


def _pin_round(r: _Round) -> str:
    pinned = list(
        SemanticMemory.objects.filter(pinned=True).exclude(profile_q()).select_related("person").order_by("id")
    )
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
                refusal = "not a pinned memory it was shown"
            else:
                # A retired memory's pin is moot; an active one keeps a pin someone else gave it.
                active = memory.status == MemoryStatus.ACTIVE
                refusal = memory_protected(memory, own_pin_ok=True) if active else ""
            if not r.allowed("unpin", ids=[item["id"]], refusal=refusal):
                continue
            memory_unpin(memory=memory)
            pinned_count -= memory.status == MemoryStatus.ACTIVE
            r.record("unpin", before=memory.content, after="", ids=[memory.pk], reason=item["reason"])
        for item in answer["pin"]:
            memory = active_by_id.get(item["id"])
            refusal = "" if memory is not None and not memory.pinned else "not an unpinned active memory"
            refusal = refusal or (
                "" if pinned_count < RESIDENT_PINNED_HARD_CAP else "the pinned memories are at their cap"
            )
            if not r.allowed("pin", ids=[item["id"]], refusal=refusal):
                continue
            memory_pin(memory=memory, by=PIN_REVIEW)
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
    failures: list[dict] = []
    config = config_get(section="sleep")
    inventory = Counter(memory_owner(memory) for memory in active_facts().only("person", "source_conversation"))
    limit = NightLimit(
        inventory=inventory, share=config["deep_sleep_change_share"], floor=config["deep_sleep_min_changes"]
    )
    quiet = not active_facts().filter(updated_at__gte=now - RECENT).exists()
    rounds = []
    for name, run in ROUNDS:
        if ctx.mode == "incremental" and quiet and name in INCREMENTAL_SKIPPABLE:
            rounds.append({"round": name, "summary": "skipped: no active memory changed in 24 h", "changes": []})
            continue
        r = _Round(ctx, log=log, now=now, limit=limit, failures=failures)
        summary = run(r)
        log.extend(r.changes)
        entry = {"round": name, "summary": summary, "changes": r.changes}
        if r.refused:
            entry["refused"] = r.refused
        rounds.append(entry)
    allowed = {owner: limit.allowed(owner) for owner in sorted(inventory)}
    output = {
        "mode": ctx.mode,
        "changes_allowed": allowed,
        "inventory": dict(sorted(inventory.items())),
        "rounds": rounds,
    }
    return {**output, FAILURES: failures} if failures else output
