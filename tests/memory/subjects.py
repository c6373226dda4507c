"""Subjects for the memory tests, built as the nightly step leaves them: facts, mentions and a profile."""

from __future__ import annotations

from anima.core.models import MemoryType
from conversations.models import Language, Person
from memory.models import SemanticMemory, Subject, SubjectKind
from memory.services import memory_create
from memory.subjects.services import ProfileLine, subject_profile_write
from tests.factories import SubjectFactory, SubjectMentionFactory


def subject_built(
    person: Person,
    *,
    relation: str,
    name: str,
    facts: list[str],
    aliases: tuple[str, ...] = (),
    kind: str = SubjectKind.PERSON,
    profile: bool = True,
    intro: str = "",
    stated: tuple[str, ...] = (),
) -> tuple[Subject, list[SemanticMemory]]:
    """One subject of ``person`` with its ``facts`` (written now) and, with ``profile``, its profile of them;
    ``stated``: the attribute each fact states of the subject, as the nightly step notes it ("" names it only)."""
    memories = [memory_create(content=text, memory_type=MemoryType.WORLD, person=person) for text in facts]
    subject = SubjectFactory(
        person=person, kind=kind, relation=relation, name=name, aliases=[name, *aliases], key=f"{relation}:{name}"
    )
    for index, memory in enumerate(memories):
        SubjectMentionFactory(subject=subject, memory=memory, attribute=stated[index] if index < len(stated) else "")
    if profile:
        chinese = any("\u4e00" <= char <= "\u9fff" for char in " ".join(facts))
        subject_profile_write(
            subject=subject,
            heading=name,
            intro=intro,
            lines=[ProfileLine(fact=memory.pk, text=memory.content) for memory in memories],
            language=Language.ZH if chinese else Language.EN,
        )
        subject.refresh_from_db()
    return subject, memories
