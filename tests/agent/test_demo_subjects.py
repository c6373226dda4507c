from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from anima.core.text import is_chinese
from conversations.models import Person
from memory.forgetting import memory_forget
from memory.models import SemanticMemory, Subject
from memory.subjects import PROFILE_KEY
from memory.subjects.selectors import subject_facts, subject_get, subject_profile

pytestmark = pytest.mark.django_db


def test_after_the_demo_nights_leos_daughter_is_one_subject_and_forgetting_her_zodiac_reaches_her_profile(
    settings, tmp_path
):
    settings.VAR_DIR = tmp_path
    call_command("demo", stdout=io.StringIO())
    leo, maya = Person.objects.get(slug="leo"), Person.objects.get(slug="maya")

    daughters = Subject.objects.filter(person=leo, relation="daughter")
    assert daughters.count() == 1
    daughter = daughters.get()
    assert daughter.name == "小雨" and {"小雨", "女儿"} <= set(daughter.aliases)
    assert subject_get(person=leo, key="女儿") == subject_get(person=leo, key="小雨") == daughter
    facts = [fact.content for fact in subject_facts(subject=daughter)]
    assert any("属虎" in text for text in facts) and any("四岁" in text for text in facts)
    profile = subject_profile(subject=daughter)
    assert profile.content.startswith("小雨：Leo 的女儿；") and "属虎" in profile.content
    assert is_chinese(profile.content)

    me = subject_profile(subject=subject_get(person=maya, key="self"))
    assert me.content.startswith("Maya: ") and "allergic to peanuts" in me.content and not is_chinese(me.content)
    assert subject_get(person=maya, key="Miso").relation == "cat"
    assert not Subject.objects.filter(person=maya, name="小雨").exists()

    zodiac = next(fact for fact in subject_facts(subject=daughter) if "属虎" in fact.content)
    memory_forget(memory=zodiac)

    profile = subject_profile(subject=Subject.objects.get(pk=daughter.pk))
    assert "属虎" not in profile.content and "四岁" in profile.content
    zodiacs = SemanticMemory.objects.filter(body__has_key=PROFILE_KEY, content__regex="属[虎羊]")
    assert not zodiacs.exists()
