"""Writes for memories: semantic rows and diary content blocks, each validated and saved in one place."""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import date, datetime, timedelta
from typing import Any, TypedDict

from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import F, Func, Q, TextField, Value
from django.utils import timezone

from anima.core.calendar import MomentError, day_start, local_day, moment_iso, moment_parse
from anima.core.models import BlockTag, Component, Entity, MemoryStatus, MemoryType
from anima.core.segmentation import segment_text
from anima.core.text import same_content_key, text_bounded
from conversations.models import Conversation, Person
from memory.models import ContentBlock, DiaryEntry, EmotionalTendency, SemanticMemory
from memory.mood import limbic_anchors
from memory.selectors import active_semantic_memories
from memory.tendency import MONTH_DAYS, Tendency, Window, tendency_compute


def diary_entries_ensure(*, days: Iterable[date]) -> dict[date, Entity]:
    """One diary entry per local day, created on first need (the unique index settles races)."""
    wanted = set(days)
    if not wanted:
        return {}
    Entity.objects.bulk_create(
        [
            Entity(
                primary_component=Component.DIARY_ENTRY,
                source_day=day,
                title=day.isoformat(),
                fts_segmented=segment_text(day.isoformat()),
            )
            for day in sorted(wanted)
        ],
        ignore_conflicts=True,
    )
    return {entry.source_day: entry for entry in DiaryEntry.objects.filter(source_day__in=wanted)}


def diary_block_create(
    *,
    diary: Entity,
    tag: str,
    content: str,
    title: str = "",
    external_id: str | None = None,
    body: dict[str, Any] | None = None,
    person: Person | None = None,
    source_conversation: Conversation | None = None,
    source_channel: str = "",
    memory_type: str | None = None,
) -> ContentBlock:
    """Write one limbic, narrative or dream block under its day's diary entry (and about that day).

    ``memory_type`` marks a limbic block that is an imprint (``MemoryType.IMPRINT``); anchors have none.

    Validation checks the fields; the constraints stay with the database (limbic blocks
    append-only, one dream a day, unique external ids), so a duplicate raises IntegrityError.
    """
    if diary.primary_component != Component.DIARY_ENTRY:
        raise ValidationError({"diary": f"#{diary.pk} is not a diary entry"})
    if tag not in BlockTag.values:
        raise ValidationError({"tag": f"tag must be one of {', '.join(BlockTag.values)}"})
    block = ContentBlock(
        primary_component=Component.CONTENT_BLOCK,
        parent=diary,
        tag=tag,
        source_day=diary.source_day,
        external_id=external_id,
        title=title.strip(),
        content=_content_valid(content),
        body=body or {},
        person=person,
        source_conversation=source_conversation,
        source_channel=source_channel,
        memory_type=memory_type,
    )
    block.full_clean(validate_constraints=False)
    block.save()
    return block


# --- Semantic memories: write, curate, retire (sleep, tools, API, admin, workspace import) -----------


# Advisory-lock namespace of memory_remember (second key: the person id, 0 for global memories).
_REMEMBER_LOCK = 7301
# Body keys a memory derived by a split or a merge takes over from its source.
_DERIVED_BODY_KEYS = {"observed_at", "occurred_at", "source_conversations", "tags"}


# Letters and digits between punctuation and whitespace.
_RUNS = re.compile(r"[^\W_]+")
# A longer key finds no more candidates, and PostgreSQL's LIKE tries it at every position of every row: remembering
# 99,000 repeated characters beside a memory differing only at its end took 24.9 s with the whole stretch as the key.
_KEY_CHARS = 32


def _search_key(text: str) -> str:
    """The start of the longest run of letters and digits of ``text``: an equal fact, its whitespace left out,
    contains it, however either was spaced (Chinese and Japanese often are not)."""
    return max(_RUNS.findall(text) or text.split(), key=len)[:_KEY_CHARS]


def _body_moment(value: Any) -> datetime | None:
    """A body date (its local midnight) or datetime; None when absent or fuzzy ("spring 2019")."""
    if not isinstance(value, str):
        return None
    try:
        moment = moment_parse(value, field="body")
    except MomentError:
        return None
    return moment if isinstance(moment, datetime) or moment is None else day_start(moment)


def memory_valid_from(*, body: dict[str, Any], created_at: datetime) -> datetime:
    """When a fact became true or known: its ``occurred_at``, else its first sighting, else its creation."""
    return _body_moment(body.get("occurred_at")) or _body_moment(body.get("observed_at")) or created_at


