from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anima.core.models import MemoryStatus
from memory.embedding import embed_backfill_run
from memory.forgetting import memory_forget
from memory.models import SemanticMemory, SubjectKind
from memory.passive import passive_recall
from memory.selectors import memory_recall
from memory.subjects import ENTITY_BRANCH
from memory.subjects.recall import (
    ENTITY_PRIOR,
    UnknownSubject,
    relations_asked,
    subjects_mentioned,
    subjects_served,
)
from tests.factories import ConversationFactory, MessageFactory, PersonFactory, SemanticMemoryFactory
from tests.memory.subjects import subject_built

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("text", "relations"),
    [
        ("How is my daughter doing?", {"daughter"}),
        ("how's my little girl?", {"daughter"}),
        ("A girl at work said hi", set()),
        ("thanks bro", set()),  # a word of address, not the asker's brother
        ("how's my sis doing?", {"sister"}),
        ("my daughters and my son", {"daughter", "son"}),
        ("what did my daughter's teacher say", {"daughter"}),
        ("我女儿最近怎么样？", {"daughter"}),
        ("我闺女呢", {"daughter"}),
        ("我妈说的", {"mother"}),
        ("他妈的", set()),
        ("我家猫不吃饭", {"cat"}),
        ("熊猫真可爱", set()),
        ("外孙女来了", {"granddaughter"}),
        ("the weather is nice", set()),
        ("what pets do I have?", {"pet"}),
        ("how are my folks?", {"parent"}),
        ("hey folks, as a parent I worry", set()),
        ("我爸妈身体还好吗", {"parent"}),
        ("我家宠物叫什么", {"pet"}),
        ("我家寵物叫什麼", {"pet"}),
        ("我閨女呢", {"daughter"}),
        ("我家毛孩子不吃饭", {"pet"}),
        ("我家小狗呢", {"dog"}),
        ("我的那只猫还好吗", {"cat"}),
        ("小狗真可爱", set()),
    ],
)
def test_relations_asked_reads_the_askers_relatives_in_both_languages(text, relations):
    assert relations_asked(text) == relations


@pytest.fixture
def maya_lily():
    maya = PersonFactory(slug="maya", display_name="Maya")
    lily, facts = subject_built(
        maya,
        relation="daughter",
        name="Lily",
        facts=["Lily plays the violin", "Lily is scared of thunderstorms"],
        intro="Maya's daughter",
    )
    return maya, lily, facts


@pytest.fixture
def leo_xiaoyu():
    leo = PersonFactory(slug="leo", display_name="Leo")
    xiaoyu, facts = subject_built(
        leo, relation="daughter", name="小雨", facts=["小雨在学钢琴", "小雨属虎"], intro="Leo 的女儿"
    )
    return leo, xiaoyu, facts


def _ids(results) -> list[int]:
    return [result["id"] for result in results]


def test_a_question_by_relation_finds_the_subjects_profile_then_its_facts(maya_lily):
    maya, lily, facts = maya_lily

    results = memory_recall(query="How is my daughter doing?", person=maya, memory_types=["semantic"])
    without = memory_recall(query="How is my daughter doing?", person=maya, memory_types=["semantic"], entities=False)

    assert _ids(results)[0] == lily.profile_id
    assert set(_ids(results)[1:3]) == {fact.pk for fact in facts}
    assert results[0]["ranks"][ENTITY_BRANCH] == 1
    assert not {fact.pk for fact in facts} & set(_ids(without))


def test_a_chinese_question_finds_a_daughter_by_a_synonym_and_by_her_name(leo_xiaoyu):
    leo, xiaoyu, facts = leo_xiaoyu

    for query in ("我闺女最近怎么样？", "小雨怎么样", "How is my daughter?", "我閨女最近怎麼樣？"):
        results = memory_recall(query=query, person=leo, memory_types=["semantic"])
        assert _ids(results)[0] == xiaoyu.profile_id, query
        assert {fact.pk for fact in facts} <= set(_ids(results)), query


