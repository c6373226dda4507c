from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import given, settings
from hypothesis import strategies as st

from anima.core.llm import LlmBudgetExceeded, LlmError, LlmRepairFailed
from anima.core.llm.testing import scripted
from anima.core.models import BlockTag, MemoryStatus, MemoryType
from anima.core.text import is_chinese
from conversations.models import Platform, Role
from memory.models import ContentBlock, LimbicBlock, NarrativeBlock, SelfBlock, SelfLayerBlock, SemanticMemory
from sleep.context import StepContext
from sleep.models import LightSleepWatermark
from sleep.offline.light import facts_read
from sleep.steps import light_sleep
from sleep.steps.light import LATE_LOOKBACK, _late_batches
from sleep.steps.light_outline import NO_OUTLINE, autobiography_outline_refresh
from tests.factories import (
    AutoLlmRunFactory,
    ContentBlockFactory,
    ConversationFactory,
    DiaryEntryFactory,
    IdentityFactory,
    MessageFactory,
    PersonFactory,
    SemanticMemoryFactory,
)

DAY = dt.date(2026, 11, 26)


def _ctx(day: dt.date = DAY) -> StepContext:
    return StepContext(run_id=0, day=day, mode="full", force=False, run_key="test", token_budget=None)


def _at(day: dt.date, minute: int, hour: int = 10) -> dt.datetime:
    return timezone.make_aware(dt.datetime.combine(day, dt.time(hour, minute)))


def _talk(person, lines, *, day: dt.date = DAY, platform: str = Platform.WEB, hour: int = 10):
    conversation = ConversationFactory(person=person, platform=platform)
    for minute, (role, content) in enumerate(lines):
        MessageFactory(conversation=conversation, role=role, content=content, created_at=_at(day, minute, hour))
    return conversation


def _quiet_answers(**overrides):
    answers = {
        "light-sleep.semantic": [{"create": []}],
        "light-sleep.limbic": [{"anchors": []}],
        "light-sleep.narrative": [{"narratives": []}],
        "light-sleep.outline": [{"turning_points": [], "milestones": [], "recent_narratives": []}],
    }
    answers.update(overrides)
    return answers


def test_offline_light_sleep_keeps_each_conversations_language(leo, maya):
    _talk(leo, [(Role.USER, "我是一名软件工程师，住在杭州。我女儿小雨属虎，今年四岁。"), (Role.ASSISTANT, "好的。")])
    _talk(maya, [(Role.USER, "I'm a nurse and I live in Lisbon. I have a cat named Miso."), (Role.ASSISTANT, "Nice!")])

    light_sleep(_ctx())

    leo_facts = list(SemanticMemory.objects.filter(person=leo).values_list("content", flat=True))
    maya_facts = list(SemanticMemory.objects.filter(person=maya).values_list("content", flat=True))
    assert any("杭州" in fact for fact in leo_facts) and any("属虎" in fact for fact in leo_facts)
    assert all(is_chinese(fact) for fact in leo_facts)
    assert {"Maya is a nurse", "Maya lives in Lisbon", "Maya has a cat named Miso"} <= set(maya_facts)
    assert not any(is_chinese(fact) for fact in maya_facts)


def test_offline_light_sleep_tells_facts_said_in_traditional_characters_in_them_and_stores_none_twice(leo, maya):
    said = "我是一名軟體工程師，住在杭州。我女兒小雨屬虎，今年四歲。我對花生過敏。"
    here = _talk(leo, [(Role.USER, said), (Role.ASSISTANT, "好的。")])
    _talk(maya, [(Role.USER, "我對花生過敏。"), (Role.ASSISTANT, "好的。")])
    # Known already, in simplified characters, from this conversation.
    known = SemanticMemoryFactory(person=leo, content="Leo 对花生过敏", source_conversation=here)

    light_sleep(_ctx())

    facts = list(SemanticMemory.objects.filter(person=leo).exclude(pk=known.pk).values_list("content", flat=True))
    assert any("杭州" in fact for fact in facts) and any("屬虎" in fact for fact in facts)
    assert any("女兒" in fact and "四歲" in fact for fact in facts)
    # Told in the characters they were said in (属, 岁 and 儿 are simplified ones), and the allergy not again.
    assert not any(character in fact for fact in facts for character in "属岁儿")
    assert not any("花生" in fact for fact in facts)
    # Said by someone who had not said it before, it is a fact.
    assert list(SemanticMemory.objects.filter(person=maya).values_list("content", flat=True)) == ["Maya 對花生過敏"]


