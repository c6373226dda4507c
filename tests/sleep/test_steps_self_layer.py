from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from anima.agent.turn import FRAMING, system_prompt_build
from anima.core.llm.testing import scripted
from anima.core.models import BlockTag
from anima.core.text import is_chinese
from memory.models import SelfBlock, SelfLayerBlock
from sleep.context import StepContext
from sleep.offline.self_layer import self_layer_answer
from sleep.steps import self_layer_refresh
from tests.factories import (
    ContentBlockFactory,
    ConversationFactory,
    DiaryEntryFactory,
    LimbicAnchorFactory,
    MessageFactory,
    PersonFactory,
    SelfLayerBlockFactory,
    SemanticMemoryFactory,
)

DAY = dt.date(2026, 11, 26)


def _ctx(*, force: bool = False) -> StepContext:
    return StepContext(run_id=0, day=DAY, mode="full", force=force, run_key="test", token_budget=None)


def _answer():
    return {"existence_anchor": "I am someone else now.", "self_model": "I remember Leo and Maya."}


def _learned_today():
    SemanticMemoryFactory(content="Leo 住在杭州", source_day=DAY, external_id="ls:2026-11-26:1:semantic:abc")


def test_existence_anchor_stays_locked_without_force():
    _learned_today()
    SelfLayerBlockFactory(key=SelfBlock.EXISTENCE_ANCHOR, content="I am Anima.", locked=True)

    with scripted({"self-layer": [_answer()]}):
        output = self_layer_refresh(_ctx())

    assert SelfLayerBlock.objects.get(key=SelfBlock.EXISTENCE_ANCHOR).content == "I am Anima."
    assert SelfLayerBlock.objects.get(key=SelfBlock.SELF_MODEL).content == "I remember Leo and Maya."
    assert output == {"changed": ["self_model"], "refused_locked": ["existence_anchor"], "refused_personal": []}


def test_force_changes_the_existence_anchor():
    _learned_today()
    SelfLayerBlockFactory(key=SelfBlock.EXISTENCE_ANCHOR, content="I am Anima.", locked=True)

    with scripted({"self-layer": [_answer()]}):
        self_layer_refresh(_ctx(force=True))

    assert SelfLayerBlock.objects.get(key=SelfBlock.EXISTENCE_ANCHOR).content == "I am someone else now."


def test_autobiography_summary_is_not_the_self_layer_steps_to_write():
    _learned_today()
    SelfLayerBlockFactory(key=SelfBlock.AUTOBIOGRAPHY_SUMMARY, content="## Milestones\n- exam passed")
    rewrite = {"autobiography_summary": "rewritten"}
    with scripted({"self-layer": [rewrite, rewrite]}):  # asked, then repaired
        output = self_layer_refresh(_ctx())
    # Refused by the schema: the language's revision is a failure of the step, and nothing is written.
    [failure] = output["failures"]
    assert failure["language"] == "en" and failure["error"].startswith("LlmRepairFailed")
    assert "autobiography_summary: property not allowed" in failure["error"]
    assert SelfLayerBlock.objects.get(key=SelfBlock.AUTOBIOGRAPHY_SUMMARY).content == "## Milestones\n- exam passed"


def test_nothing_learned_means_nothing_to_refresh():
    with scripted({}) as provider:
        assert self_layer_refresh(_ctx()) == {"skipped_reason": "nothing_new"}
    assert provider.calls == []


@pytest.mark.parametrize("language", ["zh", "en"])
def test_the_offline_self_layer_speaks_the_companions_language_whatever_the_day(language):
    payload = {
        "day": "2026-11-28",
        "language": language,
        "force": False,
        "blocks": {"self_model": "I am a companion.", "personality_baseline": "我温暖而稳定。"},
        "today": {
            "facts": ["Leo 的女儿小雨属虎", "Maya lives in Lisbon"],
            "anchors": [],
            "narratives": ["和 Leo 聊杭州", "Lisbon with Maya"],
        },
    }
    answer = self_layer_answer(payload)
    merged = {**payload["blocks"], **answer}
    assert {key: is_chinese(text) for key, text in merged.items()} == {key: language == "zh" for key in merged}


def test_the_first_run_seeds_an_editable_existence_anchor_in_each_language_in_use():
    for text in ("我住在杭州。", "好的。", "Hi!"):
        MessageFactory(content=text)
    self_layer_refresh(_ctx())
    # The majority's first; the English conversation has its own.
    anchors = {block.language: block for block in SelfLayerBlock.objects.filter(key=SelfBlock.EXISTENCE_ANCHOR)}
    assert set(anchors) == {"zh", "en"}
    assert is_chinese(anchors["zh"].content) and not is_chinese(anchors["en"].content)
    assert all("Anima" in anchor.content and anchor.locked for anchor in anchors.values())


