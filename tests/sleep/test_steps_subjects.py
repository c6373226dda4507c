from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anima.core.models import MemoryStatus
from memory.models import Subject, SubjectKind, SubjectMention
from memory.services import memory_expire
from memory.subjects.selectors import subject_facts, subject_get, subjects_of_person
from sleep.context import StepContext
from sleep.steps import subjects
from sleep.steps.subjects import subjects_read
from tests.factories import PersonFactory, SemanticMemoryFactory

pytestmark = pytest.mark.django_db

DAY = dt.date(2026, 11, 26)


def _ctx() -> StepContext:
    return StepContext(run_id=0, day=DAY, mode="full", force=False, run_key="test", token_budget=None)


def _facts(person, *texts: str):
    return [SemanticMemoryFactory(person=person, content=text) for text in texts]


def _state(person) -> list[tuple]:
    return [
        (
            s.key,
            s.kind,
            s.relation,
            s.name,
            tuple(s.aliases),
            tuple(sorted(subject_facts(subject=s).values_list("pk", flat=True))),
        )
        for s in subjects_of_person(person=person)
    ]


def test_chinese_facts_make_one_daughter_with_her_name_relation_and_facts(leo):
    zodiac, age, plan = _facts(leo, "Leo 的女儿小雨属虎", "Leo的女儿小雨今年四岁，在上幼儿园", "Leo 打算带小雨去爬山")
    (job,) = _facts(leo, "Leo 是后端负责人")

    subjects(_ctx())

    daughter = subject_get(person=leo, key="女儿")
    assert (daughter.kind, daughter.relation, daughter.name) == (SubjectKind.PERSON, "daughter", "小雨")
    assert set(daughter.aliases) == {"小雨", "女儿"}
    assert set(subject_facts(subject=daughter)) == {zodiac, age, plan}
    me = subject_get(person=leo, key="self")
    assert (me.kind, me.name) == (SubjectKind.SELF, "Leo")
    # The plan is Leo's and names 小雨: it mentions both.
    assert set(subject_facts(subject=me)) == {job, plan}
    assert Subject.objects.filter(person=leo).count() == 2


def test_facts_in_either_script_make_one_son_named_as_his_facts_write_him(leo):
    zodiac, age = _facts(leo, "Leo 的兒子曉東屬虎", "Leo的兒子曉東今年四歲")
    (plan,) = _facts(leo, "Leo 打算带晓东去爬山")  # the same son, in simplified characters

    subjects(_ctx())

    son = subject_get(person=leo, key="兒子")
    assert (son.kind, son.relation, son.name) == (SubjectKind.PERSON, "son", "曉東")
    assert set(subject_facts(subject=son)) == {zodiac, age, plan}
    assert Subject.objects.filter(person=leo).count() == 2


def test_english_facts_make_subjects_of_the_person_a_relative_a_pet_and_a_place(maya):
    lily_age, lily_school, lives = _facts(
        maya, "Maya's daughter Lily is four", "Lily turned 5 and goes to kindergarten", "Maya lives in Lisbon"
    )
    (miso,) = _facts(maya, "Maya has a cat named Miso")

    subjects(_ctx())

    lily = subject_get(person=maya, key="daughter:lily")
    assert (lily.kind, lily.name) == (SubjectKind.PERSON, "Lily")
    assert "daughter" in lily.aliases
    # "Lily turned 5" names no relation: the one Lily of Maya's facts is her daughter.
    assert set(subject_facts(subject=lily)) == {lily_age, lily_school}
    cat = subject_get(person=maya, key="Miso")
    assert (cat.kind, cat.relation) == (SubjectKind.PET, "cat")
    assert list(subject_facts(subject=cat)) == [miso]
    place = subject_get(person=maya, key="lisbon")
    assert (place.kind, place.relation, place.name) == (SubjectKind.PLACE, "residence", "Lisbon")
    assert list(subject_facts(subject=subject_get(person=maya, key="self"))) == [lives]


def test_a_shared_first_name_is_two_people_and_a_bare_name_joins_neither(maya):
    daughter, sister, bare = _facts(
        maya, "Maya's daughter Lily is four", "Maya's sister Lily is a teacher", "Lily turned 5"
    )

    subjects(_ctx())

    assert set(subject_facts(subject=subject_get(person=maya, key="daughter:lily"))) == {daughter}
    assert set(subject_facts(subject=subject_get(person=maya, key="sister:lily"))) == {sister}
    assert subject_get(person=maya, key="lily") is None  # two of them: no guess
    assert not SubjectMention.objects.filter(memory=bare).exists()


def test_a_stated_second_name_makes_one_subject_with_both_names(leo):
    _facts(leo, "Leo 的女儿小雨属虎", "Leo 的女儿小雨的英文名叫 Lily", "Lily 今年四岁了")

    subjects(_ctx())

    daughter = subject_get(person=leo, key="daughter:小雨")
    assert {"小雨", "Lily", "女儿"} <= set(daughter.aliases)
    assert subject_get(person=leo, key="lily") == daughter
    assert subject_facts(subject=daughter).count() == 3


