from __future__ import annotations

import datetime as dt

import pytest
from django.db.models import Q

from memory.forgetting import memory_forget, memory_forget_plan
from memory.forgetting_person import person_forget
from memory.models import SemanticMemory, Subject, SubjectMention
from memory.services import memory_expire
from memory.subjects import PROFILE_KEY, SOURCE_FACTS_KEY
from memory.subjects.selectors import subject_facts, subject_get, subject_profile
from sleep.context import StepContext
from sleep.steps import subjects
from tests.factories import PersonFactory, SemanticMemoryFactory

pytestmark = pytest.mark.django_db

CTX = StepContext(run_id=0, day=dt.date(2026, 11, 26), mode="full", force=False, run_key="test", token_budget=None)


@pytest.fixture
def leo():
    return PersonFactory(slug="leo", display_name="Leo")


def _fact(person, text: str):
    return SemanticMemoryFactory(person=person, content=text)


def _profiles():
    return SemanticMemory.objects.filter(body__has_key=PROFILE_KEY)


def _daughter_with_two_zodiac_versions(leo):
    """小雨's profile as it was with 属羊 and as it is with 属虎: two versions, each quoting one zodiac."""
    old = _fact(leo, "Leo 的女儿小雨属羊")
    age = _fact(leo, "Leo的女儿小雨今年四岁，在上幼儿园")
    subjects(CTX)
    new = _fact(leo, "Leo 的女儿小雨属虎")
    memory_expire(memory=old, reason="contradiction", superseded_by=new)
    subjects(CTX)
    assert _profiles().filter(content__contains="属羊").exists()
    return old, new, age


def test_forgetting_a_fact_takes_its_line_out_of_every_version_of_the_profile(leo):
    old, new, age = _daughter_with_two_zodiac_versions(leo)
    versions = set(_profiles().values_list("pk", flat=True))

    memory_forget(memory=new)

    assert not SemanticMemory.objects.filter(Q(content__contains="属虎") | Q(content__contains="属羊")).exists()
    assert set(_profiles().values_list("pk", flat=True)) == versions  # both versions stay, without that line
    daughter = subject_get(person=leo, key="daughter:小雨")
    profile = subject_profile(subject=daughter)
    assert profile.content == "小雨：Leo 的女儿；今年四岁，在上幼儿园。"
    for version in _profiles():
        assert version.body[SOURCE_FACTS_KEY] == [age.pk]
        assert all(line["fact"] == age.pk for line in version.body[PROFILE_KEY]["lines"])
    assert list(subject_facts(subject=daughter)) == [age]
    assert not SubjectMention.objects.filter(memory_id__in=[old.pk, new.pk]).exists()


def test_the_next_night_after_a_forget_leaves_the_profile_as_the_forget_left_it(leo):
    _, new, _ = _daughter_with_two_zodiac_versions(leo)
    memory_forget(memory=new)
    profile = subject_profile(subject=subject_get(person=leo, key="daughter:小雨"))

    subjects(CTX)

    # One fact left: below the threshold, the profile retires; nothing brings the zodiac back.
    profile.refresh_from_db()
    assert profile.status == "expired"
    assert not SemanticMemory.objects.filter(content__contains="属虎").exists()


def test_forgetting_the_last_facts_of_a_subject_removes_it_and_its_profile_versions(leo):
    _, new, age = _daughter_with_two_zodiac_versions(leo)
    _fact(leo, "Leo 住在杭州")
    subjects(CTX)

    memory_forget(memory=new)
    memory_forget(memory=age)

    assert not Subject.objects.filter(person=leo, key="daughter:小雨").exists()
    assert not _profiles().filter(content__contains="小雨").exists()
    assert not SemanticMemory.objects.filter(content__contains="小雨").exists()
    assert Subject.objects.filter(person=leo, key="self").exists()


def test_forgetting_the_only_fact_that_names_a_subject_removes_the_name_everywhere(leo):
    _fact(leo, "我女儿叫小雨")
    _fact(leo, "Leo 的女儿四岁了")
    subjects(CTX)
    daughter = subject_get(person=leo, key="daughter")
    assert daughter.name == "小雨"

    memory_forget(memory=SemanticMemory.objects.get(content="我女儿叫小雨"))

    assert not Subject.objects.filter(person=leo, name="小雨").exists()
    assert not _profiles().filter(content__contains="小雨").exists()


def test_the_forget_plan_lists_the_profiles_that_lose_a_line(leo):
    _, new, _ = _daughter_with_two_zodiac_versions(leo)

    plan = memory_forget_plan(memory=new)

    redacted = {row.pk for row in plan.rows if row.action == "redact" and row.table == "entities"}
    assert set(_profiles().values_list("pk", flat=True)) <= redacted


def test_forgetting_a_person_removes_their_subjects_and_profiles_only(leo):
    _daughter_with_two_zodiac_versions(leo)
    maya = PersonFactory(slug="maya", display_name="Maya")
    _fact(maya, "Maya is allergic to peanuts")
    _fact(maya, "Maya lives in Lisbon")
    subjects(CTX)

    tombstone = person_forget(person=leo)

    assert not Subject.objects.filter(person=leo).exists()
    assert not _profiles().filter(person=leo).exists()
    assert subject_profile(subject=subject_get(person=maya, key="self")) is not None
    assert tombstone.counts["subjects"] == {"deleted": 1, "redacted": 0}