def test_a_subject_is_named_in_either_script(leo_xiaoyu):
    leo, xiaoyu, _ = leo_xiaoyu
    son, _ = subject_built(leo, relation="son", name="晓东", facts=["晓东在学游泳"], intro="Leo 的儿子")

    assert subjects_mentioned(person=leo, text="曉東最近怎麼樣") == [son]
    assert subjects_mentioned(person=leo, text="晓东最近怎么样") == [son]
    assert _ids(memory_recall(query="曉東最近怎麼樣", person=leo, memory_types=["semantic"]))[0] == son.profile_id
    # Asked about by name, relation or a synonym of it, in traditional characters.
    for entity in ("曉東", "兒子", "閨女"):
        asked = son if entity != "閨女" else xiaoyu
        assert _ids(memory_recall(query="", entity=entity, person=leo))[0] == asked.profile_id, entity


@pytest.mark.parametrize(
    ("name", "said", "asked"),
    [
        ("晓东", ("晓东考试考了第一", "曉東今天學會游泳了"), "曉東"),
        # Taiwan and Hong Kong write 为 as 為, where OpenCC's own traditional tables write 爲.
        ("为民", ("为民考试考了第一", "為民今天學會游泳了", "爲民明天去比賽"), "為民"),
    ],
)
def test_an_entitys_latest_lines_name_it_in_either_script(leo_xiaoyu, name, said, asked):
    leo, _, _ = leo_xiaoyu
    subject_built(leo, relation="son", name=name, facts=[f"{name}在学游泳"], intro="Leo 的儿子")
    conversation = ConversationFactory(person=leo)
    written = [MessageFactory(conversation=conversation, content=text).pk for text in said]

    lines = [r["id"] for r in memory_recall(query="", entity=asked, person=leo) if r["memory_type"] == "session"]

    assert sorted(lines) == sorted(written)


@pytest.mark.parametrize(
    "query", ["What pets do I have?", "what's my pet called", "我的宠物叫什么名字", "我的寵物叫什麼名字"]
)
def test_a_question_by_a_kind_of_relation_finds_every_subject_of_that_kind(maya_lily, query):
    maya, lily, _ = maya_lily
    miso, _ = subject_built(maya, relation="cat", name="Miso", kind=SubjectKind.PET, facts=["Miso sleeps all day"])
    rex, _ = subject_built(maya, relation="dog_or_cat:corgi", name="Rex", kind=SubjectKind.PET, facts=["Rex barks"])

    results = memory_recall(query=query, person=maya, memory_types=["semantic"])

    # Both pets, the one the grammar could only read as a breed too; not the daughter.
    assert set(_ids(results)[:2]) == {miso.profile_id, rex.profile_id}
    assert lily.profile_id not in _ids(results)[:4]


def test_a_question_naming_a_direct_match_keeps_it_first(maya_lily):
    maya, _, facts = maya_lily
    violin = facts[0]
    # The question's own words find the fact: it scores above what the subject alone brings.
    assert memory_recall(query="violin", person=maya, memory_types=["semantic"])[0]["id"] == violin.pk


def test_the_expansion_reads_only_the_asking_persons_subjects(maya_lily, leo_xiaoyu):
    maya, lily, _ = maya_lily
    leo, _, _ = leo_xiaoyu

    results = memory_recall(query="How is my daughter doing? Lily?", person=leo)

    maya_rows = set(SemanticMemory.objects.filter(person=maya).values_list("pk", flat=True))
    assert not maya_rows & set(_ids(results))
    assert lily not in subjects_mentioned(person=leo, text="Lily")


_WORDS = ["daughter", "my", "girl", "Lily", "小雨", "女儿", "闺女", "how", "is", "violin", "钢琴", " ", "?"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(words=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=8))
def test_no_query_reaches_another_persons_memories(maya_lily, leo_xiaoyu, words):
    maya, _, _ = maya_lily
    leo, _, _ = leo_xiaoyu
    query = " ".join(words).strip() or "?"
    maya_rows = set(SemanticMemory.objects.filter(person=maya).values_list("pk", flat=True))
    try:
        results = memory_recall(query=query, person=leo)
    except ValueError:
        return  # a malformed query
    assert not maya_rows & set(_ids(results))