# --- Privacy between people: every person's prompt carries the self layer, so it holds nobody's day ---

# What each person told the companion on DAY: name, a fact, a narrative's title and text, its telling word,
# and how the companion felt about it.
TWO_DAYS = {
    "en": {
        "leo": (
            "Leo",
            "Leo's mother has heart surgery on Friday",
            "Leo's mother's surgery",
            "Leo is scared.",
            "surgery",
            -0.7,
        ),
        "maya": (
            "Maya",
            "Maya adopted a greyhound called Biscuit",
            "Biscuit comes home",
            "Maya is glad.",
            "Biscuit",
            0.6,
        ),
    },
    "zh": {
        "leo": ("李明", "李明的妈妈周五做心脏手术", "李明妈妈的手术", "李明很害怕。", "手术", -0.7),
        "maya": ("王芳", "王芳领养了一只叫饼干的灵缇犬", "饼干回家了", "王芳很开心。", "饼干", 0.6),
    },
}


def _two_peoples_day(language: str) -> dict:
    """Leo's worried day and Maya's glad one, as light sleep leaves them; each person with a conversation."""
    people = {}
    for slug, (name, fact, title, story, _, valence) in TWO_DAYS[language].items():
        person = PersonFactory(slug=slug, display_name=name)
        conversation = ConversationFactory(person=person)
        MessageFactory(conversation=conversation, content=story)
        SemanticMemoryFactory(person=person, content=fact, source_day=DAY, external_id=f"ls:{DAY}:{slug}:semantic")
        diary = DiaryEntryFactory(source_day=DAY)
        ContentBlockFactory(parent=diary, person=person, tag=BlockTag.NARRATIVE, title=title, content=story)
        LimbicAnchorFactory(day=DAY, person=person, content=f"{story} I feel it too.", valence=valence)
        people[slug] = conversation
    return people


def _found(text: str, *, language: str, slug: str) -> list[str]:
    """Whatever of that person's day ``text`` holds: their name, slug, fact, narrative or its telling word."""
    return [word for word in (slug, *TWO_DAYS[language][slug][:5]) if word.casefold() in text.casefold()]


@pytest.mark.parametrize("language", ["en", "zh"])
def test_the_offline_self_layer_holds_nothing_of_anyones_day(settings, language):
    settings.ANIMA_COMPANION_LANGUAGE = language
    people = _two_peoples_day(language)

    self_layer_refresh(_ctx())

    blocks = "\n".join(SelfLayerBlock.objects.values_list("content", flat=True))
    assert SelfLayerBlock.objects.get(key=SelfBlock.DIRECTION).content
    assert _found(blocks, language=language, slug="leo") == _found(blocks, language=language, slug="maya") == []
    for viewer, other in (("maya", "leo"), ("leo", "maya")):
        prompt = system_prompt_build(conversation=people[viewer], now=timezone.now())
        assert FRAMING[language]["self"] in prompt
        assert _found(prompt, language=language, slug=other) == []


def test_a_model_block_naming_a_person_or_copying_their_fact_is_refused(llm_stub):
    _two_peoples_day("en")
    SelfLayerBlockFactory(key=SelfBlock.DIRECTION, content="Next: listen first.")
    SelfLayerBlockFactory(key=SelfBlock.METACOGNITION, content="I sort facts from feelings.")
    SelfLayerBlockFactory(key=SelfBlock.SELF_MODEL, content="I am a companion.")
    llm_stub.reply(
        {
            "direction": "Check in with Leo about the surgery.",
            "metacognition": "I learned that someone's mother has heart surgery on Friday.",
            "self_model": "I am a companion who learns to stay steady when a day carries worry.",
        }
    )

    output = self_layer_refresh(_ctx())

    blocks = dict(SelfLayerBlock.objects.values_list("key", "content"))
    assert blocks[SelfBlock.DIRECTION] == "Next: listen first."
    assert blocks[SelfBlock.METACOGNITION] == "I sort facts from feelings."
    assert blocks[SelfBlock.SELF_MODEL] == "I am a companion who learns to stay steady when a day carries worry."
    assert output["changed"] == ["self_model"]
    assert sorted(output["refused_personal"]) == ["direction", "metacognition"]
    # The feelings reach the model as valence and intensity, without the text that says whose they are.
    assert "I feel it too" not in str(llm_stub.requests[0]["messages"])


