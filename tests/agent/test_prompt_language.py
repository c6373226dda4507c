"""One language per prompt: headings and framing follow the conversation's language; memories keep theirs."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anima.agent.turn import prepare_turn
from anima.core.models import MemoryType
from anima.core.segmentation import text_simplified, text_traditional
from conversations.models import Person
from conversations.selectors import conversation_language, conversation_script
from memory.models import SelfBlock
from memory.passive import passive_recall
from memory.selectors import self_layer_text
from memory.services import memory_create
from tests.factories import (
    ConversationFactory,
    IdentityFactory,
    MessageFactory,
    PersonFactory,
    SelfLayerBlockFactory,
    TemporalSummaryFactory,
)

pytestmark = pytest.mark.usefixtures("private_cache")

NOW = datetime.fromisoformat("2026-11-28T21:45:00+08:00")
CJK = re.compile(r"[\u3400-\u9fff\u3000-\u303f\uff00-\uffef]")
ZH_SAYS = ["今天上线很顺利，我终于可以休息了。", "小雨最近在学画画，她很开心。", "周末我们去山里徒步吧。"]
# ZH_SAYS as Taiwan writes them.
TRADITIONAL_SAYS = ["今天上線很順利，我終於可以休息了。", "小雨最近在學畫畫，她很開心。", "週末我們去山裡徒步吧。"]
EN_SAYS = ["I passed my Portuguese exam today!", "Miso knocked my flashcards off the desk.", "Dinner for three."]
# The self layer as the nightly step keeps it: a version per language in use.
SELF_LAYER = {
    "zh": {
        SelfBlock.EXISTENCE_ANCHOR: "我是 Anima，一个有长期记忆的数字陪伴者。",
        SelfBlock.SELF_MODEL: "我记得和我说话的人。",
        SelfBlock.DIRECTION: "接下来：记住每个人在意的事。",
    },
    "en": {
        SelfBlock.EXISTENCE_ANCHOR: "I am Anima, a digital companion with a long-term memory.",
        SelfBlock.SELF_MODEL: "I remember the people I talk with.",
        SelfBlock.DIRECTION: "Next: keep what matters to each person in mind.",
    },
}


def _conversation(person, says: list[str], *, hours_ago: int = 3):
    conversation = ConversationFactory(person=person, title="")
    for number, text in enumerate(says):
        MessageFactory(
            conversation=conversation, content=text, created_at=NOW - timedelta(hours=hours_ago, minutes=-number)
        )
    return conversation


def _companion(*, majority: str):
    """Leo speaks Chinese, Maya English; the majority language has three times the conversations."""
    leo = PersonFactory(slug="leo", display_name="Leo")
    maya = PersonFactory(slug="maya", display_name="Maya")
    for _ in range(3 if majority == "zh" else 1):
        _conversation(leo, ZH_SAYS, hours_ago=20)
    for _ in range(3 if majority == "en" else 1):
        _conversation(maya, EN_SAYS, hours_ago=20)
    for language, blocks in SELF_LAYER.items():
        for key, content in blocks.items():
            SelfLayerBlockFactory(key=key, language=language, content=content)
    memories = [
        memory_create(content="我喜欢简洁直接的表达", memory_type=MemoryType.PREFERENCE, pinned=True),
        memory_create(content="I keep promises I make", memory_type=MemoryType.PREFERENCE, pinned=True),
        memory_create(content="Maya is allergic to peanuts", memory_type=MemoryType.WORLD, person=maya),
        memory_create(content="Leo 的女儿小雨今年四岁", memory_type=MemoryType.WORLD, person=leo),
    ]
    yesterday = date(2026, 11, 27)
    sections = [
        {"conversation_id": None, "person_id": maya.pk, "who": "Maya", "topic": "study", "text": "Maya 考完了葡语"},
        {"conversation_id": None, "person_id": leo.pk, "who": "Leo", "topic": "work", "text": "Leo 修好了支付回调"},
    ]
    TemporalSummaryFactory(
        source_day=yesterday,
        content="\n".join(s["text"] for s in sections),
        body={"window": "day", "period_start": yesterday.isoformat(), "sections": sections},
    )
    texts = [m.content for m in memories] + [s["text"] for s in sections]
    return leo, maya, texts


def _framing(prompt: str, texts: list[str]) -> str:
    """The prompt without what memories say (and their markers): what Anima wrote around them."""
    for text in sorted(texts, key=len, reverse=True):
        prompt = prompt.replace(text, "")
    return re.sub(r"\[\[anima:\d+\]\]", "", prompt)


def _system(conversation, message: str) -> str:
    return prepare_turn(conversation=conversation, user_message=message, now=NOW, store=False)[0]["content"]


def test_an_english_conversation_of_a_mostly_chinese_companion_has_no_chinese_heading_or_framing():
    _, maya, texts = _companion(majority="zh")
    conversation = _conversation(maya, EN_SAYS)

    system = _system(conversation, "Any idea for a peanut-free dessert?")

    framing = _framing(system, texts)
    assert not CJK.findall(framing), framing
    # The memories are there, in the language they were written in; the self layer in English.
    assert "我喜欢简洁直接的表达" in system and "Maya is allergic to peanuts" in system
    assert "## Time summaries" in system and "### Yesterday" in system and "## 时间摘要" not in system
    assert SELF_LAYER["en"][SelfBlock.SELF_MODEL] in system and SELF_LAYER["zh"][SelfBlock.SELF_MODEL] not in system


def test_a_chinese_conversation_of_a_mostly_english_companion_has_no_english_heading_or_framing():
    leo, _, texts = _companion(majority="en")
    conversation = _conversation(leo, ZH_SAYS)

    messages = prepare_turn(conversation=conversation, user_message="小雨今年几岁？", now=NOW, store=False)

    framing = _framing(messages[0]["content"], [*texts, "Anima", "Leo", "Maya"])
    # Only identifiers are Latin: tool names in the citation rule, the [[anima:ID]] marker it explains.
    words = set(re.findall(r"[A-Za-z]+", re.sub(r"memory_\w+|\[\[anima:ID\]\]", "", framing)))
    assert words == set(), framing
    assert "## 时间摘要" in messages[0]["content"] and "### 昨天" in messages[0]["content"]
    assert SELF_LAYER["zh"][SelfBlock.DIRECTION] in messages[0]["content"]


def test_passive_recall_says_what_its_lines_are_in_the_conversations_language():
    leo, maya, _ = _companion(majority="zh")

    chinese = passive_recall(conversation=_conversation(leo, ZH_SAYS), user_message="小雨今年几岁？", person=leo)
    english = passive_recall(conversation=_conversation(maya, EN_SAYS), user_message="peanuts?", person=maya)

    assert chinese.text.startswith("可能相关的记忆：\n- Leo 的女儿小雨今年四岁")
    assert english.text.startswith("Possibly relevant memories:\n- Maya is allergic to peanuts")


def test_a_block_not_written_in_the_conversations_language_yet_falls_back_to_the_companions():
    _, maya, _ = _companion(majority="zh")
    SelfLayerBlockFactory(key=SelfBlock.METACOGNITION, language="zh", content="我把事实和感受分开保存。")

    system = _system(_conversation(maya, EN_SAYS), "hello")

    # Better the companion's own words in its language than no block at all, under an English heading.
    assert "## Metacognition\n我把事实和感受分开保存。" in system


def test_the_persons_setting_wins_over_what_the_conversation_is_held_in():
    _, maya, _ = _companion(majority="en")
    maya.language = "zh"
    maya.save()

    system = _system(_conversation(maya, EN_SAYS), "What should I cook?")

    assert "## 时间摘要" in system and "## 记忆引用" in system and "## Memory citations" not in system


def test_changing_a_persons_language_drops_their_prompt_snapshots_wherever_it_is_changed():
    _, maya, _ = _companion(majority="en")
    own, mapped = _conversation(maya, EN_SAYS), ConversationFactory(person=None, channel="telegram", chat_id="777")
    IdentityFactory(person=maya, channel="telegram", external_id="777")
    MessageFactory(conversation=mapped, content="Hello from Telegram")
    assert "## Memory citations" in _system(own, "hi") and "## Memory citations" in _system(mapped, "hi")

    Person.objects.filter(pk=maya.pk).update(language="zh")  # any path: console, API, a bulk update

    for conversation in (own, mapped):
        conversation.refresh_from_db()
        assert conversation.system_prompt == ""
        assert "## 记忆引用" in _system(conversation, "hi")  # the same day: no wait for the 02:00 rebuild


def test_a_conversation_without_messages_is_framed_in_its_persons_language_else_the_message_else_the_companions():
    _, maya, _ = _companion(majority="zh")
    empty = ConversationFactory(person=maya, title="")
    stranger = ConversationFactory(person=None, chat_id="", title="")

    assert conversation_language(conversation=empty) == "en"  # Maya's other conversations
    assert conversation_language(conversation=stranger) == "zh"  # the companion's majority
    assert conversation_language(conversation=stranger, pending="Hello there, who are you?") == "en"
    assert "## Memory citations" in _system(empty, "")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(says=st.lists(st.sampled_from(ZH_SAYS + EN_SAYS), min_size=1, max_size=7))
def test_every_heading_is_in_the_conversations_majority_language(says):
    person = PersonFactory()
    conversation = _conversation(person, says)
    SelfLayerBlockFactory(key=SelfBlock.SELF_MODEL, language="zh", content=SELF_LAYER["zh"][SelfBlock.SELF_MODEL])
    SelfLayerBlockFactory(key=SelfBlock.SELF_MODEL, language="en", content=SELF_LAYER["en"][SelfBlock.SELF_MODEL])

    system = _system(conversation, "")

    headings = [line.replace(person.display_name, "") for line in system.splitlines() if line.startswith("#")]
    assert headings
    # The majority by weight of script: a Chinese character carries about a word, three letters.
    zh = sum(len(re.findall(r"[\u3400-\u9fff]", text)) for text in says if text in ZH_SAYS) * 3
    en = sum(len(re.findall(r"[A-Za-z]", text)) for text in says if text in EN_SAYS)
    chinese = zh >= max(en, 1)
    for heading in headings:
        assert bool(CJK.search(heading)) == chinese and bool(re.search(r"[A-Za-z]", heading)) != chinese, heading


def test_a_conversation_in_traditional_characters_is_framed_in_them_and_its_memories_keep_theirs():
    leo, _, _ = _companion(majority="zh")
    conversation = _conversation(leo, TRADITIONAL_SAYS)

    messages = prepare_turn(conversation=conversation, user_message="小雨今年幾歲？", now=NOW, store=False)

    system = messages[0]["content"]
    # A conversation whose prompt does not cite the fact already (passive recall leaves out what it cites).
    other = _conversation(leo, TRADITIONAL_SAYS)
    passive = passive_recall(conversation=other, user_message="小雨今年幾歲？", person=leo).text
    for heading in ("# 自我", "## 自我認知", "## 常駐記憶", "## 關於 Leo", "## 時間摘要", "### 昨天", "## 記憶引用"):
        assert heading in system, heading
    assert "每條記憶" in system and "每条记忆" not in system
    assert "Maya: 學習" in system and "学习" not in system  # another person's topic line, framing too
    assert passive.startswith("可能相關的記憶：\n- Leo 的女儿小雨今年四岁")
    # No heading holds a character written otherwise in traditional ones; the memories are as they were written.
    headings = [line for line in system.splitlines() if line.startswith("#")]
    assert all(text_traditional(line) == line for line in headings), headings
    assert "我喜欢简洁直接的表达" in system and SELF_LAYER["zh"][SelfBlock.DIRECTION] in system


def test_a_conversation_mostly_in_simplified_characters_keeps_simplified_framing():
    leo, _, _ = _companion(majority="zh")
    conversation = _conversation(leo, [*ZH_SAYS, TRADITIONAL_SAYS[0]])

    system = _system(conversation, "小雨今年几岁？")

    assert conversation_script(conversation=conversation) == ""
    assert "## 常驻记忆" in system and "## 记忆引用" in system and "## 常駐記憶" not in system


def test_the_script_follows_most_of_the_chinese_messages_and_a_new_conversation_its_first():
    person = PersonFactory()
    mixed = _conversation(person, [*TRADITIONAL_SAYS[:2], ZH_SAYS[2], *EN_SAYS])
    empty = ConversationFactory(person=person, title="")

    assert conversation_script(conversation=mixed) == "\n".join(reversed(TRADITIONAL_SAYS[:2]))
    assert conversation_script(conversation=_conversation(person, EN_SAYS)) == ""
    assert conversation_script(conversation=empty, pending="我的貓呢？") == "我的貓呢？"
    assert conversation_script(conversation=empty, pending="我的猫呢？") == ""


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(says=st.lists(st.sampled_from(ZH_SAYS + TRADITIONAL_SAYS), min_size=1, max_size=7))
def test_every_chinese_heading_is_in_the_characters_most_messages_are_written_in(says):
    person = PersonFactory(language="zh")
    conversation = _conversation(person, says)
    SelfLayerBlockFactory(key=SelfBlock.SELF_MODEL, language="zh", content=SELF_LAYER["zh"][SelfBlock.SELF_MODEL])

    system = _system(conversation, "")

    headings = [line.replace(person.display_name, "") for line in system.splitlines() if line.startswith("#")]
    traditional = sum(text in TRADITIONAL_SAYS for text in says) * 2 > len(says)
    expected = {"## 自我認知", "## 記憶引用"} if traditional else {"## 自我认知", "## 记忆引用"}
    assert expected <= set(headings), headings
    for heading in headings:
        assert (text_traditional(heading) if traditional else text_simplified(heading)) == heading, heading


def test_the_autobiography_summarys_section_headings_follow_the_script_and_its_titles_stay_as_written():
    outline = "## 转折点\n- 于小明的婚礼\n\n## 近来的经历\n- 搬到台北"
    SelfLayerBlockFactory(key=SelfBlock.AUTOBIOGRAPHY_SUMMARY, language="zh", content=outline)

    traditional = self_layer_text(language="zh", script="我的貓")

    assert "## 自傳摘要\n## 轉折點\n- 于小明的婚礼\n\n## 近來的經歷\n- 搬到台北" in traditional
    assert f"## 自传摘要\n{outline}" in self_layer_text(language="zh")
