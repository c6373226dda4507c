from __future__ import annotations

import datetime as dt
import json

import pytest

from anima.core.llm.testing import scripted
from anima.core.models import MemoryStatus, MemoryType
from anima.core.text import is_chinese
from memory.models import SemanticMemory
from memory.selectors import identity_context, memory_versions
from memory.services import memory_expire, memory_update
from memory.subjects import PROFILE_KEY, SOURCE_FACTS_KEY
from memory.subjects.selectors import subject_get, subject_profile
from sleep.context import StepContext
from sleep.steps import subjects
from sleep.steps.subject_profiles import PROFILE_MIN_FACTS, PROFILE_PURPOSE
from tests.factories import SelfLayerBlockFactory, SemanticMemoryFactory

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 26)
PURPOSE = PROFILE_PURPOSE


def _ctx() -> StepContext:
    return StepContext(run_id=0, day=DAY, mode="full", force=False, run_key="test", token_budget=None)


def _fact(person, text: str, **fields):
    return SemanticMemoryFactory(person=person, content=text, **fields)


def _profile(person, key: str) -> SemanticMemory | None:
    return subject_profile(subject=subject_get(person=person, key=key))


def test_a_chinese_subject_gets_a_chinese_profile_citing_its_facts(leo):
    zodiac = _fact(leo, "Leo 的女儿小雨属虎")
    age = _fact(leo, "Leo的女儿小雨今年四岁，在上幼儿园")

    subjects(_ctx())

    profile = _profile(leo, "daughter:小雨")
    assert profile.content == "小雨：Leo 的女儿；属虎；今年四岁，在上幼儿园。"
    assert (profile.memory_type, profile.person, profile.status) == (MemoryType.OBSERVATION, leo, MemoryStatus.ACTIVE)
    assert profile.body[SOURCE_FACTS_KEY] == [zodiac.pk, age.pk]
    assert [line["fact"] for line in profile.body[PROFILE_KEY]["lines"]] == [zodiac.pk, age.pk]


def test_facts_in_traditional_characters_get_a_profile_in_them_and_a_models_simplified_line_stands(leo):
    zodiac = _fact(leo, "Leo 的女兒小雨屬虎")
    age = _fact(leo, "Leo的女兒小雨今年四歲，在上幼兒園")

    subjects(_ctx())

    assert _profile(leo, "daughter:小雨").content == "小雨：Leo 的女兒；屬虎；今年四歲，在上幼兒園。"
    # A model may write a line in simplified characters for a fact in traditional ones: it states that fact.
    _fact(leo, "Leo 的女兒小雨喜歡畫畫")
    answer = {"lines": [{"fact": zodiac.pk, "text": "属虎"}, {"fact": age.pk, "text": "今年四岁"}]}
    with scripted({PURPOSE: [answer, {"lines": []}]}):
        output = subjects(_ctx())
    assert output.get("failures", []) == []
    assert _profile(leo, "daughter:小雨").content == "小雨：Leo 的女兒；属虎；今年四岁。"


def test_an_english_person_gets_an_english_profile_of_themself_in_the_facts_words(maya):
    _fact(maya, "Maya is allergic to peanuts")
    _fact(maya, "Maya lives in Lisbon")
    _fact(maya, "Maya 喜欢葡式蛋挞")  # the other language: not mixed into her English profile

    subjects(_ctx())

    profile = _profile(maya, "self")
    assert profile.content == "Maya: is allergic to peanuts; lives in Lisbon."
    assert not is_chinese(profile.content)


def test_fewer_facts_than_the_threshold_make_no_profile_and_losing_them_retires_it(leo):
    assert PROFILE_MIN_FACTS == 2
    zodiac = _fact(leo, "Leo 的女儿小雨属虎")
    subjects(_ctx())
    assert _profile(leo, "daughter:小雨") is None

    _fact(leo, "Leo的女儿小雨今年四岁")
    subjects(_ctx())
    profile = _profile(leo, "daughter:小雨")
    assert profile is not None

    memory_expire(memory=zodiac, reason="contradiction")
    subjects(_ctx())
    profile.refresh_from_db()
    assert profile.status == MemoryStatus.EXPIRED
    assert _profile(leo, "daughter:小雨") is None


def test_a_superseded_fact_drops_out_and_the_old_profile_stays_as_a_version(leo):
    old = _fact(leo, "Leo 的女儿小雨属羊")
    _fact(leo, "Leo的女儿小雨今年四岁")
    subjects(_ctx())
    first = _profile(leo, "daughter:小雨")
    assert "属羊" in first.content

    new = _fact(leo, "Leo 的女儿小雨属虎")
    memory_expire(memory=old, reason="contradiction", superseded_by=new)
    output = subjects(_ctx())

    second = _profile(leo, "daughter:小雨")
    assert second.pk != first.pk
    assert "属虎" in second.content and "属羊" not in second.content
    assert old.pk not in second.body[SOURCE_FACTS_KEY]
    first.refresh_from_db()
    assert (first.status, first.superseded_by_id) == (MemoryStatus.EXPIRED, second.pk)
    assert [v.pk for v in memory_versions(memory=second)] == [first.pk, second.pk]
    assert output["profiles"] == {"rewritten": 1}

    again = subjects(_ctx())
    assert again["profiles"] == {"unchanged": 1}
    assert SemanticMemory.objects.filter(body__has_key=PROFILE_KEY).count() == 2


