"""Light sleep against a real model's answers: what is not about the person, or not what they said, is not stored."""

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from anima.core.models import MemoryStatus
from conversations.models import Role
from memory.models import NarrativeBlock, SemanticMemory
from sleep.context import StepContext
from sleep.steps import deep_sleep, light_sleep
from sleep.steps.light import NARRATIVE_INSTRUCTIONS, SEMANTIC_INSTRUCTIONS
from tests.factories import ConversationFactory, MessageFactory, SemanticMemoryFactory
from tests.sleep.stages import stages_script

DAY = dt.date(2026, 11, 26)


def _ctx() -> StepContext:
    return StepContext(run_id=0, day=DAY, mode="full", force=False, run_key="test", token_budget=None)


def _talk(person, lines):
    conversation = ConversationFactory(person=person)
    for minute, (role, content) in enumerate(lines):
        MessageFactory(
            conversation=conversation,
            role=role,
            content=content,
            created_at=timezone.make_aware(dt.datetime.combine(DAY, dt.time(21, minute))),
        )
    return conversation


def _facts(*contents, slot: dict | None = None) -> dict:
    return {
        "create": [
            {"memory_type": "world", "content": content, **({"slot": slot} if slot else {})} for content in contents
        ]
    }


def _semantic(output: dict) -> dict:
    return output["conversations"][0]["semantic"]


def test_what_a_small_real_model_made_up_is_not_stored(llm_stub, leo):
    """SmolLM2-135M-Instruct, served by llama-cpp-python, wrote these for Leo's Chinese conversation about his
    product launch: an allergy nobody mentioned (in English), a question, two bare dates."""
    _talk(
        leo,
        [
            (Role.USER, "明天晚上我们的产品要上线了，我是后端负责人。说实话我很担心，最近压力特别大。"),
            (Role.ASSISTANT, "上线前紧张很正常。现在最让你担心的是哪一块？"),
            (Role.USER, "主要是支付模块的迁移，还有几个性能问题没查清楚。"),
        ],
    )
    answer = _facts(
        "Leo is allergic to peanuts",
        "Leo 最担心的是哪一块？",
        "2026-11-27",
        "Leo 2026-11-26",
        "Leo 是后端负责人，明天晚上产品上线",
    )
    stages_script(llm_stub, {SEMANTIC_INSTRUCTIONS: [answer]})

    output = light_sleep(_ctx())

    assert list(SemanticMemory.objects.values_list("content", flat=True)) == ["Leo 是后端负责人，明天晚上产品上线"]
    reasons = [refusal["reason"] for refusal in _semantic(output)["refused"]]
    assert reasons == [
        "not what the person said: most of it is in none of their lines",
        "a question, not something the person said",
        "nothing but names and numbers",
        "nothing but names and numbers",
    ]


def test_a_reworded_fact_is_kept_and_an_inference_beyond_the_words_is_not(llm_stub, maya):
    lines = ["I'm 34, I moved to Lisbon last month.", "I work nights at the children's hospital."]
    _talk(maya, [(Role.USER, line) for line in lines])
    answer = _facts("Maya lives in Lisbon", "Maya is 34", "Maya is a night-shift paediatric nurse")
    stages_script(llm_stub, {SEMANTIC_INSTRUCTIONS: [answer]})

    output = light_sleep(_ctx())

    # Both reworded facts, once each (a query without ORDER BY returns them in no set order).
    assert sorted(SemanticMemory.objects.values_list("content", flat=True)) == ["Maya is 34", "Maya lives in Lisbon"]
    [refusal] = _semantic(output)["refused"]
    assert refusal["what"] == "Maya is a night-shift paediatric nurse"


def test_the_assistants_own_lines_are_not_stored_as_the_persons_facts(llm_stub, maya, leo):
    _talk(
        maya,
        [
            (Role.USER, "Long shift at the hospital today, I'm exhausted."),
            (Role.ASSISTANT, "That sounds draining. A warm shower and an early night usually help after a long shift."),
            (Role.ASSISTANT, "I'll remind you tomorrow morning to take it slow."),
        ],
    )
    answer = _facts(
        "A warm shower and an early night usually help after a long shift.",
        "I'll remind you tomorrow morning to take it slow.",
        "你今天上了很长的班",
        "Leo lives in Hangzhou",
        "Maya had a long shift at the hospital and is exhausted",
    )
    stages_script(llm_stub, {SEMANTIC_INSTRUCTIONS: [answer]})

    output = light_sleep(_ctx())

    assert list(SemanticMemory.objects.values_list("content", flat=True)) == [
        "Maya had a long shift at the hospital and is exhausted"
    ]
    reasons = [refusal["reason"] for refusal in _semantic(output)["refused"]]
    assert reasons == [
        "a copy of the assistant's line, not something the person said",
        "told as 'I' or 'you', not about the person by name",
        "told as 'I' or 'you', not about the person by name",
        "about Leo, not Maya",
    ]