@pytest.mark.parametrize(
    ("name", "said", "told"),
    [
        ("于小明", "我女兒今年四歲了。", "于小明的女兒今年四歲"),  # 于 is a surname, never 於
        ("陳明", "我女儿今年四岁了。", "陳明的女儿今年四岁"),  # a name in traditional characters, in a simplified fact
    ],
)
def test_a_fact_names_its_person_as_their_name_is_written(name, said, told):
    person = PersonFactory(slug="someone", display_name=name)
    _talk(person, [(Role.USER, said), (Role.ASSISTANT, "好的。")])

    light_sleep(_ctx())

    facts = list(SemanticMemory.objects.filter(person=person).values_list("content", flat=True))
    assert [fact.replace(" ", "") for fact in facts] == [told], facts
    # The day's narrative reads the same rules, and a milestone said in traditional characters is one.
    passed = [(Role.USER, "我的考試通過了！我現在住在台北。"), (Role.ASSISTANT, "恭喜！")]
    _talk(person, passed, day=DAY + dt.timedelta(days=1))
    light_sleep(_ctx(DAY + dt.timedelta(days=1)))
    assert NarrativeBlock.objects.filter(person=person, body__significance="milestone").exists()


def test_a_joke_in_traditional_characters_is_no_fact(leo):
    _talk(leo, [(Role.USER, "我週末打算去看演唱會……開玩笑的，根本搶不到票"), (Role.ASSISTANT, "哈哈")])

    light_sleep(_ctx())

    assert not SemanticMemory.objects.filter(person=leo, content__contains="演唱會").exists()


def test_offline_light_sleep_remembers_each_pet_of_a_list_by_name(leo, maya):
    _talk(leo, [(Role.USER, "我家有两只猫，一只叫咪咪，一只叫豆豆。"), (Role.ASSISTANT, "好可爱。")])
    _talk(maya, [(Role.USER, "We have two cats, Miso and Tofu."), (Role.ASSISTANT, "Cute!")])

    light_sleep(_ctx())

    named = {
        (memory.person.slug, memory.body["slot"]["name"]): memory.content
        for memory in SemanticMemory.objects.select_related("person")
        if memory.body.get("slot", {}).get("name")
    }
    assert named == {
        ("leo", "咪咪"): "Leo的猫叫咪咪",
        ("leo", "豆豆"): "Leo的猫叫豆豆",
        ("maya", "miso"): "Maya has a cat named Miso",
        ("maya", "tofu"): "Maya has a cat named Tofu",
    }


def test_facts_of_a_conversation_reached_through_a_mapped_account_are_the_persons(leo):
    conversation = _talk(None, [(Role.USER, "I'm a nurse and I live in Lisbon."), (Role.ASSISTANT, "Nice!")])
    conversation.chat_id = "4242"
    conversation.save(update_fields=["chat_id"])
    IdentityFactory(person=leo, channel=conversation.channel_name, external_id="4242")

    light_sleep(_ctx())

    facts = SemanticMemory.objects.filter(source_conversation=conversation)
    assert facts.exists()
    assert {(fact.person_id, fact.content) for fact in facts} >= {(leo.pk, "Leo lives in Lisbon")}
    assert not facts.filter(person__isnull=True).exists()  # never a person-less fact everyone would see


def test_an_unknown_humans_conversation_teaches_nothing_until_its_account_is_mapped(leo):
    said = "My email is zed@example.org and I live in Oslo. I feel so anxious about my visa."
    conversation = _talk(None, [(Role.USER, said), (Role.ASSISTANT, "Noted!")])
    conversation.chat_id = "visitor-7"
    conversation.save(update_fields=["chat_id"])

    output = light_sleep(_ctx())

    # Person-less memories would be in everyone's recall and prompts: none of its facts, feelings or narratives.
    [report] = output["conversations"]
    assert report["conversation_id"] == conversation.pk and report["skipped_reason"] == "unknown_human"
    assert output["unknown_human"] == [conversation.pk]
    assert not SemanticMemory.objects.exists() and not ContentBlock.objects.filter(person__isnull=True).exists()
    assert not LightSleepWatermark.objects.filter(conversation=conversation).exists()

    IdentityFactory(person=leo, channel=conversation.channel_name, external_id="visitor-7")
    light_sleep(_ctx())

    facts = SemanticMemory.objects.filter(source_conversation=conversation)
    assert {"Leo's email is zed@example.org", "Leo lives in Oslo"} <= set(facts.values_list("content", flat=True))
    assert set(facts.values_list("person", flat=True)) == {leo.pk}
    assert LimbicBlock.objects.filter(source_conversation=conversation, person=leo).exists()