def test_a_block_sharing_only_everyday_words_with_the_day_is_kept():
    sam = PersonFactory(slug="12", display_name="Sam")
    SemanticMemoryFactory(person=sam, content="Work", source_day=DAY, external_id=f"ls:{DAY}:12:semantic")
    ContentBlockFactory(parent=DiaryEntryFactory(source_day=DAY), person=sam, tag=BlockTag.NARRATIVE, title="Work")
    text = "I hold 12 new facts. Samples of a day teach me more than any rule; my work is to listen first."

    with scripted({"self-layer": [{"metacognition": text}]}):
        output = self_layer_refresh(_ctx())

    assert output["refused_personal"] == [] and SelfLayerBlock.objects.get(key=SelfBlock.METACOGNITION).content == text


def _chinese_day_told_by_its_date() -> str:
    """A Chinese narrative that starts with the day's date, as the offline light sleep writes them, and a fact holding
    another date (a birthday); returns the narrative."""
    leo = PersonFactory(slug="leo", display_name="李明")
    story = f"{DAY.isoformat()}，李明跟我讲了不少自己的事。我感到担心，也很牵挂。"
    ContentBlockFactory(
        parent=DiaryEntryFactory(source_day=DAY), person=leo, tag=BlockTag.NARRATIVE, title="一次长谈", content=story
    )
    birthday = "李明的生日是1990年5月12日"
    SemanticMemoryFactory(person=leo, content=birthday, source_day=DAY, external_id=f"ls:{DAY}:leo:semantic")
    return story


def test_a_chinese_block_giving_the_days_date_is_no_copy_of_a_narrative_that_starts_with_it(settings):
    settings.ANIMA_COMPANION_LANGUAGE = "zh"
    _chinese_day_told_by_its_date()
    dated = f"{DAY.isoformat()} 的睡眠之后，我把事实和感受分开保存。"
    copied = "我记得：他跟我讲了不少自己的事。"  # eight characters of the narrative in a row
    birthday = "我会记得1990年5月12日这一天。"  # someone's date, not the day's

    answer = {"metacognition": dated, "direction": copied, "personality_baseline": birthday}
    with scripted({"self-layer": [answer]}):
        output = self_layer_refresh(_ctx())

    assert sorted(output["refused_personal"]) == ["direction", "personality_baseline"]
    assert SelfLayerBlock.objects.get(key=SelfBlock.METACOGNITION).content == dated


def test_the_offline_answer_for_such_a_day_is_kept_whole(settings):
    settings.ANIMA_COMPANION_LANGUAGE = "zh"
    story = _chinese_day_told_by_its_date()

    output = self_layer_refresh(_ctx())

    assert output["refused_personal"] == [] and "metacognition" in output["changed"]
    blocks = "\n".join(SelfLayerBlock.objects.values_list("content", flat=True))
    assert DAY.isoformat() in blocks and "李明" not in blocks and story[11:24] not in blocks


# --- One self layer per language in use: a prompt reads the one in its conversation's language -------


def _two_languages_in_use():
    """A mostly-Chinese companion (three Chinese conversations) that also talks English with someone."""
    for _ in range(3):
        MessageFactory(conversation=ConversationFactory(title=""), content="今天上线很顺利，我终于可以休息了。")
    MessageFactory(conversation=ConversationFactory(title=""), content="I passed my Portuguese exam today!")
    _learned_today()


def test_the_nightly_step_writes_each_block_in_every_language_in_use_with_the_offline_provider():
    _two_languages_in_use()

    output = self_layer_refresh(_ctx())

    assert output["languages"] == ["zh", "en"]  # the companion's first
    written = {(b.key, b.language): b.content for b in SelfLayerBlock.objects.exclude(content="")}
    for key in ("existence_anchor", "self_model", "personality_baseline", "direction", "metacognition"):
        assert is_chinese(written[(key, "zh")]) and not is_chinese(written[(key, "en")]), key


def test_a_model_writes_a_language_version_from_the_blocks_another_language_holds():
    _two_languages_in_use()
    SelfLayerBlockFactory(key=SelfBlock.SELF_MODEL, language="zh", content="我记得和我说话的人。")
    answers = [
        {"self_model": "我记得和我说话的人，也记得他们在意的事。"},
        {"self_model": "I remember the people I talk with."},
    ]

    with scripted({"self-layer": answers}) as provider:
        self_layer_refresh(_ctx())

    chinese, english = (call.payload for call in provider.calls)
    assert (chinese["language"], english["language"]) == ("zh", "en")
    assert english["blocks"]["self_model"] == "" and english["other_language"]["self_model"].startswith("我记得")
    versions = dict(SelfLayerBlock.objects.filter(key=SelfBlock.SELF_MODEL).values_list("language", "content"))
    assert versions == {"zh": answers[0]["self_model"], "en": answers[1]["self_model"]}