def _content_valid(content: str) -> str:
    content = content.strip()
    if not content:
        raise ValidationError({"content": "content must not be empty"})
    return text_bounded(content, field="content")


def _memory_type_valid(memory_type: str) -> str:
    if memory_type not in MemoryType.values:
        raise ValidationError({"memory_type": f"memory_type must be one of {', '.join(MemoryType.values)}"})
    return memory_type


def _active_valid(memory: SemanticMemory) -> None:
    if memory.status != MemoryStatus.ACTIVE:
        raise ValidationError({"status": f"memory #{memory.pk} is {memory.status}, not active"})


def memory_create(
    *,
    content: str,
    memory_type: str,
    person: Person | None = None,
    pinned: bool = False,
    source_conversation: Conversation | None = None,
    source_channel: str = "",
    source_day: date | None = None,
    external_id: str | None = None,
    body: dict[str, Any] | None = None,
    created_at: datetime | None = None,
) -> SemanticMemory:
    """Write one active semantic memory as given; ``memory_remember`` is the write that finds an equal fact first.

    An external id already stored for a semantic memory raises IntegrityError (a database constraint).
    """
    memory = SemanticMemory(
        primary_component=Component.SEMANTIC_MEMORY,
        content=_content_valid(content),
        memory_type=_memory_type_valid(memory_type),
        status=MemoryStatus.ACTIVE,
        person=person,
        pinned=pinned,
        source_conversation=source_conversation,
        source_channel=source_channel,
        source_day=source_day,
        external_id=external_id,
        body=body or {},
    )
    if created_at is not None:
        memory.created_at = created_at
    memory.valid_from = memory_valid_from(body=memory.body, created_at=memory.created_at)
    memory.full_clean(validate_constraints=False)
    memory.save()
    return memory


def memory_remember(
    *,
    content: str,
    memory_type: str = MemoryType.WORLD,
    person: Person | None = None,
    pinned: bool = False,
    source_conversation: Conversation | None = None,
    source_channel: str = "",
    source_id: str = "",
) -> tuple[SemanticMemory, bool]:
    """Write one semantic memory, or find the active one already holding the same fact for ``person``.

    Returns ``(memory, created)``. ``source_id`` (with ``source_channel``) scopes a person memory
    to one channel account, the workspace's ``sources/<channel>_<id>.md`` notes.
    """
    content = _content_valid(content)
    _memory_type_valid(memory_type)
    same = same_content_key(content)
    with transaction.atomic():
        # Serialise remembers for one person so two identical concurrent calls cannot both insert.
        with connection.cursor() as cursor:
            # Two int4 keys; folding large ids only makes unrelated persons share a lock now and then.
            key = (person.pk if person else 0) % 2**31
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_REMEMBER_LOCK, key])
        # Candidates: the key of this text as written or in NFKC (full-width letters), in their whitespace-free
        # content; Python then compares the dedupe forms.
        squeezed = Func(
            F("content"), Value(r"\s+"), Value(""), Value("g"), function="regexp_replace", output_field=TextField()
        )
        as_written, nfkc = _search_key(content), _search_key(unicodedata.normalize("NFKC", content))
        candidates = (
            active_semantic_memories()
            .filter(person=person)
            .alias(squeezed=squeezed)
            .filter(Q(squeezed__icontains=as_written) | Q(squeezed__icontains=nfkc))
        )
        for existing in candidates.order_by("id"):
            if same_content_key(existing.content) == same:
                return existing, False
        now = timezone.now()
        body: dict[str, Any] = {"observed_at": moment_iso(now)}
        if source_id:
            body["source_id"] = source_id
        memory = memory_create(
            content=content,
            memory_type=memory_type,
            person=person,
            pinned=pinned,
            source_conversation=source_conversation,
            source_channel=source_channel or (source_conversation.channel if source_conversation else ""),
            source_day=local_day(now),
            body=body,
            created_at=now,
        )
    return memory, True


class MemoryChanges(TypedDict, total=False):
    """What ``memory_update`` may change; ``occurred_at`` lives in the body (None clears the day)."""

    content: str
    memory_type: str
    occurred_at: str | None


# Body keys recording who last edited a memory by hand (an operator): the nightly model never changes it after.
EDITED_BY, EDITED_AT = "edited_by", "edited_at"
# Body key of a pin the nightly pin review made (it may take back its own pins, never anyone else's).
PINNED_BY = "pinned_by"


