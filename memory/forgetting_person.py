"""Forgetting everything about one person (``person_forget``, and its plan), on the sweep of ``memory.forgetting``.

Besides their memories and every passage quoting them, as any forget takes them, it deletes their diary blocks
and the dreams made partly of their day, their history entries, their sections of the time summaries and every
passage naming them. It also deletes their emotional tendencies and computes again the overall ones whose 30 days
held one of their anchors, and their subjects. An imprint goes with the person. With ``messages``: their
conversations, the LLM audit rows quoting what they said, their accounts and the person themself (erasure).
"""

from __future__ import annotations

from datetime import date, timedelta

from django.db.models import Exists, OuterRef, Q

from anima.core.forgotten import HISTORY, IDENTITY, MEMORY, PERSON, forgotten_account
from anima.core.llm.audit import llm_runs_erase, llm_runs_quoting
from anima.core.models import AutoLlmRun, BlockTag, Entity, ForgetReason, ForgetTombstone
from anima.core.redaction import Passages, Redactor
from conversations.models import Conversation, HistoryEntry, Identity, Message, Person
from conversations.selectors import conversations_of_persons
from memory.forgetting import ForgetPlan, ForgetResult, PlannedRow, _planned, _redactor, _run, _taken
from memory.models import EmotionalTendency, LimbicBlock, SemanticMemory, Subject
from memory.services import emotional_tendencies_refresh
from memory.tendency import MONTH_DAYS
from memory.workspace import session_key_parse
from temporal.models import TemporalSummary, Window
from temporal.services import temporal_summary_upsert


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