def test_scripted_light_sleep_asks_for_the_conversations_language_and_stores_answers_verbatim(leo):
    _talk(leo, [(Role.USER, "我住在杭州。"), (Role.ASSISTANT, "记住了。")])
    answers = _quiet_answers(
        **{"light-sleep.semantic": [{"create": [{"memory_type": "world", "content": "Leo 住在杭州"}]}]}
    )
    with scripted(answers) as provider:
        light_sleep(_ctx())

    semantic_call = provider.calls[0]
    assert semantic_call.purpose == "light-sleep.semantic"
    assert "language the conversation is held in" in semantic_call.messages[0]["content"]
    memory = SemanticMemory.objects.get()
    assert memory.content == "Leo 住在杭州"
    assert memory.memory_type == MemoryType.WORLD
    assert memory.person == leo
    assert memory.source_day == DAY
    assert memory.body["source_conversations"] == [memory.source_conversation_id]


def test_rerunning_a_day_duplicates_nothing(leo, maya):
    _talk(leo, [(Role.USER, "我真的很焦虑，我是后端负责人。"), (Role.ASSISTANT, "慢慢来。")])
    _talk(maya, [(Role.USER, "I passed my exam! I'm so happy."), (Role.ASSISTANT, "Congratulations!")])
    light_sleep(_ctx())
    counts = (SemanticMemory.objects.count(), ContentBlock.objects.count())
    assert counts[0] > 0 and LimbicBlock.objects.exists() and NarrativeBlock.objects.exists()

    second = light_sleep(_ctx())

    assert (SemanticMemory.objects.count(), ContentBlock.objects.count()) == counts
    assert [c["skipped_reason"] for c in second["conversations"]] == ["already_consolidated"] * 2


def test_rerunning_a_day_does_not_reask_a_model_that_would_word_things_differently(leo):
    _talk(leo, [(Role.USER, "我住在杭州，我很担心明天上线。")])

    def answers(wording: str):
        return _quiet_answers(
            **{
                "light-sleep.semantic": [{"create": [{"memory_type": "world", "content": f"Leo {wording}杭州"}]}],
                "light-sleep.limbic": [
                    {
                        "anchors": [
                            {
                                "kind": "conversation_mood",
                                "content": f"我感到{wording}担心",
                                "valence": -0.5,
                                "arousal": 0.5,
                                "intensity": 0.7,
                            }
                        ]
                    }
                ],
                "light-sleep.narrative": [
                    {"narratives": [{"title": "上线前", "content": f"{wording}的一天", "significance": "normal"}]}
                ],
            }
        )

    with scripted(answers("住在")):
        light_sleep(_ctx())
    with scripted(answers("居住在")) as provider:
        light_sleep(_ctx())

    assert provider.purposes() == ["light-sleep.outline"]
    assert SemanticMemory.objects.count() == 1
    assert LimbicBlock.objects.count() == 1 and NarrativeBlock.objects.count() == 1


def _only_failure(output: dict, conversation) -> dict:
    """The one failure of a light-sleep output, checked to be ``conversation``'s of DAY."""
    [failure] = output["failures"]
    assert (failure["conversation_id"], failure["day"]) == (conversation.pk, DAY.isoformat())
    return failure


def test_invalid_semantic_answer_writes_no_memory(leo):
    conversation = _talk(leo, [(Role.USER, "我住在杭州。")])
    bad = {"create": [{"memory_type": "gossip", "content": "Leo 住在杭州"}]}
    # The answer and its repair round both break the schema.
    with scripted(_quiet_answers(**{"light-sleep.semantic": [bad, bad]})):
        output = light_sleep(_ctx())
    failure = _only_failure(output, conversation)
    assert failure["stage"] == "semantic" and failure["error"].startswith(LlmRepairFailed.__name__)
    assert not SemanticMemory.objects.exists()


