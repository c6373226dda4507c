"""Writes of subjects and their observation profiles: the nightly build's, and forgetting's.

A profile's text is made of its heading (the subject's name), an intro (its relation to the person) and one
line per fact it summarises, kept in its body (``PROFILE_KEY``): forgetting a fact takes that fact's line out
of every version of the profile, so its text survives nowhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from anima.core.models import MemoryType
from conversations.models import Language, Person
from memory.models import SemanticMemory, Subject, SubjectMention
from memory.services import memory_correct, memory_create, memory_expire
from memory.subjects import PROFILE_KEY, SOURCE_FACTS_KEY
from memory.subjects.selectors import profiles_citing, subject_profile


@dataclass(frozen=True)
class SubjectSpec:
    """One subject as the nightly build reads it from a person's facts."""

    key: str
    kind: str
    relation: str
    name: str
    aliases: tuple[str, ...]
    memory_ids: frozenset[int]
    # Of those facts, what each states of the subject (its slot's attribute); one only naming it is not here.
    stated: dict[int, str] = field(default_factory=dict)


@dataclass
class SubjectsSynced:
    subjects: dict[str, Subject] = field(default_factory=dict)
    created: int = 0
    updated: int = 0
    removed: int = 0
    mentions_added: int = 0
    mentions_dropped: int = 0


_SUBJECT_FIELDS = ("kind", "relation", "name", "aliases")


def subjects_sync(*, person: Person, specs: Sequence[SubjectSpec], retire_reason: str) -> SubjectsSynced:
    """Make ``person``'s subjects and their mentions exactly ``specs``; re-running with the same specs changes
    nothing. A subject no spec holds goes (its profile retired with ``retire_reason``); an unnamed one a
    name now identifies ("daughter:" → "daughter:lily") keeps its row, so its profile keeps its versions."""
    synced = SubjectsSynced()
    with transaction.atomic():
        existing = {s.key: s for s in Subject.objects.select_for_update().filter(person=person)}
        wanted = {spec.key for spec in specs}
        for spec in specs:
            subject = existing.pop(spec.key, None) or _renamed(existing, spec, wanted)
            values = {"kind": spec.kind, "relation": spec.relation, "name": spec.name, "aliases": list(spec.aliases)}
            if subject is None:
                subject = Subject.objects.create(person=person, key=spec.key, **values)
                synced.created += 1
            elif subject.key != spec.key or any(getattr(subject, name) != values[name] for name in _SUBJECT_FIELDS):
                subject.key = spec.key
                for name, value in values.items():
                    setattr(subject, name, value)
                subject.save()
                synced.updated += 1
            synced.subjects[spec.key] = subject
            _mentions_sync(subject, spec, synced)
        for subject in existing.values():
            subject_profile_retire(subject=subject, reason=retire_reason)
            subject.delete()
            synced.removed += 1
    return synced


def _renamed(existing: dict[str, Subject], spec: SubjectSpec, wanted: set[str]) -> Subject | None:
    """The unnamed subject of ``spec``'s relation, when a name now says who it is and no spec keeps it unnamed."""
    unnamed = f"{spec.relation}:"
    if not spec.name or not spec.relation or unnamed in wanted or unnamed not in existing:
        return None
    return existing.pop(unnamed)


def _mentions_sync(subject: Subject, spec: SubjectSpec, synced: SubjectsSynced) -> None:
    memory_ids = spec.memory_ids
    dropped, _ = SubjectMention.objects.filter(subject=subject).exclude(memory_id__in=memory_ids).delete()
    held = {mention.memory_id: mention for mention in SubjectMention.objects.filter(subject=subject)}
    added = sorted(memory_ids - held.keys())
    SubjectMention.objects.bulk_create(
        [SubjectMention(subject=subject, memory_id=pk, attribute=spec.stated.get(pk, "")) for pk in added],
        ignore_conflicts=True,
    )
    # A fact whose slot now reads otherwise (or a mention from before attributes were noted) states anew.
    restated = [mention for pk, mention in held.items() if mention.attribute != spec.stated.get(pk, "")]
    for mention in restated:
        mention.attribute = spec.stated.get(mention.memory_id, "")
    SubjectMention.objects.bulk_update(restated, ["attribute"])
    synced.mentions_dropped += dropped
    synced.mentions_added += len(added)


@dataclass(frozen=True)
class ProfileLine:
    fact: int  # the fact this line says
    text: str


def profile_text(*, heading: str, intro: str, lines: Iterable[ProfileLine], language: str) -> str:
    """「小雨：Leo 的女儿；属虎；今年四岁。」 / "Lily: Maya's daughter; is four; goes to kindergarten." """
    parts = [part for part in (intro, *(line.text for line in lines)) if part]
    if language == Language.ZH:
        return f"{heading}：{'；'.join(parts)}。"
    return f"{heading}: {'; '.join(parts)}."