def _edit_recorded(memory: SemanticMemory, by: str) -> None:
    memory.body = {**(memory.body or {}), EDITED_BY: by, EDITED_AT: timezone.now().isoformat()}


def memory_edit_record(*, memory: SemanticMemory, by: str) -> SemanticMemory:
    """Record that ``by`` (an operator, e.g. ``console:admin``) edited the memory by hand."""
    _edit_recorded(memory, by)
    memory.save(update_fields=["body", "updated_at"])
    return memory


def memory_update(*, memory: SemanticMemory, changes: MemoryChanges, edited_by: str = "") -> SemanticMemory:
    """Change a memory's content, type or occurred_at; what ``changes`` leaves out stays as it is.

    ``edited_by`` names the operator making the change: the memory is then theirs, and sleep leaves it alone.
    """
    unknown = set(changes) - set(MemoryChanges.__annotations__)
    if unknown:
        raise ValidationError({name: f"{name} cannot be changed here" for name in sorted(unknown)})
    fields = ["updated_at"]
    if edited_by:
        _edit_recorded(memory, edited_by)
        fields.append("body")
    if "content" in changes:
        memory.content = _content_valid(changes["content"])
        fields.append("content")
    if "memory_type" in changes:
        memory.memory_type = _memory_type_valid(changes["memory_type"])
        fields.append("memory_type")
    if "occurred_at" in changes:
        memory.body = {**memory.body, "occurred_at": changes["occurred_at"]}
        memory.valid_from = memory_valid_from(body=memory.body, created_at=memory.created_at)
        fields += ["body", "valid_from"]
    fields = list(dict.fromkeys(fields))
    memory.full_clean(validate_constraints=False)
    memory.save(update_fields=fields)
    return memory


def memory_deprecate(*, memory: SemanticMemory, reason: str = "") -> SemanticMemory:
    """Soft-delete: the memory leaves recall and resident memory but stays for belief history."""
    memory.status = MemoryStatus.DEPRECATED
    memory.body = {**memory.body, "deprecated_reason": reason} if reason else memory.body
    memory.expired_reason = reason
    memory.valid_to = memory.valid_to or timezone.now()
    memory.save(update_fields=["status", "body", "expired_reason", "valid_to", "updated_at"])
    return memory


def memory_restore(*, memory: SemanticMemory, by: str = "", note: str = "") -> SemanticMemory:
    """Back to active, whatever retired it (deprecation or expiry); its one validity span reopens.

    With ``by`` (an operator) the retirement undone is kept in the body's ``restored`` list (when, why it had
    ended, what had superseded it, ``note``) for belief history, and the memory counts as edited by them.
    """
    if by and memory.status != MemoryStatus.ACTIVE:
        undone = {
            "at": timezone.now().isoformat(),
            "by": by,
            "status": memory.status,
            "reason": memory.expired_reason,
            "superseded_by": memory.superseded_by_id,
            **({"note": note} if note else {}),
        }
        _edit_recorded(memory, by)
        memory.body = {**memory.body, "restored": [*memory.body.get("restored", []), undone]}
    memory.status = MemoryStatus.ACTIVE
    memory.expired_reason = ""
    memory.superseded_by = None
    memory.valid_to = None
    memory.save(update_fields=["status", "expired_reason", "superseded_by", "valid_to", "body", "updated_at"])
    return memory


def memory_expire(
    *,
    memory: SemanticMemory,
    reason: str,
    superseded_by: SemanticMemory | None = None,
    at: datetime | None = None,
) -> SemanticMemory:
    """Retire an active memory with the reason and, when one does, the memory that supersedes it.

    The one write that ends a belief (expiry, supersede, merge, split): ``valid_to`` becomes ``at``,
    by default now or, when a successor took over earlier (its ``valid_from``: a change stated days
    before the night that consolidated it), then; so recall "as of" a moment finds one version, not
    both. Nothing is deleted: ``memory_restore`` brings it back.
    """
    _active_valid(memory)
    if superseded_by is not None and superseded_by.pk == memory.pk:
        raise ValidationError({"superseded_by": "a memory cannot supersede itself"})
    memory.status = MemoryStatus.EXPIRED
    memory.expired_reason = reason
    memory.superseded_by = superseded_by
    end = at or timezone.now()
    if at is None and superseded_by is not None and superseded_by.valid_from is not None:
        end = min(end, max(superseded_by.valid_from, memory.valid_from or memory.created_at))
    memory.valid_to = end
    memory.full_clean(validate_constraints=False)
    memory.save(update_fields=["status", "expired_reason", "superseded_by", "valid_to", "updated_at"])
    return memory