@pytest.mark.parametrize("query", ["violin", "what should I cook tonight", "thunderstorms at night", "钢琴"])
def test_a_query_naming_no_subject_is_ranked_as_without_the_expansion(maya_lily, leo_xiaoyu, query):
    maya, _, _ = maya_lily
    assert memory_recall(query=query, person=maya) == memory_recall(query=query, person=maya, entities=False)


def test_no_person_no_expansion(maya_lily):
    assert ENTITY_BRANCH not in str(memory_recall(query="my daughter Lily", global_only=True))


def test_recall_about_an_entity_gives_its_profile_then_facts_then_latest_lines(maya_lily):
    maya, lily, facts = maya_lily
    conversation = ConversationFactory(person=maya)
    older = MessageFactory(conversation=conversation, content="Lily has a concert on Friday")
    newer = MessageFactory(conversation=conversation, content="Lily won the concert prize!")
    MessageFactory(conversation=conversation, content="Lilyana is my neighbour")
    MessageFactory(conversation=ConversationFactory(), content="Lily from another person's chat")

    for entity in ("Lily", "daughter", "daughter:Lily", "女儿"):
        results = memory_recall(query="", entity=entity, person=maya)
        assert [(r["memory_type"], r["id"]) for r in results] == [
            ("semantic", lily.profile_id),
            *sorted((("semantic", fact.pk) for fact in facts), key=lambda item: -item[1]),
            ("session", newer.pk),
            ("session", older.pk),
        ], entity
    assert results[0]["score"] == pytest.approx(ENTITY_PRIOR)
    # Session hits keep to the channel asked for.
    elsewhere = memory_recall(query="", entity="Lily", person=maya, channel="telegram")
    assert "session" not in {r["memory_type"] for r in elsewhere}
    # With a query, it orders the facts.
    assert memory_recall(query="thunderstorms", entity="Lily", person=maya)[1]["id"] == facts[1].pk


def test_an_entity_the_person_has_not_is_unknown_whoever_has_it(maya_lily, leo_xiaoyu):
    leo, _, _ = leo_xiaoyu
    with pytest.raises(UnknownSubject) as theirs:
        memory_recall(query="", entity="Lily", person=leo)
    with pytest.raises(UnknownSubject) as nobodys:
        memory_recall(query="", entity="Zed", person=leo)
    assert str(theirs.value).replace("Lily", "Zed") == str(nobodys.value)
    assert theirs.value.field == "entity"
    with pytest.raises(UnknownSubject):
        memory_recall(query="", entity="Lily", person=None)


def test_a_subject_whose_facts_are_gone_is_served_nowhere(maya_lily):
    maya, lily, facts = maya_lily
    SemanticMemory.objects.filter(pk__in=[f.pk for f in facts] + [lily.profile_id]).update(status=MemoryStatus.EXPIRED)
    assert list(subjects_served(person=maya)) == []
    assert not subjects_mentioned(person=maya, text="my daughter Lily")
    with pytest.raises(UnknownSubject):
        memory_recall(query="", entity="Lily", person=maya)


def test_a_forgotten_subject_is_not_recalled(maya_lily):
    maya, _, facts = maya_lily
    for fact in facts:
        memory_forget(memory=SemanticMemory.objects.get(pk=fact.pk), requested_by="test")
    assert ENTITY_BRANCH not in str(memory_recall(query="How is my daughter doing?", person=maya))


def test_the_self_subject_is_never_expanded(maya_lily):
    maya, _, _ = maya_lily
    subject_built(maya, relation="self", name="Maya", kind=SubjectKind.SELF, facts=["Maya likes tea"])
    assert [s.name for s in subjects_mentioned(person=maya, text="what does Maya like, and my daughter?")] == ["Lily"]


def test_passive_recall_offers_the_profile_of_the_daughter_asked_about(leo_xiaoyu):
    leo, xiaoyu, _ = leo_xiaoyu
    conversation = ConversationFactory(person=leo)

    passive = passive_recall(conversation=conversation, user_message="我女儿最近怎么样？")

    assert passive.hits[0]["id"] == xiaoyu.profile_id
    assert f"[[anima:{xiaoyu.profile_id}]]" in passive.text