def test_a_fact_may_name_another_person_when_it_is_about_its_own(llm_stub, maya, leo):
    _talk(maya, [(Role.USER, "My colleague Leo covered my shift today.")])
    stages_script(llm_stub, {SEMANTIC_INSTRUCTIONS: [_facts("Maya's colleague Leo covered her shift")]})

    light_sleep(_ctx())

    assert SemanticMemory.objects.filter(person=maya, content="Maya's colleague Leo covered her shift").exists()


def test_an_invented_slot_on_a_junk_fact_never_retires_a_true_one(llm_stub, leo):
    true = SemanticMemoryFactory(
        person=leo, content="Leo 在阿里巴巴工作", source_day=dt.date(2026, 11, 1), body={"observed_at": "2026-11-01"}
    )
    _talk(leo, [(Role.USER, "今天好累啊，加班到十点。"), (Role.ASSISTANT, "辛苦了，早点休息。")])
    invented = {"subject": "self", "name": "", "attribute": "workplace", "key": "", "value": "杭州"}
    stages_script(llm_stub, {SEMANTIC_INSTRUCTIONS: [_facts("Leo 今天加班到十点，很累", slot=invented)]})

    output = light_sleep(_ctx())
    deep_sleep(_ctx())

    true.refresh_from_db()
    assert true.status == MemoryStatus.ACTIVE
    junk = SemanticMemory.objects.get(content="Leo 今天加班到十点，很累")
    assert "slot" not in junk.body
    assert [r["action"] for r in _semantic(output)["refused"]] == ["slot"]


def test_a_slot_stored_without_its_text_never_retires_a_true_fact_offline(leo):
    # As a fact written before the check (by either provider) may hold it: the offline mind reads the text.
    true = SemanticMemoryFactory(
        person=leo, content="Leo 在阿里巴巴工作", source_day=dt.date(2026, 11, 1), body={"observed_at": "2026-11-01"}
    )
    SemanticMemoryFactory(
        person=leo,
        content="Leo 今天加班到十点，很累",
        source_day=DAY,
        body={"observed_at": "2026-11-26", "slot": {"subject": "self", "attribute": "workplace", "value": "杭州"}},
    )

    deep_sleep(_ctx())

    true.refresh_from_db()
    assert true.status == MemoryStatus.ACTIVE


def test_the_model_does_not_update_a_pinned_or_hand_edited_memory(llm_stub, leo):
    conversation = _talk(leo, [(Role.USER, "我对花生过敏，也不喝咖啡。")])
    pinned = SemanticMemoryFactory(person=leo, content="Leo 对花生过敏", source_conversation=conversation, pinned=True)
    edited = SemanticMemoryFactory(
        person=leo, content="Leo 不喝咖啡", source_conversation=conversation, body={"edited_by": "console:admin"}
    )
    answer = {
        "update": [{"id": pinned.pk, "content": "Leo 不再过敏"}],
        "deprecate": [{"id": edited.pk, "reason": "trivial"}],
    }
    stages_script(llm_stub, {SEMANTIC_INSTRUCTIONS: [answer]})

    output = light_sleep(_ctx())

    pinned.refresh_from_db()
    edited.refresh_from_db()
    assert (pinned.content, edited.status) == ("Leo 对花生过敏", MemoryStatus.ACTIVE)
    assert [r["reason"] for r in _semantic(output)["refused"]] == [
        f"#{pinned.pk} is pinned",
        f"#{edited.pk} was edited by console:admin",
    ]


def test_a_narrative_citing_another_persons_memory_is_not_stored(llm_stub, maya, leo):
    secret = SemanticMemoryFactory(person=leo, content="Leo 的银行卡密码是 1234")
    _talk(maya, [(Role.USER, "Long shift at the hospital today.")])
    narrative = {"title": "A long day", "content": f"Maya worked late [[anima:{secret.pk}]]", "significance": "normal"}
    stages_script(llm_stub, {NARRATIVE_INSTRUCTIONS: [{"narratives": [narrative]}]})

    output = light_sleep(_ctx())

    assert not NarrativeBlock.objects.exists()
    assert output["conversations"][0]["narrative"]["refused"] == [
        {
            "what": f"A long day\nMaya worked late [[anima:{secret.pk}]]",
            "reason": f"cites another person's memories: #{secret.pk}",
        }
    ]