@pytest.mark.parametrize("occurred_at", ["0001-01-01", "2200-01-01", "1899-12-31", "2026-02-30", "last summer"])
def test_an_answer_dated_outside_1900_to_2199_writes_no_memory_and_names_the_field(leo, occurred_at):
    conversation = _talk(leo, [(Role.USER, "我住在杭州。")])
    bad = {"create": [{"memory_type": "world", "content": "Leo 住在杭州", "occurred_at": occurred_at}]}
    with scripted(_quiet_answers(**{"light-sleep.semantic": [bad, bad]})):
        output = light_sleep(_ctx())
    error = _only_failure(output, conversation)["error"]
    assert "$.create[0].occurred_at" in error and "2199-12-31" in error
    assert not SemanticMemory.objects.exists()


def test_invalid_limbic_answer_keeps_stage_one_and_writes_no_anchor(leo):
    conversation = _talk(leo, [(Role.USER, "我很担心明天上线。")])
    out_of_range = {
        "anchors": [{"kind": "spike", "content": "我感到担心", "valence": -3, "arousal": 0.5, "intensity": 0.9}]
    }
    answers = _quiet_answers(
        **{
            "light-sleep.semantic": [{"create": [{"memory_type": "experience", "content": "Leo 明天上线"}]}],
            "light-sleep.limbic": [out_of_range, out_of_range],
        }
    )
    with scripted(answers):
        output = light_sleep(_ctx())
    assert _only_failure(output, conversation)["stage"] == "limbic"
    assert SemanticMemory.objects.filter(content="Leo 明天上线").exists()
    assert not LimbicBlock.objects.exists()


def test_a_spent_token_budget_stops_light_sleep_before_any_write(leo):
    _talk(leo, [(Role.USER, "我住在杭州。")])
    AutoLlmRunFactory(run_key="sleep-run:9", total_tokens=500)
    ctx = StepContext(run_id=9, day=DAY, mode="full", force=False, run_key="sleep-run:9", token_budget=400)

    with pytest.raises(LlmBudgetExceeded):
        light_sleep(ctx)

    assert not SemanticMemory.objects.exists() and not ContentBlock.objects.exists()


def test_cron_conversations_never_enter_light_sleep(leo):
    web = _talk(leo, [(Role.USER, "我住在杭州。")])
    _talk(None, [(Role.USER, "[nightly-report] I live in a datacenter."), (Role.ASSISTANT, "ok")], platform="cron")

    output = light_sleep(_ctx())

    assert [c["conversation_id"] for c in output["conversations"]] == [web.pk]
    assert not SemanticMemory.objects.filter(content__icontains="datacenter").exists()


def test_tool_and_system_messages_are_stripped_from_the_dialogue(leo):
    conversation = _talk(leo, [(Role.USER, "明天杭州天气怎么样？")])
    MessageFactory(
        conversation=conversation, role=Role.TOOL, content='{"secret": "TOOL-PAYLOAD"}', created_at=_at(DAY, 30)
    )
    MessageFactory(conversation=conversation, role=Role.SYSTEM, content="SYSTEM-PROMPT", created_at=_at(DAY, 31))
    with scripted(_quiet_answers()) as provider:
        light_sleep(_ctx())

    dialogue = provider.calls[0].payload["dialogue"]
    assert [turn["role"] for turn in dialogue] == ["user"]
    assert all("TOOL-PAYLOAD" not in str(call.payload) for call in provider.calls)
    assert all("SYSTEM-PROMPT" not in str(call.payload) for call in provider.calls)


def test_only_the_slept_days_messages_are_read(leo):
    conversation = _talk(leo, [(Role.USER, "今天的事")])
    MessageFactory(
        conversation=conversation, role=Role.USER, content="昨天的事", created_at=_at(DAY - dt.timedelta(days=1), 5)
    )
    with scripted(_quiet_answers()) as provider:
        light_sleep(_ctx())
    assert [turn["content"] for turn in provider.calls[0].payload["dialogue"]] == ["今天的事"]


