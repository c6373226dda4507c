"""Reads over subjects: a person's subjects, one subject by key or alias, its facts and profile."""

from __future__ import annotations

from django.db.models import Case, IntegerField, Q, QuerySet, Value, When

from anima.core.models import MemoryType
from anima.core.segmentation import text_simplified
from conversations.models import Person
from memory.models import SemanticMemory, Subject, SubjectKind, SubjectMention
from memory.selectors import active_semantic_memories
from memory.subjects import PROFILE_KEY, SOURCE_FACTS_KEY

# The person first, then who is closest to them, then places.
_KIND_ORDER = [SubjectKind.SELF, SubjectKind.PERSON, SubjectKind.PET, SubjectKind.PLACE, SubjectKind.ORGANISATION]


def profile_q() -> Q:
    """The observation profiles the subjects step writes (no fact of their own)."""
    return Q(memory_type=MemoryType.OBSERVATION, body__has_key=PROFILE_KEY)


def active_facts() -> QuerySet[SemanticMemory]:
    """Active semantic memories that state something themselves: every one but the profiles made of them."""
    return active_semantic_memories().exclude(profile_q())


def subjects_of_person(*, person: Person) -> QuerySet[Subject]:
    """The person's subjects: themself first, then people, pets, places and organisations, oldest first."""
    order = Case(
        *(When(kind=kind, then=Value(rank)) for rank, kind in enumerate(_KIND_ORDER)),
        default=Value(len(_KIND_ORDER)),
        output_field=IntegerField(),
    )
    return Subject.objects.filter(person=person).select_related("profile").alias(rank=order).order_by("rank", "id")


def subject_facts(*, subject: Subject) -> QuerySet[SemanticMemory]:
    """The active facts that are about or name ``subject``, oldest first."""
    mentioned = SubjectMention.objects.filter(subject=subject).values("memory_id")
    return active_facts().filter(pk__in=mentioned, person_id=subject.person_id).order_by("created_at", "pk")


def subject_stated(*, subject: Subject) -> dict[int, str]:
    """What each fact about ``subject`` states of it (its slot's attribute: "job", "age"), by fact id; a fact that
    only names the subject is not here."""
    stated = SubjectMention.objects.filter(subject=subject).exclude(attribute="")
    return dict(stated.values_list("memory_id", "attribute"))


def subject_get(*, person: Person, key: str) -> Subject | None:
    """One of ``person``'s subjects by its key ("self", "daughter:小雨"), else by relation ("daughter") or by a
    name or alias ("Lily", "小雨", "女儿"), case-insensitively and in either Chinese script ("女兒", 「曉東」 for
    晓东); None when nothing or more than one matches."""
    subjects = Subject.objects.filter(person=person).select_related("profile")
    exact = subjects.filter(key=key).first()
    if exact is not None:
        return exact
    wanted = text_simplified(key.strip()).casefold()
    if not wanted:
        return None
    for matches in (
        [s for s in subjects if s.relation.casefold() == wanted],
        [
            s
            for s in subjects
            if wanted in {text_simplified(alias).casefold() for alias in [s.name, *s.aliases] if alias}
        ],
    ):
        if len(matches) == 1:
            return matches[0]
        if matches:
            return None
    return None


def subject_profile(*, subject: Subject) -> SemanticMemory | None:
    """The subject's active observation profile, if it has one."""
    if subject.profile_id is None:
        return None
    return active_semantic_memories().filter(pk=subject.profile_id).first()


def profiles_citing(*, ids: set[int]) -> QuerySet[SemanticMemory]:
    """Every version (active or not) of the profiles summarising one of ``ids``, apart from ``ids``."""
    cites = Q(pk__in=[])
    for pk in ids:
        cites |= Q(**{f"body__{SOURCE_FACTS_KEY}__contains": [pk]})
    return SemanticMemory.objects.filter(cites, body__has_key=PROFILE_KEY).exclude(pk__in=ids).order_by("pk")