def test_a_profile_an_operator_edited_is_left_as_it_is(leo):
    _fact(leo, "Leo 的女儿小雨属虎")
    _fact(leo, "Leo的女儿小雨今年四岁")
    subjects(_ctx())
    profile = memory_update(
        memory=_profile(leo, "daughter:小雨"), changes={"content": "小雨：Leo 的宝贝女儿。"}, edited_by="console:admin"
    )
    _fact(leo, "Leo的女儿小雨在上幼儿园")

    subjects(_ctx())

    assert _profile(leo, "daughter:小雨").content == profile.content == "小雨：Leo 的宝贝女儿。"


def test_a_persons_profile_never_lists_another_persons_facts(leo, maya):
    _fact(leo, "Leo 的女儿小雨属虎")
    _fact(leo, "Leo的女儿小雨今年四岁")
    theirs = _fact(maya, "Maya 的女儿小雨属龙")
    _fact(maya, "Maya 的女儿小雨今年六岁")

    subjects(_ctx())

    leos = _profile(leo, "daughter:小雨")
    assert theirs.pk not in leos.body[SOURCE_FACTS_KEY] and "属龙" not in leos.content
    cited = SemanticMemory.objects.filter(pk__in=leos.body[SOURCE_FACTS_KEY])
    assert set(cited.values_list("person_id", flat=True)) == {leo.pk}
    assert "Leo" not in _profile(maya, "daughter:小雨").content


def test_the_model_writes_the_lines_and_what_its_facts_do_not_say_is_refused(leo):
    SelfLayerBlockFactory(content="I am Anima.")
    zodiac = _fact(leo, "Leo 的女儿小雨属虎")
    age = _fact(leo, "Leo的女儿小雨今年四岁，在上幼儿园")
    other = _fact(leo, "Leo 的邮箱是 leo@example.com")
    _fact(leo, "Leo 住在杭州")
    answer = {
        "lines": [
            {"fact": zodiac.pk, "text": "属虎"},
            {"fact": age.pk, "text": "今年四岁，在上幼儿园，最喜欢 Peppa"},  # a name no fact says
            {"fact": other.pk, "text": "邮箱是 leo@example.com"},  # a fact it was not given
            {"fact": zodiac.pk, "text": "born in the year of the tiger"},
        ]
    }
    # The daughter's profile, then Leo's own: an answer with no line.
    with scripted({PURPOSE: [answer, {"lines": []}]}) as provider:
        output = subjects(_ctx())

    profile = _profile(leo, "daughter:小雨")
    assert profile.content == "小雨：Leo 的女儿；属虎。"
    errors = [failure["error"] for failure in output["failures"]]
    assert any("peppa" in error for error in errors)
    assert "line refused: cites a fact it was not given" in errors
    assert "line refused: a second line for one fact" in errors
    assert "no line of the answer stood" in errors
    request = provider.calls[0]
    assert identity_context() in request.messages[0]["content"]
    payload = json.loads(request.messages[1]["content"])
    assert [fact["id"] for fact in payload["facts"]] == [zodiac.pk, age.pk]
    assert payload["language"] == "zh"


def test_a_line_in_the_other_language_is_refused(maya):
    allergy = _fact(maya, "Maya is allergic to peanuts")
    home = _fact(maya, "Maya lives in Lisbon")
    answer = {"lines": [{"fact": allergy.pk, "text": "对花生过敏"}, {"fact": home.pk, "text": "lives in Lisbon"}]}

    with scripted({PURPOSE: [answer]}):
        output = subjects(_ctx())

    assert _profile(maya, "self").content == "Maya: lives in Lisbon."
    assert output["failures"] == [
        {"subject": subject_get(person=maya, key="self").pk, "fact": allergy.pk, "error": _wrong_language()}
    ]


def _wrong_language() -> str:
    return "line refused: not in the profile's language"


def test_a_night_with_the_same_facts_asks_the_model_nothing_and_writes_no_version(maya):
    allergy = _fact(maya, "Maya is allergic to peanuts")
    home = _fact(maya, "Maya lives in Lisbon")
    answer = {
        "lines": [{"fact": allergy.pk, "text": "allergic to peanuts"}, {"fact": home.pk, "text": "lives in Lisbon"}]
    }

    with scripted({PURPOSE: [answer]}) as provider:
        subjects(_ctx())
        again = subjects(_ctx())

    assert provider.purposes() == [PURPOSE]
    assert again["profiles"] == {"unchanged": 1} and "failures" not in again
    assert _profile(maya, "self").content == "Maya: allergic to peanuts; lives in Lisbon."