def test_anchors_under_the_minimum_intensity_are_refused(leo):
    _talk(leo, [(Role.USER, "有点累。")])
    anchors = {
        "anchors": [
            {
                "kind": "conversation_mood",
                "content": "我感到一点点倦意",
                "valence": -0.2,
                "arousal": 0.2,
                "intensity": 0.2,
            },
            {"kind": "spike", "content": "我感到心疼", "valence": -0.5, "arousal": 0.4, "intensity": 0.6},
        ]
    }
    with scripted(_quiet_answers(**{"light-sleep.limbic": [anchors]})):
        output = light_sleep(_ctx())

    assert list(LimbicBlock.objects.values_list("content", flat=True)) == ["我感到心疼"]
    block = LimbicBlock.objects.get()
    assert block.parent.source_day == DAY and block.tag == BlockTag.LIMBIC
    assert block.body["intensity"] == 0.6 and block.body["kind"] == "spike"
    assert output["conversations"][0]["limbic"]["refused_low_intensity"] == 1


def test_limbic_stage_runs_when_stage_one_wrote_nothing(leo):
    _talk(leo, [(Role.USER, "我真的很焦虑。")])
    with scripted(_quiet_answers()) as provider:
        light_sleep(_ctx())
    assert provider.purposes()[:3] == ["light-sleep.semantic", "light-sleep.limbic", "light-sleep.narrative"]


def test_semantic_dedupe_compares_only_with_the_same_conversation(leo):
    here = _talk(leo, [(Role.USER, "我住在杭州。我很喜欢徒步。")])
    SemanticMemoryFactory(person=leo, content="Leo 住在杭州", source_conversation=here)
    elsewhere = ConversationFactory(person=leo)
    SemanticMemoryFactory(person=leo, content="Leo 很喜欢徒步", source_conversation=elsewhere)
    answer = {
        "create": [
            {"memory_type": "world", "content": "Leo 住在杭州。"},
            {"memory_type": "preference", "content": "Leo 很喜欢徒步"},
        ]
    }
    with scripted(_quiet_answers(**{"light-sleep.semantic": [answer]})):
        light_sleep(_ctx())

    assert SemanticMemory.objects.filter(content__startswith="Leo 住在杭州").count() == 1
    assert SemanticMemory.objects.filter(content="Leo 很喜欢徒步", source_conversation=here).exists()


def test_updates_touch_only_passed_fields_of_this_conversations_memories(leo):
    here = _talk(leo, [(Role.USER, "我搬到上海了。")])
    own = SemanticMemoryFactory(
        person=leo, content="Leo 住在杭州", memory_type=MemoryType.WORLD, source_conversation=here
    )
    foreign = SemanticMemoryFactory(person=leo, content="Leo 喜欢 Python", source_conversation=ConversationFactory())
    answer = {
        "update": [{"id": own.pk, "content": "Leo 住在上海"}, {"id": foreign.pk, "content": "hijacked"}],
        "deprecate": [{"id": foreign.pk, "reason": "not shown"}],
    }
    with scripted(_quiet_answers(**{"light-sleep.semantic": [answer]})):
        output = light_sleep(_ctx())

    own.refresh_from_db()
    foreign.refresh_from_db()
    assert own.content == "Leo 住在上海" and own.memory_type == MemoryType.WORLD
    assert foreign.content == "Leo 喜欢 Python" and foreign.status == MemoryStatus.ACTIVE
    refused = output["conversations"][0]["semantic"]["refused"]
    assert [(r["action"], r["what"]) for r in refused] == [("update", foreign.pk), ("deprecate", foreign.pk)]


def _narrative(day: dt.date, title: str, significance: str):
    return ContentBlockFactory(
        parent=DiaryEntryFactory(source_day=day),
        tag=BlockTag.NARRATIVE,
        title=title,
        body={"significance": significance, "period_start": day.isoformat(), "period_end": day.isoformat()},
    )


def test_autobiography_outline_drops_stale_narratives_and_groups_titles():
    _narrative(DAY - dt.timedelta(days=40), "old normal day", "normal")
    _narrative(DAY - dt.timedelta(days=200), "old milestone", "milestone")
    _narrative(DAY - dt.timedelta(days=400), "the big turn", "turning_point")
    _narrative(DAY - dt.timedelta(days=3), "recent walk", "normal")
    _narrative(DAY - dt.timedelta(days=60), "exam passed", "milestone")

    autobiography_outline_refresh(_ctx())

    outline = SelfLayerBlock.objects.get(key=SelfBlock.AUTOBIOGRAPHY_SUMMARY).content
    assert "## Turning points\n- the big turn" in outline
    assert "## Milestones\n- exam passed" in outline
    assert "## Recent narratives\n- recent walk" in outline
    assert "old normal day" not in outline and "old milestone" not in outline