def test_an_unnamed_relative_keeps_its_row_when_a_fact_names_her(leo):
    _facts(leo, "Leo 的女儿四岁了")
    subjects(_ctx())
    unnamed = subject_get(person=leo, key="daughter:")

    _facts(leo, "我女儿叫小雨")
    subjects(_ctx())

    named = subject_get(person=leo, key="daughter")
    assert named.pk == unnamed.pk and named.name == "小雨"
    assert subject_facts(subject=named).count() == 2


def test_re_running_the_night_changes_nothing_and_retired_facts_leave(leo):
    zodiac, age = _facts(leo, "Leo 的女儿小雨属虎", "Leo的女儿小雨今年四岁")
    first = subjects(_ctx())
    before = _state(leo)

    again = subjects(_ctx())

    assert _state(leo) == before
    assert again["created"] == again["updated"] == again["removed"] == again["mentions_added"] == 0
    assert first["created"] == 1
    memory_expire(memory=zodiac, reason="changed")
    memory_expire(memory=age, reason="changed")
    subjects(_ctx())
    assert not Subject.objects.filter(person=leo).exists()
    assert not SubjectMention.objects.exists()


def test_a_persons_subjects_are_read_from_their_facts_only(leo, maya):
    _facts(leo, "Leo 的女儿小雨属虎")
    (hers,) = _facts(maya, "Maya says 小雨 called")

    subjects(_ctx())

    assert not Subject.objects.filter(person=maya, key__startswith="daughter").exists()
    assert not SubjectMention.objects.filter(memory=hers, subject__person=leo).exists()
    assert all(
        m.memory.person_id == m.subject.person_id for m in SubjectMention.objects.select_related("memory", "subject")
    )


_RELATIONS = ["daughter", "son", "sister", "brother", "wife", "cat", "dog", "friend"]
_NAMES = ["Lily", "Leo", "Ann", "Miso", "Sam"]
_SAYINGS = ["is four", "likes apples", "lives in Porto", "is a teacher", "is allergic to cats"]


@given(
    told=st.lists(
        st.tuples(st.sampled_from(_RELATIONS), st.sampled_from([*_NAMES, ""]), st.sampled_from(_SAYINGS)),
        min_size=1,
        max_size=8,
    )
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_build_is_idempotent_and_never_merges_two_relations_sharing_a_name(told):
    person = PersonFactory(display_name="Maya")
    facts = []
    for relation, name, saying in told:
        text = f"Maya's {relation} {name} {saying}".replace("  ", " ")
        facts.append(SemanticMemoryFactory(person=person, content=text))
    ctx = _ctx()

    subjects(ctx)
    before = _state(person)
    subjects(ctx)

    assert _state(person) == before
    assert [spec.key for spec in subjects_read(person=person, facts=facts)] == [s[0] for s in sorted(before)]
    for subject in Subject.objects.filter(person=person).exclude(kind__in=[SubjectKind.SELF, SubjectKind.PLACE]):
        stated = {
            fact.content.split()[1]
            for fact in subject_facts(subject=subject)
            if subject.name and f" {subject.name} " in f" {fact.content} "
        }
        # One subject is one relation: facts naming it with two different relations never share it.
        assert len(stated) <= 1, (subject.key, stated)
    assert not SubjectMention.objects.exclude(memory__status=MemoryStatus.ACTIVE).exists()


def test_a_pet_known_by_its_breed_is_one_pet_with_the_breed_as_its_relation(leo):
    _facts(leo, "Leo 养了一只柯基叫豆豆", "Leo 的柯基豆豆三岁了")

    subjects(_ctx())

    pet = subject_get(person=leo, key="豆豆")
    assert (pet.kind, pet.relation, pet.name) == (SubjectKind.PET, "dog_or_cat:柯基", "豆豆")
    assert set(pet.aliases) == {"豆豆", "柯基"}
    assert subject_facts(subject=pet).count() == 2
    assert pet.profile.content == "豆豆：Leo 的柯基；Leo 养了一只柯基叫豆豆；三岁了。"


def _stated(person) -> dict[tuple[str, str], str]:
    return {
        (mention.subject.key, mention.memory.content): mention.attribute
        for mention in SubjectMention.objects.filter(subject__person=person).select_related("subject", "memory")
    }


def test_each_mention_notes_what_the_fact_states_of_its_subject(leo):
    _facts(leo, "Leo 的女儿小雨今年四岁，在上幼儿园", "Leo 打算带小雨去爬山", "Leo 住在杭州")

    subjects(_ctx())

    stated = _stated(leo)
    assert stated[("daughter:小雨", "Leo 的女儿小雨今年四岁，在上幼儿园")] == "age"
    # The plan is Leo's; it only names 小雨.
    assert stated[("self", "Leo 打算带小雨去爬山")] == "activity"
    assert stated[("daughter:小雨", "Leo 打算带小雨去爬山")] == ""
    assert stated[("self", "Leo 住在杭州")] == "residence"


def test_the_next_night_notes_the_attributes_of_mentions_made_before_they_were_noted(maya):
    (job,) = _facts(maya, "Maya works as a nurse in a hospital in Lisbon")
    subjects(_ctx())
    SubjectMention.objects.filter(memory=job).update(attribute="")  # as a mention from before the upgrade is

    result = subjects(_ctx())

    assert _stated(maya)[("self", job.content)] == "job"
    assert result["mentions_added"] == 0