@dataclass(frozen=True)
class MemoryPart:
    """One memory a split writes: its type, text and (deterministic) external id."""

    memory_type: str
    content: str
    external_id: str | None


def _memory_derive(
    source: SemanticMemory, *, part: MemoryPart, body: dict[str, Any] | None = None, **overrides: Any
) -> SemanticMemory:
    """A new memory about what ``source`` is about: its person, provenance and dates, unless overridden."""
    fields: dict[str, Any] = {
        "person": source.person,
        "source_conversation": source.source_conversation,
        "source_channel": source.source_channel,
        "source_day": source.source_day,
        **overrides,
    }
    inherited = {k: v for k, v in (source.body or {}).items() if k in _DERIVED_BODY_KEYS}
    return memory_create(
        content=part.content,
        memory_type=part.memory_type,
        external_id=part.external_id,
        body={**inherited, **(body or {})},
        **fields,
    )


def memory_split(*, memory: SemanticMemory, parts: Sequence[MemoryPart]) -> list[SemanticMemory]:
    """Write each part as a memory of its own and expire ``memory``, superseded by the first part."""
    _active_valid(memory)
    if not parts:
        raise ValidationError({"parts": "a split needs at least one part"})
    with transaction.atomic():
        # split_from: forgetting ``memory`` reaches every part, not only the first (its successor).
        written = [_memory_derive(memory, part=part, body={"split_from": memory.pk}) for part in parts]
        ids = ", ".join(f"#{part.pk}" for part in written)
        memory_expire(memory=memory, reason=f"split into {ids}", superseded_by=written[0])
    return written


def memory_correct(
    *,
    memory: SemanticMemory,
    content: str | None = None,
    memory_type: str | None = None,
    reason: str = "",
    body: dict[str, Any] | None = None,
) -> SemanticMemory:
    """Correct an active memory; returns the memory that now holds it.

    New text is a new version that supersedes ``memory`` (``memory_expire``), so the old text stays in
    its belief history and the new one is embedded afresh; a change of type alone is made in place.
    ``body`` adds keys of the new version's own (a profile's lines).
    """
    _active_valid(memory)
    memory_type = _memory_type_valid(memory_type) if memory_type is not None else memory.memory_type
    content = _content_valid(content) if content is not None else memory.content
    if content == memory.content:
        return memory_update(memory=memory, changes={"memory_type": memory_type})
    with transaction.atomic():
        corrected = _memory_derive(
            memory,
            part=MemoryPart(memory_type=memory_type, content=content, external_id=None),
            body=body,
            pinned=memory.pinned,
        )
        why = f"corrected to #{corrected.pk}" + (f": {reason}" if reason else "")
        memory_expire(memory=memory, reason=why, superseded_by=corrected)
    return corrected


def _earliest(values: Iterable[str | None]) -> str | None:
    present = sorted(v for v in values if v)
    return present[0] if present else None


def _made_in(memories: Sequence[SemanticMemory]) -> set[int]:
    """The conversations ``memories`` were made in: each one's source conversation and those its body lists."""
    return {c for memory in memories for c in (memory.body or {}).get("source_conversations", [])} | {
        memory.source_conversation_id for memory in memories if memory.source_conversation_id
    }


def memory_merge(
    *,
    sources: Sequence[SemanticMemory],
    content: str,
    memory_type: str,
    external_id: str,
    body: dict[str, Any] | None = None,
) -> SemanticMemory:
    """Write one memory that says what ``sources`` say and expire each of them, superseded by it.

    The merged memory is pinned when a source was, and keeps the earliest day and dates and
    every source conversation of its sources; ``body`` adds keys of its own (e.g. its slot).
    """
    if len({source.pk for source in sources}) != len(sources) or len(sources) < 2:
        raise ValidationError({"sources": "a merge needs two or more distinct memories"})
    for source in sources:
        _active_valid(source)
    with transaction.atomic():
        merged = _memory_derive(
            sources[0],
            part=MemoryPart(memory_type=memory_type, content=content, external_id=external_id),
            pinned=any(source.pinned for source in sources),
            source_day=min((source.source_day for source in sources if source.source_day), default=None),
            body={
                "observed_at": _earliest((source.body or {}).get("observed_at") for source in sources),
                "occurred_at": _earliest((source.body or {}).get("occurred_at") for source in sources),
                "source_conversations": sorted(_made_in(sources)),
                "merged_from": [source.pk for source in sources],
                **(body or {}),
            },
        )
        for source in sources:
            memory_expire(memory=source, reason=f"merged into #{merged.pk}", superseded_by=merged)
    return merged


