"""Forgetting one memory (``memory_forget``) everywhere, and the sweep every forget runs on.

Forgetting everything about one person (``person_forget``) is ``memory.forgetting_person``, on the same
machinery. The command, the API, the console and the memory tool call these services. A forget:

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

An imprint goes with any of its anchors a forget deletes (the next night makes it again from the anchors left,
if they still recur).
Forgetting a fact takes its line out of every version of the profiles that summarised it, and a subject it
leaves with no fact, or unnamed, goes (``memory.subjects.services.subjects_after_forget``).

All of it is one transaction: the append-only triggers on limbic blocks and history entries let
it through because it names its open tombstone, and only then.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from django.apps import apps
from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.db import models, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from anima.core.cache import cache_delete_prefix
from anima.core.config import config_get
from anima.core.forgotten import HISTORY, MEMORY, forgotten_fingerprint
from anima.core.models import Component, Entity, ForgetReason, ForgetTombstone, MemoryStatus, SegmentedTextModel
from anima.core.redaction import Fact, Lexemes, Redactor, forget_redaction
from conversations.models import Conversation, HistoryEntry, Identity, Message, PeerBlock, Person
from memory.imprints import imprints_of_anchors
from memory.models import LimbicBlock, SemanticMemory
from memory.search import KEYWORD_BRANCHES
from memory.selectors import AUTOBIOGRAPHICAL, LIMBIC, SEMANTIC, SESSION, memory_recall, memory_version_ids
from memory.services import memory_restore
from memory.subjects.selectors import profiles_citing
from memory.subjects.services import subjects_after_forget

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
