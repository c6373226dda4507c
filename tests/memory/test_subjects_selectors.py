from __future__ import annotations

import pytest
from django.db import IntegrityError

from anima.core.models import MemoryStatus, MemoryType
from memory.models import SubjectKind
from memory.subjects import PROFILE_KEY
from memory.subjects.selectors import active_facts, subject_facts, subject_get, subjects_of_person
from tests.factories import (
    PersonFactory,
    SemanticMemoryFactory,
    SubjectFactory,
    SubjectMentionFactory,
)

pytestmark = pytest.mark.django_db


def test_subjects_of_person_lists_the_person_first_and_only_theirs():
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    cat = SubjectFactory(person=leo, kind=SubjectKind.PET, relation="cat", name="Mimi")
    daughter = SubjectFactory(person=leo, relation="daughter", name="小雨")
    me = SubjectFactory(person=leo, kind=SubjectKind.SELF, relation="self", name="Leo", key="self")
    SubjectFactory(person=maya, relation="daughter", name="Lily")

    assert list(subjects_of_person(person=leo)) == [me, daughter, cat]


def test_one_subject_per_person_and_key():
    leo = PersonFactory()
    SubjectFactory(person=leo, relation="daughter", name="Lily")
    with pytest.raises(IntegrityError):
        SubjectFactory(person=leo, relation="daughter", name="Lily")


def test_subject_facts_are_its_active_facts_without_profiles():
    mention = SubjectMentionFactory(memory__content="Leo 的女儿小雨属虎")
    subject = mention.subject
    SubjectMentionFactory(subject=subject, memory__status=MemoryStatus.EXPIRED)
    SubjectMentionFactory(
        subject=subject, memory__memory_type=MemoryType.OBSERVATION, memory__body={PROFILE_KEY: {"lines": []}}
    )
    SemanticMemoryFactory(person=subject.person, content="unrelated")

    assert list(subject_facts(subject=subject)) == [mention.memory]
    assert mention.memory in active_facts()


def test_subject_get_by_key_relation_or_alias_and_never_a_guess():
    leo = PersonFactory()
    xiaoyu = SubjectFactory(person=leo, relation="daughter", name="小雨", aliases=["小雨", "Lily", "女儿"])
    lele = SubjectFactory(person=leo, relation="son", name="乐乐")
    SubjectFactory(person=leo, relation="sister", name="Ann")
    SubjectFactory(person=leo, relation="sister", name="Bea")

    assert subject_get(person=leo, key="daughter:小雨") == xiaoyu
    assert subject_get(person=leo, key="daughter") == xiaoyu
    assert subject_get(person=leo, key="lily") == xiaoyu
    assert subject_get(person=leo, key="乐乐") == lele
    assert subject_get(person=leo, key="sister") is None  # two sisters: no guess
    assert subject_get(person=PersonFactory(), key="daughter") is None