def memory_sources_add(*, memory: SemanticMemory, sources: Sequence[SemanticMemory]) -> SemanticMemory:
    """Record on ``memory`` the conversations ``sources`` were made in (restatements retired into it).

    Where the fact was said, not what it says: neither its belief history nor an operator's edit changes, and its
    ``updated_at`` stays. Recall then ranks the fact with the lines that say it (facts first), as a merge would.
    """
    made_in = _made_in(sources)
    with transaction.atomic():
        # Read again under a lock: an edit in the console meanwhile keeps its body and this adds to it.
        memory = SemanticMemory.objects.select_for_update().get(pk=memory.pk)
        held = set((memory.body or {}).get("source_conversations", []))
        added = made_in - held - {memory.source_conversation_id}
        if added:
            memory.body = {**(memory.body or {}), "source_conversations": sorted(held | added)}
            memory.save(update_fields=["body"])
    return memory


def memory_pin(*, memory: SemanticMemory, by: str = "") -> SemanticMemory:
    """Pin the memory; ``by`` names a pin the nightly review made (an operator's pin names nobody)."""
    memory.pinned = True
    body = {k: v for k, v in (memory.body or {}).items() if k != PINNED_BY}
    memory.body = {**body, PINNED_BY: by} if by else body
    memory.save(update_fields=["pinned", "body", "updated_at"])
    return memory


def memory_unpin(*, memory: SemanticMemory) -> SemanticMemory:
    memory.pinned = False
    memory.body = {k: v for k, v in (memory.body or {}).items() if k != PINNED_BY}
    memory.save(update_fields=["pinned", "body", "updated_at"])
    return memory


# --- Emotional tendencies ---

# Stored figures keep 4 decimals: anchors are judged to one or two, further digits are only float noise.
_TENDENCY_DIGITS = 4


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, _TENDENCY_DIGITS)


def _window_fields(prefix: str, window: Window) -> dict[str, Any]:
    return {
        f"{prefix}_{key}": _rounded(value) if isinstance(value, float) else value
        for key, value in asdict(window).items()
    }


def _tendency_fields(tendency: Tendency) -> dict[str, Any]:
    return {
        **_window_fields("week", tendency.week),
        **_window_fields("month", tendency.month),
        **{
            key: _rounded(getattr(tendency, key))
            for key in ("valence_shift", "arousal_shift", "valence_threshold", "arousal_threshold")
        },
        "mood": tendency.mood,
        "mood_since": tendency.mood_since,
        "shifts": tendency.shifts,
    }


def emotional_tendencies_refresh(*, day: date) -> dict[str, Any]:
    """Store the tendency of ``day`` for every person with anchors in its 30 days, and the overall one.

    Idempotent: a re-run of the day stores the same rows (and drops the row of a person who no
    longer has anchors in the window, e.g. after forgetting).
    """
    anchors = limbic_anchors(since=day - timedelta(days=MONTH_DAYS - 1), until=day)
    by_person: dict[int, list] = defaultdict(list)
    for anchor in anchors:
        if anchor.person_id is not None:
            by_person[anchor.person_id].append(anchor)
    tendencies: dict[int | None, Tendency] = {None: tendency_compute(anchors=anchors, day=day)}
    tendencies.update({pk: tendency_compute(anchors=group, day=day) for pk, group in sorted(by_person.items())})
    with transaction.atomic():
        dropped, _ = (
            EmotionalTendency.objects.filter(day=day, person__isnull=False).exclude(person_id__in=by_person).delete()
        )
        for person_id, tendency in tendencies.items():
            EmotionalTendency.objects.update_or_create(
                person_id=person_id, day=day, defaults=_tendency_fields(tendency)
            )
    return {
        "day": day.isoformat(),
        "anchors": len(anchors),
        "persons": len(by_person),
        "dropped": dropped,
        # Person ids only: the step's output is an audit row, not a place for names.
        "notable": {str(pk): t.mood for pk, t in tendencies.items() if pk is not None and t.mood},
        "overall_mood": tendencies[None].mood,
    }