def test_an_outline_answer_without_a_title_leaves_the_stored_outline():
    _narrative(DAY - dt.timedelta(days=3), "recent walk", "normal")
    autobiography_outline_refresh(_ctx())
    before = SelfLayerBlock.objects.get(key=SelfBlock.AUTOBIOGRAPHY_SUMMARY).content
    empty = {"turning_points": [], "milestones": [], "recent_narratives": []}

    with scripted({"light-sleep.outline": [empty]}):
        output = autobiography_outline_refresh(_ctx())

    assert output["skipped_reason"] == "empty_answer"
    assert SelfLayerBlock.objects.get(key=SelfBlock.AUTOBIOGRAPHY_SUMMARY).content == before
    assert "- recent walk" in before


def test_a_failed_outline_keeps_the_stored_one_and_the_nights_conversations(leo):
    _narrative(DAY - dt.timedelta(days=3), "recent walk", "normal")
    autobiography_outline_refresh(_ctx())
    before = SelfLayerBlock.objects.get(key=SelfBlock.AUTOBIOGRAPHY_SUMMARY).content
    conversation = _talk(leo, [(Role.USER, "我住在杭州。")])
    fact = {"memory_type": "world", "content": "Leo 住在杭州"}
    answers = _quiet_answers(
        **{"light-sleep.semantic": [{"create": [fact]}], "light-sleep.outline": ["not json", "not json"]}
    )

    with scripted(answers):
        output = light_sleep(_ctx())

    [failure] = output["failures"]
    assert failure["stage"] == "outline" and failure["error"].startswith("LlmRepairFailed")
    assert output["autobiography_summary"] == {"skipped_reason": "failed"}
    assert SelfLayerBlock.objects.get(key=SelfBlock.AUTOBIOGRAPHY_SUMMARY).content == before
    assert LightSleepWatermark.objects.get(conversation=conversation).error == ""
    assert SemanticMemory.objects.filter(content="Leo 住在杭州").exists()


def test_autobiography_outline_without_narratives_says_so():
    autobiography_outline_refresh(_ctx())
    assert SelfLayerBlock.objects.get(key=SelfBlock.AUTOBIOGRAPHY_SUMMARY).content == NO_OUTLINE["en"]


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=300), name=st.sampled_from(["Leo", "Maya", ""]))
def test_fact_extraction_never_fails_and_types_every_fact(text, name):
    for memory_type, content, _ in facts_read(text, name=name):
        assert memory_type in MemoryType.values
        assert content.strip()


def test_fact_extraction_keeps_a_stated_change_with_its_past():
    said = "以前我很喜欢 Python，写脚本特别快。但我现在更喜欢 TypeScript 了。"
    facts = [(kind, content) for kind, content, _ in facts_read(said, name="Leo")]
    assert facts == [("preference", "Leo 现在更喜欢 TypeScript（以前喜欢 Python）")]


def test_messages_stored_after_their_day_was_slept_are_consolidated_by_the_next_run_once(leo):
    conversation = _talk(leo, [(Role.USER, "I live in Lisbon."), (Role.ASSISTANT, "Nice.")])
    light_sleep(_ctx())
    # An import delivers one more message of that day after it was slept.
    MessageFactory(
        conversation=conversation, role=Role.USER, content="I'm allergic to peanuts.", created_at=_at(DAY, 30)
    )

    output = light_sleep(_ctx(DAY + dt.timedelta(days=1)))
    again = light_sleep(_ctx(DAY + dt.timedelta(days=1)))

    contents = sorted(SemanticMemory.objects.filter(person=leo).values_list("content", flat=True))
    assert contents == ["Leo is allergic to peanuts", "Leo lives in Lisbon"]
    late = SemanticMemory.objects.get(content="Leo is allergic to peanuts")
    assert late.source_day == DAY and late.source_conversation == conversation
    assert [batch["day"] for batch in output["late"]] == [DAY.isoformat()]
    assert "late" not in again