@pytest.mark.local_embeddings
def test_passive_recall_brings_in_a_subject_the_message_names_not_one_named_turns_before(maya_lily):
    maya, lily, lily_facts = maya_lily
    allergy = SemanticMemoryFactory(person=maya, content="Maya is allergic to peanuts")
    conversation = ConversationFactory(person=maya)
    for role, text in (("user", "Lily had her violin recital today!"), ("assistant", "How did Lily do on stage?")):
        MessageFactory(conversation=conversation, role=role, content=text)
    embed_backfill_run()
    lily_rows = {lily.profile_id, *(fact.pk for fact in lily_facts)}

    asked = passive_recall(conversation=conversation, user_message="Can I eat a satay sandwich with my peanut allergy?")
    named = passive_recall(conversation=conversation, user_message="Is Lily still scared of storms at night?")

    # Lily was talked about a turn ago, not in this message: her profile, brought in at the prior of a subject
    # asked about, would come first in every turn after it, whatever the turn is about.
    assert asked.hits[0]["id"] == allergy.pk, asked.hits
    assert lily.profile_id not in {hit["id"] for hit in asked.hits}
    assert named.hits[0]["id"] == lily.profile_id
    assert not {hit["id"] for hit in named.hits} - lily_rows


def test_passive_recall_offers_a_profile_when_the_message_names_its_subject_not_for_a_shared_word(maya_lily):
    maya, lily, _ = maya_lily
    myself, own_facts = subject_built(
        maya, relation="self", name="Maya", kind=SubjectKind.SELF, facts=["Maya works night shifts as a nurse"]
    )
    conversation = ConversationFactory(person=maya)

    shift = passive_recall(conversation=conversation, user_message="Another night shift tonight, ugh")
    thunder = passive_recall(conversation=conversation, user_message="Is Lily still scared of thunderstorms?")

    # Maya's own profile says again what her facts say (the prompt lists them) and shares a word with most messages.
    assert myself.profile_id not in {hit["id"] for hit in shift.hits}
    assert own_facts[0].pk in {hit["id"] for hit in shift.hits}
    # Lily's profile shares "thunderstorms" too, and comes because the message names her.
    assert thunder.hits[0]["id"] == lily.profile_id


def test_the_recall_command_asks_about_an_entity(maya_lily):
    _, lily, _ = maya_lily
    out = io.StringIO()
    call_command("recall", "--entity", "daughter", "--person", "maya", "--json", stdout=out)
    assert json.loads(out.getvalue())["results"][0]["id"] == lily.profile_id
    with pytest.raises(CommandError, match="no subject 'Zed'"):
        call_command("recall", "--entity", "Zed", "--person", "maya")
    with pytest.raises(CommandError, match="--entity"):
        call_command("recall", "--person", "maya")


def test_what_the_question_asks_of_the_subject_orders_its_facts():
    leo = PersonFactory(slug="leo", display_name="Leo")
    xiaoyu, (sign, piano, dogs) = subject_built(
        leo, relation="daughter", name="小雨", facts=["Leo 的女儿小雨属虎", "小雨在学钢琴", "Leo 的女儿怕狗"]
    )

    results = memory_recall(query="小雨怕什么？", person=leo, memory_types=["semantic"])

    # The facts naming 小雨 match the question's name; the one answering 「怕」 does not, and comes first.
    assert _ids(results)[:2] == [xiaoyu.profile_id, dogs.pk]
    assert set(_ids(results)[2:4]) == {sign.pk, piano.pk}


