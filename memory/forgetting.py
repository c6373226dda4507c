"""Forgetting: one memory (``memory_forget``) or everything about one person (``person_forget``), everywhere.

The command, the API, the console and the memory tool all call these two services. A forget:

1. takes the memory and every version of it: what it superseded (older versions, the sources of a
   merge) and what was made from it (its successors, merges and split parts), transitively;
2. deletes them, restoring to active the memories merged with them (their successor is gone);
3. sweeps every text and JSON column of every table (messages only when asked) for passages that
   quote one of them or cite its id (``anima.core.redaction``): diary blocks, narratives, dreams,
   day/month/year summaries, history entries, short-term summaries, conversation day state, LLM
   audit rows, sleep step outputs… A quoting sentence is removed; a derived row left empty is
   deleted; a frozen peer block that quoted it is deleted (rendered again from redacted chunks)
   and a conversation's system-prompt snapshot is dropped (rebuilt on the next turn);
4. drops the cached peer digests and runs the registered forget hooks (e.g. vectors of the rows
   that were changed or deleted);
5. records a ``ForgetTombstone``: ids, counts and fingerprints (hashes of the normalized texts, slug and accounts
   taken, ``anima.core.forgotten``), no content: an import skips what they match.

Forgetting a person also deletes their emotional tendencies and computes again the overall ones whose
30 days held one of their anchors, and their subjects. An imprint goes with the person, and with any of its
anchors a forget deletes (the next night makes it again from the anchors left, if they still recur).
Forgetting a fact takes its line out of every version of the profiles that summarised it, and a subject it
leaves with no fact, or unnamed, goes (``memory.subjects.services.subjects_after_forget``).

All of it is one transaction: the append-only triggers on limbic blocks and history entries let
it through because it names its open tombstone, and only then.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from itertools import islice
from pathlib import Path
from typing import Any

from django.apps import apps
from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.db import models, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from anima.core.cache import cache_delete_prefix
from anima.core.config import config_get
from anima.core.forgotten import HISTORY, IDENTITY, MEMORY, PERSON, forgotten_account, forgotten_fingerprint
from anima.core.llm.audit import llm_runs_erase, llm_runs_quoting
from anima.core.models import (
    AutoLlmRun,
    BlockTag,
    Component,
    Entity,
    ForgetReason,
    ForgetTombstone,
    MemoryStatus,
    SegmentedTextModel,
)
from anima.core.redaction import Fact, Lexemes, Passages, Redactor, forget_redaction
from conversations.models import Conversation, HistoryEntry, Identity, Message, PeerBlock, Person
from conversations.selectors import conversations_of_persons
from memory.imprints import imprints_of_anchors
from memory.models import EmotionalTendency, LimbicBlock, SemanticMemory, Subject
from memory.search import KEYWORD_BRANCHES
from memory.selectors import AUTOBIOGRAPHICAL, LIMBIC, SEMANTIC, SESSION, memory_recall, memory_version_ids
from memory.services import emotional_tendencies_refresh, memory_restore
from memory.subjects.selectors import profiles_citing
from memory.subjects.services import subjects_after_forget
from memory.tendency import MONTH_DAYS
from memory.workspace import session_key_parse
from temporal.models import TemporalSummary, Window
from temporal.services import temporal_summary_upsert

# A derived row whose every sentence went is deleted; a message keeps its place with what is left.
_CITING_BODY_KEYS = ("semantic_memory_ids", "source_facts", "merged_from")
_DERIVED_COMPONENTS = {Component.SEMANTIC_MEMORY, Component.CONTENT_BLOCK, Component.TEMPORAL_SUMMARY}
_UPDATE_BATCH = 500


@dataclass
class ForgetResult:
    """What a forget changed: table → ids (the tombstone's counts); their vectors go by trigger (anima.core.vectors)."""

    tombstone: ForgetTombstone
    deleted: dict[str, set[int]] = field(default_factory=dict)
    changed: dict[str, set[int]] = field(default_factory=dict)
    fingerprints: set[str] = field(default_factory=set)

    def fingerprint(self, *, kind: str, texts: Iterable[str]) -> None:
        self.fingerprints.update(forgotten_fingerprint(kind=kind, text=text) for text in texts if text)

    def note(self, table: str, pk: int, *, deleted: bool) -> None:
        (self.deleted if deleted else self.changed).setdefault(table, set()).add(pk)


@dataclass(frozen=True)
class PlannedRow:
    table: str
    pk: int
    label: str
    action: str  # "delete" | "redact" | "restore" | "recompute"


@dataclass
class ForgetPlan:
    """What a forget will take (the console's confirmation page, ``forget`` without ``--yes``), and what it leaves
    that may say the same in other words (``review``: found by recall, changed by nobody but the operator)."""

    kind: str
    target_id: int
    rows: list[PlannedRow]
    review: list[PlannedRow] = field(default_factory=list)


# --- What a forget takes ---------------------------------------------------------------------------


def _taken(start: Iterable[int]) -> list[SemanticMemory]:
    return list(SemanticMemory.objects.filter(pk__in=memory_version_ids(start=start)).select_related("person"))


def _restored(ids: set[int]) -> list[SemanticMemory]:
    """Memories merged with forgotten ones: their successor goes, so they are held again."""
    return list(SemanticMemory.objects.filter(superseded_by__in=ids, status=MemoryStatus.EXPIRED).exclude(pk__in=ids))


def _redactor(memories: list[SemanticMemory], *, extra: Iterable[str] = ()) -> Redactor:
    lexemes = Lexemes()
    named = [
        (memory.content, [memory.person.display_name, memory.person.slug] if memory.person_id else [])
        for memory in memories
    ]
    extra = list(extra)
    lexemes.load([*(text for text, _ in named), *(name for _, names in named for name in names), *extra])
    facts = [fact for text, names in named if (fact := Fact.of(text, lexemes=lexemes, names=names)) is not None]
    facts.extend(fact for text in extra if (fact := Fact.of(text, lexemes=lexemes)) is not None)
    return Redactor(facts=tuple(facts), ids=frozenset(memory.pk for memory in memories), lexemes=lexemes)


# --- The sweep -------------------------------------------------------------------------------------


# What was said is redacted, not what names or keys a row: a short string is an identifier, a label or a setting
# (an external id, a chat id, a channel, a model name, a run key) — emptied, it would collide with another row's or
# point nowhere — except a title, which says what its row is about (the admin log's ``object_repr`` is one).
_PROSE_CHAR_FIELDS = frozenset({"title", "object_repr"})


def _text_fields(model: type[models.Model]) -> list[models.Field]:
    return [
        f
        for f in model._meta.concrete_fields
        if (
            isinstance(f, models.TextField | models.JSONField)
            or (isinstance(f, models.CharField) and f.name in _PROSE_CHAR_FIELDS)
        )
        and not f.primary_key
        and f.name != "fts_segmented"  # recomputed from the redacted text
        and not getattr(f, "choices", None)
    ]


def _swept_models(*, messages: bool) -> Iterator[type[models.Model]]:
    for model in apps.get_models():
        meta = model._meta
        # Anima's own tables and the admin log (it quotes the rows an operator changed); user accounts, sessions and
        # schedules are the framework's, not memory.
        if not (_in_project(meta.app_config) or model is LogEntry):
            continue
        # Who someone is (names, accounts) is not what they said: erasure removes those rows explicitly.
        if meta.proxy or not meta.managed or model in (ForgetTombstone, Person, Identity):
            continue
        if model is Message and not messages:
            continue
        yield model


def _in_project(app_config) -> bool:
    # By package, not by path: a virtualenv inside the checkout holds the framework's apps too.
    return (Path(settings.BASE_DIR) / app_config.name.split(".")[0]).is_dir()


@dataclass(frozen=True)
class _Change:
    model: type[models.Model]
    pk: int
    values: dict[str, Any]
    row: dict[str, Any]


def _sweep(redactor: Redactor, *, messages: bool, skip_entities: set[int], persons: set[int]) -> Iterator[_Change]:
    """Every row with a passage quoting a forgotten fact or citing a forgotten id, and its redacted values.

    Another person's semantic memories are about them, never a quote of a forgotten fact of ``persons``.
    """
    terms = redactor.search_terms()
    if not terms:
        return
    for model in _swept_models(messages=messages):
        fields = _text_fields(model)
        if not fields:
            continue
        # A cheap pre-filter (any content word of a fact, any marker); the redactor decides per sentence.
        query = Q()
        for f in fields:
            for term in terms:
                query |= Q(**{f"{f.attname}__icontains": term})
        if model is Entity:
            for key in _CITING_BODY_KEYS:  # a block citing a forgotten fact by id only
                for pk in redactor.ids:
                    query |= Q(**{f"body__{key}__contains": [pk]})
        rows = model._base_manager.filter(query)
        if model is Entity:
            rows = rows.exclude(pk__in=skip_entities).exclude(
                Q(primary_component=Component.SEMANTIC_MEMORY, person__isnull=False) & ~Q(person__in=persons)
            )
        extra = ["primary_component", "tag"] if model is Entity else []
        for row in _preloaded(rows.values(model._meta.pk.attname, *extra, *(f.attname for f in fields)), redactor):
            values = {}
            for f in fields:
                old = row[f.attname]
                new = redactor.value(old) if isinstance(f, models.JSONField) else redactor.text(old or "")
                if new != (old if isinstance(f, models.JSONField) else (old or "")):
                    values[f.attname] = new
            if values:
                yield _Change(model=model, pk=row[model._meta.pk.attname], values=values, row=row)


def _preloaded(rows: QuerySet, redactor: Redactor) -> Iterator[dict[str, Any]]:
    """The rows, a batch at a time, with the stems of their words asked of PostgreSQL once per batch."""
    iterator = rows.iterator(chunk_size=_UPDATE_BATCH)
    while batch := list(islice(iterator, _UPDATE_BATCH)):
        redactor.lexemes.load(
            value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            for row in batch
            for value in row.values()
            if value
        )
        yield from batch


def _apply(changes: list[_Change], result: ForgetResult) -> None:
    """Delete or rewrite the swept rows, a table at a time: a few queries per table (and per 500 rewritten rows)."""
    by_model: dict[type[models.Model], list[_Change]] = {}
    for change in changes:
        by_model.setdefault(change.model, []).append(change)
    for model, group in by_model.items():
        _apply_table(model, group, result)


def _apply_table(model: type[models.Model], changes: list[_Change], result: ForgetResult) -> None:
    table = model._meta.db_table
    manager = model._base_manager
    gone: list[int] = []
    kept: dict[int, dict[str, Any]] = {}
    for change in changes:
        values = change.values
        if model is Conversation and "system_prompt" in values:
            # The snapshot is dropped, not patched: the next turn builds it again from redacted sources.
            values = {**values, "system_prompt": "", "system_prompt_built_at": None}
        emptied = "content" in values and not values["content"].strip()
        derived = model is HistoryEntry or (model is Entity and change.row["primary_component"] in _DERIVED_COMPONENTS)
        # A frozen peer block is never rewritten: it goes, and is rendered again.
        if model is PeerBlock or (emptied and derived):
            gone.append(change.pk)
        else:
            kept[change.pk] = values
    if gone:
        manager.filter(pk__in=gone).delete()
        for pk in gone:
            result.note(table, pk, deleted=True)
    if not kept:
        return
    rows = manager.in_bulk(list(kept))  # a row deleted by a cascade above is simply not there
    fields = sorted({name for values in kept.values() for name in values})
    for pk, row in rows.items():
        for name, value in kept[pk].items():
            setattr(row, name, value)
        if isinstance(row, SegmentedTextModel):
            row.segment()
        result.note(table, pk, deleted=False)
    segmented = ["fts_segmented"] if issubclass(model, SegmentedTextModel) else []
    # Batched: one UPDATE's CASE has a branch per row, which every row of it walks (16,000 messages: 9.3 s → 6.6 s).
    manager.bulk_update(rows.values(), [*fields, *segmented], batch_size=_UPDATE_BATCH)


# --- The services ----------------------------------------------------------------------------------


def _run(
    *,
    kind: str,
    target_id: int,
    memories: list[SemanticMemory],
    messages: bool,
    requested_by: str,
    reason: str,
    redactor: Redactor,
    before_sweep: Callable[[ForgetResult], None] | None = None,
) -> ForgetTombstone:
    ids = {memory.pk for memory in memories}
    with transaction.atomic():
        tombstone = ForgetTombstone.objects.create(
            kind=kind,
            target_id=target_id,
            reason=ForgetReason(reason),
            requested_by=requested_by,
            with_messages=messages,
            entity_ids=sorted(ids),
        )
        result = ForgetResult(tombstone=tombstone)
        with forget_redaction(tombstone_id=tombstone.pk):
            for sibling in _restored(ids):
                memory_restore(memory=sibling)
            Entity.objects.filter(pk__in=ids).delete()
            for pk in ids:
                result.note(Entity._meta.db_table, pk, deleted=True)
            if before_sweep is not None:
                before_sweep(result)
            profiles_changed, profiles_deleted = subjects_after_forget(forgotten=ids, person_ids=_persons(memories))
            for pk in profiles_changed | profiles_deleted:
                result.note(Entity._meta.db_table, pk, deleted=pk in profiles_deleted)
            swept = list(_sweep(redactor, messages=messages, skip_entities=ids, persons=_persons(memories)))
            # A history entry quoting what goes is redacted here; its old text, re-imported, would bring it back.
            result.fingerprint(kind=HISTORY, texts=(c.row["content"] for c in swept if c.model is HistoryEntry))
            _apply(swept, result)
            _imprints_drop(result)
            prefix = config_get(section="memory.temporal_summary")["redis_key_prefix"]
            cache_delete_prefix(prefix=f"{prefix}:peer_roll:")
            tombstone.counts = {
                table: {"deleted": len(result.deleted.get(table, ())), "redacted": len(result.changed.get(table, ()))}
                for table in sorted(set(result.deleted) | set(result.changed))
            }
            result.fingerprint(kind=MEMORY, texts=(memory.content for memory in memories))
            tombstone.fingerprints = sorted(result.fingerprints)
            tombstone.finished_at = timezone.now()
            tombstone.save(update_fields=["counts", "fingerprints", "finished_at"])
    return tombstone


def _imprints_drop(result: ForgetResult) -> None:
    """Imprints made of an anchor the forget deleted: what they summarise is no longer all there."""
    table = Entity._meta.db_table
    gone = imprints_of_anchors(anchor_ids=result.deleted.get(table, ()))
    LimbicBlock.imprints.filter(pk__in=gone).delete()
    for pk in gone:
        result.changed.get(table, set()).discard(pk)
        result.note(table, pk, deleted=True)


def memory_forget_plan(*, memory: SemanticMemory, messages: bool = False) -> ForgetPlan:
    """What ``memory_forget`` would take, without taking it, and the rows left that may paraphrase it."""
    memories = _taken([memory.pk])
    redactor = _redactor(memories)
    rows = [PlannedRow("entities", m.pk, m.content[:120], "delete") for m in memories]
    rows += [PlannedRow("entities", m.pk, m.content[:120], "restore") for m in _restored({m.pk for m in memories})]
    rows += [
        PlannedRow("entities", pk, text[:120], "redact")
        for pk, text in profiles_citing(ids={m.pk for m in memories}).values_list("pk", "content")
    ]
    rows += _planned(redactor, messages=messages, memories=memories)
    deleted = {row.pk for row in rows if row.table == Entity._meta.db_table and row.action == "delete"}
    rows += [
        PlannedRow("entities", pk, text[:120], "delete")
        for pk, text in LimbicBlock.imprints.filter(pk__in=imprints_of_anchors(anchor_ids=deleted))
        .exclude(pk__in=deleted)
        .values_list("pk", "content")
    ]
    review = _paraphrases(memories, redactor=redactor, messages=messages)
    return ForgetPlan(kind=MEMORY, target_id=memory.pk, rows=rows, review=review)


# Rows recall finds for a forgotten text that share its words without quoting it are listed for review, not
# removed: taking text by resemblance alone would also take what only resembles it. Recall's order (dense
# similarity among them) puts the likeliest paraphrases first.
PARAPHRASE_LIMIT = 10


def memory_forget_paraphrases(*, memory: SemanticMemory, messages: bool = False) -> list[PlannedRow]:
    """Rows that may say what ``memory`` (and its versions) says in other words: what recall finds for their
    texts by words (a keyword branch found it), scoped to the memory's person, in recall's order, apart from
    what the forget takes (the versions, and what quotes them). Messages only with ``messages`` (otherwise they
    stay anyway)."""
    memories = _taken([memory.pk])
    return _paraphrases(memories, redactor=_redactor(memories), messages=messages)


def _paraphrases(memories: list[SemanticMemory], *, redactor: Redactor, messages: bool) -> list[PlannedRow]:
    skip = {("entities", m.pk) for m in memories}
    types = [SEMANTIC, LIMBIC, AUTOBIOGRAPHICAL] + ([SESSION] if messages else [])
    found: dict[tuple[str, int], PlannedRow] = {}
    for version in memories:
        hits = memory_recall(
            query=version.content,
            memory_types=types,
            person=version.person,
            global_only=version.person is None,
            limit=PARAPHRASE_LIMIT,
        )
        for hit in hits:
            if not hit["ranks"].keys() & set(KEYWORD_BRANCHES):
                continue  # resembling in the model's space only: too loose to point an operator at
            key = (Message._meta.db_table if hit["memory_type"] == SESSION else "entities", hit["id"])
            if key in skip or key in found or redactor.text(hit["snippet"]) != hit["snippet"]:
                continue  # taken by the forget itself
            label = f"{hit['memory_type']} #{hit['id']} (score {hit['score']:.2f}): {hit['snippet'][:100]}"
            found[key] = PlannedRow(key[0], key[1], label, "review")
    return list(found.values())


def _persons(memories: list[SemanticMemory]) -> set[int]:
    return {memory.person_id for memory in memories if memory.person_id}


def _planned(redactor: Redactor, *, messages: bool, memories: list[SemanticMemory]) -> list[PlannedRow]:
    planned = []
    skip = {memory.pk for memory in memories}
    for change in _sweep(redactor, messages=messages, skip_entities=skip, persons=_persons(memories)):
        text = change.row.get("content") or change.row.get("title") or ""
        kind = change.row.get("tag") or change.row.get("primary_component") or change.model._meta.verbose_name
        label = f"{kind} #{change.pk}" + (f": {text[:100]}" if isinstance(text, str) else "")
        emptied = "content" in change.values and not str(change.values["content"]).strip()
        planned.append(PlannedRow(change.model._meta.db_table, change.pk, label, "delete" if emptied else "redact"))
    return planned


def memory_forget(
    *,
    memory: SemanticMemory,
    messages: bool = False,
    requested_by: str = "",
    reason: str = ForgetReason.USER_REQUEST,
) -> ForgetTombstone:
    """Forget ``memory`` and everything derived from it, everywhere; ``messages`` also redacts the messages
    that stated it. Returns the tombstone (ids and counts, no content)."""
    memories = _taken([memory.pk])
    return _run(
        kind=MEMORY,
        target_id=memory.pk,
        memories=memories,
        messages=messages,
        requested_by=requested_by,
        reason=reason,
        redactor=_redactor(memories),
    )


def _person_memories(person: Person) -> list[SemanticMemory]:
    return _taken(SemanticMemory.objects.filter(person=person).values_list("pk", flat=True))


def person_forget_plan(*, person: Person, messages: bool = False) -> ForgetPlan:
    memories = _person_memories(person)
    skip = {m.pk for m in memories}
    rows = [PlannedRow("entities", m.pk, m.content[:120], "delete") for m in memories]
    rows += [
        PlannedRow("entities", pk, text[:120], "delete")
        for pk, text in _entities_of(person).exclude(pk__in=skip).values_list("pk", "content")
    ]
    rows += [PlannedRow("history_entries", pk, text[:120], "delete") for pk, text in _history(person)]
    rows += [
        PlannedRow(Subject._meta.db_table, pk, str(label), "delete")
        for pk, label in Subject.objects.filter(person=person).values_list("pk", "key")
    ]
    rows += [
        PlannedRow("emotional_tendencies", pk, f"{day} {mood}".strip(), "delete")
        for pk, day, mood in _tendencies(person).values_list("pk", "day", "mood")
    ]
    rows += [
        PlannedRow("emotional_tendencies", pk, f"{day} overall", "recompute")
        for pk, day in _overall_tendencies_counting(person).values_list("pk", "day")
    ]
    summaries = [
        PlannedRow("entities", summary.pk, summary.title, "redact" if others else "delete")
        for summary, others in _summaries_of(person)
    ]
    rows += summaries
    if messages:
        rows += [
            PlannedRow("conversations", pk, str(title), "delete")
            for pk, title in _conversations(person).values_list("pk", "title")
        ]
        rows += [
            PlannedRow(AutoLlmRun._meta.db_table, pk, f"LLM call {purpose} #{pk}", "redact" if values else "delete")
            for pk, purpose, values in llm_runs_quoting(passages=_said_by(person))
        ]
    # A summary losing their sections is listed once, as that: the sweep runs after the sections are gone.
    listed = {row.pk for row in summaries}
    rows += [
        row
        for row in _planned(_person_redactor(person, memories), messages=messages, memories=memories)
        if not (row.table == "entities" and row.pk in listed)
    ]
    return ForgetPlan(kind=PERSON, target_id=person.pk, rows=rows)


def _entities_of(person: Person):
    """The person's entities, and the dreams made partly of their day (``body.person_ids``): a dream's
    echo of their words is no quotable fact, so erasure takes the whole dream."""
    return Entity.objects.filter(Q(person=person) | Q(tag=BlockTag.DREAM, body__person_ids__contains=[person.pk]))


def _tendencies(person: Person):
    """Their emotional tendencies: read off their anchors, which go (and naming those anchors in ``shifts``)."""
    return EmotionalTendency.objects.filter(person=person)


def _overall_tendencies_counting(person: Person):
    """The overall (person-less) tendencies whose 30 days hold an anchor of theirs: computed again without it."""
    theirs = LimbicBlock.anchors.filter(
        person=person, source_day__lte=OuterRef("day"), source_day__gt=OuterRef("day") - timedelta(days=MONTH_DAYS)
    )
    return EmotionalTendency.objects.filter(person__isnull=True).filter(Exists(theirs))


def _overall_tendencies_recompute(days: list[date], result: ForgetResult) -> None:
    """Each overall tendency of ``days`` read again off the anchors left (with everyone's of those days)."""
    for day in days:
        emotional_tendencies_refresh(day=day)
    for pk in EmotionalTendency.objects.filter(person__isnull=True, day__in=days).values_list("pk", flat=True):
        result.note("emotional_tendencies", pk, deleted=False)


def _conversations(person: Person):
    """The person's conversations: theirs, or person-less ones on a channel account mapped to them."""
    return Conversation.objects.filter(conversations_of_persons(person_ids=[person.pk]))


def _history_rows(person: Person):
    return HistoryEntry.objects.filter(
        Q(person=person) | Q(conversation__in=_conversations(person)) | Q(pk__in=_global_records_of(person))
    )


def _global_records_of(person: Person) -> list[int]:
    """Global entries an import kept under the session key of one of the person's accounts (their copies are theirs)."""
    accounts = set(person.identities.values_list("channel", "external_id"))
    if not accounts:
        return []
    keyed = HistoryEntry.objects.filter(person__isnull=True).exclude(session_key="").values_list("pk", "session_key")
    return [pk for pk, key in keyed if session_key_parse(key) in accounts]


def _history(person: Person) -> list[tuple[int, str]]:
    return list(_history_rows(person).values_list("pk", "content"))


def _said_by(person: Person) -> Passages:
    """Everything said in the person's conversations, and their history entries: what their erasure takes."""
    messages = Message.objects.filter(conversation__in=_conversations(person)).values_list("content", flat=True)
    return Passages.of([*messages, *(text for _, text in _history(person))])


def _person_redactor(person: Person, memories: list[SemanticMemory]) -> Redactor:
    # Erasure: a passage naming the person goes too, not only one quoting their facts.
    return _redactor(memories, extra=[name for name in (person.display_name, person.slug) if name])


def person_forget(
    *,
    person: Person,
    messages: bool = False,
    requested_by: str = "",
    reason: str = ForgetReason.ERASURE,
) -> ForgetTombstone:
    """Forget everything about ``person``: their memories and diary blocks (and the dreams made partly of
    their day), their sections of the time
    summaries, their history entries, and every passage quoting or naming them. With ``messages``
    their conversations, accounts and the person themself go too (erasure)."""
    memories = _person_memories(person)
    said = _said_by(person) if messages else Passages.of([])

    def erase(result: ForgetResult) -> None:
        # Read before their anchors go: which overall days counted them.
        overall_days = list(_overall_tendencies_counting(person).values_list("day", flat=True))
        for pk, content in _entities_of(person).values_list("pk", "content"):
            result.note("entities", pk, deleted=True)
            result.fingerprint(kind=MEMORY, texts=[content])
        _entities_of(person).delete()
        history = _history(person)
        for pk, _ in history:
            result.note("history_entries", pk, deleted=True)
        result.fingerprint(kind=HISTORY, texts=(text for _, text in history))
        _history_rows(person).delete()
        for pk in _tendencies(person).values_list("pk", flat=True):
            result.note("emotional_tendencies", pk, deleted=True)
        _tendencies(person).delete()
        _overall_tendencies_recompute(overall_days, result)
        for pk in Subject.objects.filter(person=person).values_list("pk", flat=True):
            result.note(Subject._meta.db_table, pk, deleted=True)
        Subject.objects.filter(person=person).delete()
        _summary_sections_drop(person, result)
        if messages:
            # Before their messages go: what they said is looked for.
            deleted, redacted = llm_runs_erase(passages=said)
            for pk in deleted + redacted:
                result.note(AutoLlmRun._meta.db_table, pk, deleted=pk in deleted)
            conversations = list(_conversations(person).values_list("pk", flat=True))
            for pk in conversations:
                result.note("conversations", pk, deleted=True)
            Conversation.objects.filter(pk__in=conversations).delete()
            accounts = Identity.objects.filter(person=person).values_list("channel", "external_id")
            result.fingerprint(kind=IDENTITY, texts=(forgotten_account(channel=c, external_id=i) for c, i in accounts))
            result.fingerprint(kind=PERSON, texts=[person.slug])
            Identity.objects.filter(person=person).delete()
            Person.objects.filter(pk=person.pk).delete()

    return _run(
        kind=PERSON,
        target_id=person.pk,
        memories=memories,
        messages=messages,
        requested_by=requested_by,
        reason=reason,
        redactor=_person_redactor(person, memories),
        before_sweep=erase,
    )


def _summaries_of(person: Person) -> list[tuple[TemporalSummary, list[dict]]]:
    """The day/month/year summaries holding a section of theirs, each with the other people's sections."""
    return [
        (summary, [s for s in summary.body.get("sections", []) if s.get("person_id") != person.pk])
        for summary in TemporalSummary.objects.filter(body__sections__contains=[{"person_id": person.pk}])
    ]


def _summary_sections_drop(person: Person, result: ForgetResult) -> None:
    """Day/month/year summaries keep the other people's sections; one left with none is deleted."""
    for summary, sections in _summaries_of(person):
        if sections:
            temporal_summary_upsert(
                window=Window(summary.body["window"]),
                period_start=summary.source_day,
                sections=sections,
            )
            result.note("entities", summary.pk, deleted=False)
        else:
            summary.delete()
            result.note("entities", summary.pk, deleted=True)