def test_late_messages_of_every_slept_conversation_day_are_found_in_one_query(leo, maya):
    earlier, yesterday = DAY - dt.timedelta(days=2), DAY - dt.timedelta(days=1)
    first = _talk(leo, [(Role.USER, "I live in Lisbon."), (Role.USER, "I'm allergic to peanuts.")], day=earlier)
    quiet = _talk(maya, [(Role.USER, "Hello.")], day=yesterday)
    busy = _talk(maya, [(Role.USER, "I run."), (Role.USER, "I swim.")], day=yesterday)
    too_old = DAY - LATE_LOOKBACK - dt.timedelta(days=1)
    stale = _talk(leo, [(Role.USER, "I paint."), (Role.USER, "I sing.")], day=too_old)
    # Not late: a day of ``busy`` that was never slept, today's message, and a slept day past the lookback.
    MessageFactory(conversation=busy, role=Role.USER, content="I cook.", created_at=_at(earlier, 5))
    MessageFactory(conversation=first, role=Role.USER, content="Today.", created_at=_at(DAY, 5))
    for conversation, day in ((first, earlier), (quiet, yesterday), (busy, yesterday), (stale, too_old)):
        slept = conversation.messages.filter(created_at__date=day).order_by("id").first()
        LightSleepWatermark.objects.create(conversation=conversation, day=day, last_message_id=slept.pk)

    with CaptureQueriesContext(connection) as queries:
        batches = _late_batches(DAY)

    found = [(day, item.conversation, [m.content for m in item.messages]) for day, item in batches]
    assert found == [(earlier, first, ["I'm allergic to peanuts."]), (yesterday, busy, ["I swim."])]
    assert len(queries) == 1  # every late message at once, joined to the watermarks in the database


def test_a_failed_stage_leaves_the_watermark_so_the_next_run_retries(leo):
    conversation = _talk(leo, [(Role.USER, "I live in Lisbon. I'm so happy here!")])
    # Worded as the offline provider would not, so that a repeated stage would show.
    fact = {"memory_type": "world", "content": "Leo is happy living in Lisbon"}
    answers = _quiet_answers(**{"light-sleep.semantic": [{"create": [fact]}]})
    answers["light-sleep.limbic"] = []  # the model gives no answer: the stage fails
    with scripted(answers):
        output = light_sleep(_ctx())
    assert _only_failure(output, conversation)["stage"] == "limbic"
    # Nothing consolidated yet: the mark stays at 0, with the stage and the reason.
    mark = LightSleepWatermark.objects.get()
    assert (mark.last_message_id, mark.failed_stage) == (0, "limbic") and LlmError.__name__ in mark.error

    output = light_sleep(_ctx())  # offline: the stages that did not finish run again, the finished one is not repeated

    assert "failures" not in output
    mark.refresh_from_db()
    assert (mark.last_message_id, mark.failed_stage, mark.error) == (conversation.messages.get().pk, "", "")
    assert list(SemanticMemory.objects.values_list("content", flat=True)) == ["Leo is happy living in Lisbon"]
    assert LimbicBlock.objects.exists()


@pytest.mark.parametrize(
    ("said", "felt"),
    [
        ("这周我特别焦虑，项目一直出问题。", True),  # 特别 ends in 别, and is no "don't"
        ("考试过了，我非常开心！", True),
        ("别担心，我已经处理好了。", False),
        ("说实话我不太开心。", False),
        ("现在我没那么担心了。", False),
        ("I'm not worried at all.", False),
        # In traditional characters, as in simplified ones.
        ("考試過了，我非常開心！", True),
        ("說實話我不太開心。", False),
        # Typed on a phone, whose apostrophe is ’.
        ("I don\u2019t feel stressed anymore.", False),
        ("I wasn\u2019t nervous at all.", False),
    ],
)
def test_the_offline_mind_reads_a_feeling_unless_it_is_negated(leo, said, felt):
    _talk(leo, [(Role.USER, said)])

    light_sleep(_ctx())

    assert LimbicBlock.objects.exists() is felt


PHONE_TYPED = [
    "I have a daughter called Lily. She's 7 now.",
    "I got a dog last week. He's called Rex.",
    "I have two kids, Ben who's 5 and Mia who's 9.",
    "I live in Leeds and can't eat gluten.",
    "I'm allergic to peanuts and I don't drink coffee.",
]


@pytest.mark.parametrize("said", PHONE_TYPED)
def test_a_message_typed_with_a_phones_apostrophe_gives_the_facts_of_the_straight_one(said):
    straight = facts_read(said, name="Maya")
    assert straight and facts_read(said.replace("'", "\u2019"), name="Maya") == straight
