"""A person's subjects as every surface shows them (the API, MCP, the console, the workspace export): one shape
read from the tables, so a subject forgetting removed, or whose facts are all gone, is shown nowhere.

The lists are one person's only; callers check that whoever asks may read that person first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from anima.core.calendar import moment_iso
from conversations.models import Person
from memory.imprints import imprints_of_person
from memory.models import LimbicBlock, SemanticMemory, Subject, SubjectKind
from memory.subjects.recall import subject_recent_mentions, subject_served, subjects_served
from memory.subjects.selectors import subject_facts, subject_profile, subject_stated

TIMELINE_LINES = 20


@dataclass(frozen=True)
class TimelineItem:
    at: datetime
    kind: str  # "fact" (a memory about it) or "line" (a conversation line naming it)
    id: int
    text: str


def entity_summary(*, subject: Subject) -> dict:
    """A subject as a list shows it: who or what it is, how it is related, its profile and how many facts."""
    profile = subject_profile(subject=subject)
    return {
        "key": subject.key,
        "kind": subject.kind,
        "relation": subject.relation,
        "name": subject.name,
        "label": subject.label(),
        "aliases": list(subject.aliases),
        "related_to": subject.related_to.key if subject.related_to_id else None,
        "profile": _memory(profile) if profile is not None else None,
        "facts": subject_facts(subject=subject).count(),
    }


def _memory(memory: SemanticMemory) -> dict:
    return {
        "id": memory.pk,
        "content": memory.content,
        "created_at": moment_iso(memory.created_at),
        "citation": f"[[anima:{memory.pk}]]",
    }


def entities_of_person(*, person: Person) -> list[dict]:
    """``person``'s served subjects (``subjects_served``), themself first, each as ``entity_summary``."""
    return [entity_summary(subject=subject) for subject in subjects_served(person=person).select_related("related_to")]


def entity_timeline(*, subject: Subject, lines: int = TIMELINE_LINES) -> list[TimelineItem]:
    """The subject's facts and the latest conversation lines naming it, newest first."""
    items = [TimelineItem(m.created_at, "fact", m.pk, m.content) for m in subject_facts(subject=subject)]
    named = subject_recent_mentions(subject=subject, limit=lines)
    items += [TimelineItem(m.created_at, "line", m.pk, m.content) for m in named]
    return sorted(items, key=lambda item: (item.at, item.kind, item.id), reverse=True)


def entity_detail(*, person: Person, key: str) -> dict | None:
    """One served subject of ``person`` (by key, relation, name or alias) with its facts, the subjects related
    through it and its timeline; None when ``person`` has no such subject."""
    subject = subject_served(person=person, key=key)
    return _detail(subject=subject) if subject is not None else None


def _detail(*, subject: Subject) -> dict:
    related = subjects_served(person=subject.person).filter(related_to=subject)
    facts = list(subject_facts(subject=subject))
    stated = subject_stated(subject=subject)
    return {
        **entity_summary(subject=subject),
        # What each fact states of the subject ("job", "age"; "" when it only names it): what recall answers with.
        "facts": [{**_memory(m), "states": stated.get(m.pk, "")} for m in facts],
        "imprints": [
            {
                "id": imprint.pk,
                "content": imprint.content,
                **{k: imprint.body.get(k) for k in ("first_day", "last_day")},
            }
            for imprint in imprints_of_subject(subject=subject, facts=facts)
        ],
        "related": [{"key": s.key, "relation": s.relation, "label": s.label()} for s in related],
        "timeline": [
            {"at": moment_iso(item.at), "kind": item.kind, "id": item.id, "text": item.text}
            for item in entity_timeline(subject=subject)
        ],
    }