@pytest.fixture
def maya_herself(maya_lily):
    maya, _, _ = maya_lily
    myself, facts = subject_built(
        maya,
        relation="self",
        name="Maya",
        kind=SubjectKind.SELF,
        facts=["Maya works as a nurse in a hospital in Lisbon", "Maya lives in Lisbon", "Maya loves hiking"],
        stated=("job", "residence", "likes"),
    )
    return maya, myself, facts


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("What do I do for a living?", 0),
        ("what's my job", 0),
        ("Do you remember where I live?", 1),
        # In her own recall her name is the asker, as "I" is.
        ("What is Maya's job?", 0),
        ("where does maya live", 1),
    ],
)
def test_a_question_about_the_asker_finds_the_fact_stating_it_first(maya_herself, question, answer):
    maya, _, facts = maya_herself
    conversation = ConversationFactory(person=maya)
    # A line sharing the question's words ("job") and no answer: without the fact's attribute it came first.
    MessageFactory(conversation=conversation, role="user", content="The examiner asked about my job and where I live")

    results = memory_recall(query=question, person=maya)

    assert results[0]["id"] == facts[answer].pk
    assert results[0]["ranks"] == {**results[0]["ranks"], ENTITY_BRANCH: 1}
    # The person's own profile says everything about them: it is not brought for one attribute (its words may find it).
    myself = subjects_served(person=maya).get(kind=SubjectKind.SELF)
    assert not [r for r in results if r["id"] == myself.profile_id and ENTITY_BRANCH in r["scores"]]


def test_a_chinese_question_about_the_asker_finds_the_fact_stating_it_first():
    leo = PersonFactory(slug="leo", display_name="Leo")
    _, (job, home) = subject_built(
        leo,
        relation="self",
        name="Leo",
        kind=SubjectKind.SELF,
        facts=["Leo 在杭州工作，是一名后端软件工程师", "Leo 住在杭州"],
        stated=("workplace", "residence"),
    )
    MessageFactory(conversation=ConversationFactory(person=leo), role="user", content="我的工作是什么？问问而已")

    assert memory_recall(query="你还记得我是干什么的吗？", person=leo)[0]["id"] == job.pk
    assert memory_recall(query="我住哪来着？", person=leo)[0]["id"] == home.pk
    assert memory_recall(query="Leo 是做什么工作的？", person=leo)[0]["id"] == job.pk
    assert memory_recall(query="Leo住哪儿？", person=leo)[0]["id"] == home.pk


@pytest.mark.parametrize(
    "query",
    [
        "what's your job?",  # asked of the companion
        "I work as a nurse now.",  # news, not a question
        "Where does my mum live?",  # asked of a relative Maya has no subject for
        "Where does Maya's mum live?",  # the same, by her name
        "Where does Leo live?",  # asked of someone else
    ],
)
def test_what_is_not_a_question_about_the_asker_brings_none_of_their_facts(maya_herself, query):
    maya, _, _ = maya_herself
    assert ENTITY_BRANCH not in str(memory_recall(query=query, person=maya))


def test_a_question_about_the_asker_never_brings_another_persons_facts(maya_herself, leo_xiaoyu):
    leo, _, _ = leo_xiaoyu
    _, (theirs,) = subject_built(
        leo, relation="self", name="Leo", kind=SubjectKind.SELF, facts=["Leo 住在杭州"], stated=("residence",)
    )
    maya, _, (_, home, _) = maya_herself

    assert theirs.pk not in _ids(memory_recall(query="where do I live?", person=maya))
    assert home.pk not in _ids(memory_recall(query="我住哪？", person=leo))
    assert ENTITY_BRANCH not in str(memory_recall(query="where do I live?"))


def test_what_a_question_asks_of_a_relative_orders_her_facts_by_what_they_state():
    maya = PersonFactory(slug="maya", display_name="Maya")
    lily, (_, age, _) = subject_built(
        maya,
        relation="daughter",
        name="Lily",
        facts=["Lily plays the violin", "Lily is 7", "Lily is scared of thunderstorms"],
        stated=("activity", "age", "fear"),
    )

    results = memory_recall(query="How old is my daughter now?", person=maya, memory_types=["semantic"])

    # No word of the question is in the fact ("is 7"): what it states is.
    assert _ids(results)[:2] == [lily.profile_id, age.pk]


def test_passive_recall_offers_the_fact_a_question_about_the_asker_asks_for(maya_herself):
    maya, _, (job, _, _) = maya_herself
    conversation = ConversationFactory(person=maya)

    passive = passive_recall(conversation=conversation, user_message="Hey, remind me what I do for a living?")

    assert passive.hits[0]["id"] == job.pk