def _profile_body(*, subject: Subject, heading: str, intro: str, lines: Sequence[ProfileLine], language: str) -> dict:
    return {
        PROFILE_KEY: {
            "subject": subject.key,
            "language": language,
            "heading": heading,
            "intro": intro,
            "lines": [{"fact": line.fact, "text": line.text} for line in lines],
        },
        SOURCE_FACTS_KEY: [line.fact for line in lines],
    }


def _lines_of(profile: SemanticMemory) -> list[ProfileLine]:
    return [ProfileLine(fact=line["fact"], text=line["text"]) for line in profile.body[PROFILE_KEY]["lines"]]


def subject_profile_write(
    *, subject: Subject, heading: str, intro: str, lines: Sequence[ProfileLine], language: str
) -> str:
    """Write the subject's profile: new, or a new version superseding the one it had (``memory_correct``, so the
    old text stays in belief history). Returns "written", "rewritten" or "unchanged"."""
    content = profile_text(heading=heading, intro=intro, lines=lines, language=language)
    body = _profile_body(subject=subject, heading=heading, intro=intro, lines=lines, language=language)
    current = subject_profile(subject=subject)
    with transaction.atomic():
        if current is None:
            profile = memory_create(
                content=content, memory_type=MemoryType.OBSERVATION, person=subject.person, body=body
            )
            action = "written"
        elif current.content == content and current.body.get(SOURCE_FACTS_KEY) == body[SOURCE_FACTS_KEY]:
            return "unchanged"
        else:
            profile = memory_correct(memory=current, content=content, reason="its facts changed", body=body)
            if profile.pk == current.pk:  # the same words about other facts: the citations change in place
                profile.body = {**profile.body, **body}
                profile.save(update_fields=["body", "updated_at"])
            action = "rewritten"
        subject.profile = profile
        subject.save(update_fields=["profile", "updated_at"])
    return action


def subject_profile_retire(*, subject: Subject, reason: str) -> bool:
    """Expire the subject's active profile (kept in belief history); whether it had one."""
    current = subject_profile(subject=subject)
    if current is None:
        return False
    memory_expire(memory=current, reason=reason)
    subject.profile = None
    subject.save(update_fields=["profile", "updated_at"])
    return True


# --- Forgetting -----------------------------------------------------------------------------------


def subjects_after_forget(*, forgotten: set[int], person_ids: set[int]) -> tuple[set[int], set[int]]:
    """After the facts ``forgotten`` were deleted (their mentions with them): every profile version that
    summarised one loses that line (one left without lines is deleted), and a subject left with no fact, or
    whose name no remaining fact states, goes with every version of its profile. Returns the entity ids
    (changed, deleted)."""
    changed: set[int] = set()
    deleted: set[int] = set()
    subjects = list(Subject.objects.filter(person_id__in=person_ids))
    for subject in subjects:
        texts = [text.casefold() for text in _remaining_texts(subject)]
        if not texts or (subject.name and not any(subject.name.casefold() in text for text in texts)):
            versions = SemanticMemory.objects.filter(
                person_id=subject.person_id, body__has_key=PROFILE_KEY, body__profile__subject=subject.key
            )
            deleted |= set(versions.values_list("pk", flat=True))
            versions.delete()
            subject.delete()
            continue
        aliases = [alias for alias in subject.aliases if any(alias.casefold() in text for text in texts)]
        if aliases != subject.aliases:
            subject.aliases = aliases
            subject.save(update_fields=["aliases", "updated_at"])
    for profile in profiles_citing(ids=forgotten).filter(person_id__in=person_ids):
        lines = [line for line in _lines_of(profile) if line.fact not in forgotten]
        if not lines:
            _version_drop(profile)
            deleted.add(profile.pk)
            continue
        spec: dict[str, Any] = profile.body[PROFILE_KEY]
        profile.content = profile_text(
            heading=spec["heading"], intro=spec["intro"], lines=lines, language=spec["language"]
        )
        profile.body = {
            **profile.body,
            PROFILE_KEY: {**spec, "lines": [{"fact": line.fact, "text": line.text} for line in lines]},
            SOURCE_FACTS_KEY: [line.fact for line in lines],
        }
        profile.save(update_fields=["content", "body", "updated_at"])
        changed.add(profile.pk)
    return changed, deleted


def _remaining_texts(subject: Subject) -> list[str]:
    return list(SemanticMemory.objects.filter(subject_mentions__subject=subject).values_list("content", flat=True))


def _version_drop(profile: SemanticMemory) -> None:
    """Delete one profile version; what it superseded is superseded by its successor instead (the chain holds)."""
    SemanticMemory.objects.filter(superseded_by=profile).update(superseded_by=profile.superseded_by_id)
    profile.delete()