def imprints_of_subject(*, subject: Subject, facts: list[SemanticMemory]) -> list[LimbicBlock]:
    """The person's current imprints that involve ``subject``: made of anchors citing one of its ``facts``, or
    naming it (its name or an alias among the words that recurred, or in the imprint's text)."""
    fact_ids = {fact.pk for fact in facts}
    names = {name.casefold() for name in [subject.name, *subject.aliases] if name}
    involved = []
    for imprint in imprints_of_person(person=subject.person):
        body = imprint.body or {}
        words = {str(word).casefold() for word in body.get("words", [])}
        text = imprint.content.casefold()
        if fact_ids & set(body.get("semantic_memory_ids", [])) or names & words or any(n in text for n in names):
            involved.append(imprint)
    return involved


# Where the relationship view puts each kind, and the heading it gives it.
KIND_HEADINGS = {
    SubjectKind.SELF: "Themself",
    SubjectKind.PERSON: "People",
    SubjectKind.PET: "Pets",
    SubjectKind.PLACE: "Places",
    SubjectKind.ORGANISATION: "Organisations",
    SubjectKind.OTHER: "Others",
}


def entities_markdown(*, person: Person) -> str:
    """``person``'s subjects as a readable page: by kind, each with its relation, names, profile and facts."""
    # Each subject read once, as its page shows it (not listed, then looked up again by key).
    entities = [_detail(subject=subject) for subject in subjects_served(person=person).select_related("related_to")]
    lines = [f"# Who and what {person.display_name or person.slug} talks about", ""]
    if not entities:
        return "\n".join([*lines, "(nobody and nothing yet)"]) + "\n"
    for kind, heading in KIND_HEADINGS.items():
        mine = [entity for entity in entities if entity["kind"] == kind]
        if not mine:
            continue
        lines += [f"## {heading}", ""]
        for detail in mine:
            lines += [*_entity_lines(detail, heading="###"), ""]
    return "\n".join(lines).rstrip() + "\n"


def _entity_lines(detail: dict, *, heading: str) -> list[str]:
    also = [alias for alias in detail["aliases"] if alias != detail["label"]]
    relation = f" ({detail['relation']})" if detail["relation"] and detail["kind"] != SubjectKind.SELF else ""
    lines = [f"{heading} {detail['label']}{relation}", f"Key: {detail['key']}"]
    if also:
        lines.append(f"Also: {', '.join(also)}")
    if detail["profile"]:
        lines.append(f"Profile: {detail['profile']['content']} {detail['profile']['citation']}")
    return lines + [f"- {fact['content']} {fact['citation']}" for fact in detail["facts"]]


def entity_markdown(*, person: Person, key: str) -> str | None:
    """One served subject of ``person`` as a readable page: its names, profile, facts and timeline; None when
    ``person`` has no such subject."""
    detail = entity_detail(person=person, key=key)
    if detail is None:
        return None
    lines = [*_entity_lines(detail, heading="#"), "", "## Timeline"]
    timeline = [f"- {item['at'][:10]} ({item['kind']}) {item['text']}" for item in detail["timeline"]]
    lines += timeline or ["(nothing yet)"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class RelationNode:
    subject: Subject
    depth: int  # 0: related to the person directly
    facts: int
    profiled: bool


def relationship_tree(*, person: Person) -> list[RelationNode]:
    """``person``'s served subjects as a tree, depth first: kind by kind (people, pets, places, …), each followed by
    the subjects related through it ("Lily's cat" under Lily); the person themself is the root, left out."""
    subjects = [s for s in subjects_served(person=person).select_related("related_to") if s.kind != SubjectKind.SELF]
    order = list(KIND_HEADINGS)
    children: dict[int | None, list[Subject]] = {}
    served = {s.pk for s in subjects}
    for subject in subjects:
        parent = subject.related_to_id if subject.related_to_id in served else None
        children.setdefault(parent, []).append(subject)
    nodes: list[RelationNode] = []

    def visit(parent: int | None, depth: int) -> None:
        for subject in sorted(children.get(parent, []), key=lambda s: (order.index(s.kind), s.relation, s.label())):
            facts = subject_facts(subject=subject).count()
            nodes.append(RelationNode(subject, depth, facts, subject_profile(subject=subject) is not None))
            visit(subject.pk, depth + 1)

    visit(None, 0)
    return nodes
