from __future__ import annotations

import datetime as dt
import json

import pytest
from django.utils import timezone
from hypothesis import given, settings
from hypothesis import strategies as st

from anima.agent.tools import tool_call
from anima.agent.turn import prepare_turn
from anima.api.testing import api_client, operator_client
from anima.core.llm.testing import scripted
from anima.core.models import BlockTag
from anima.core.segmentation import text_traditional
from anima.core.text import is_chinese
from conversations.models import Role
from memory.forgetting_person import person_forget
from memory.models import DreamBlock
from memory.selectors import memory_recall
from sleep.context import StepContext
from sleep.offline.dream import dream_answer
from sleep.steps import dream
from tests.factories import (
    ContentBlockFactory,
    ConversationFactory,
    DiaryEntryFactory,
    IdentityFactory,
    MessageFactory,
    PersonFactory,
    SemanticMemoryFactory,
)

DAY = dt.date(2026, 11, 26)


def _ctx() -> StepContext:
    return StepContext(run_id=0, day=DAY, mode="full", force=False, run_key="test", token_budget=None)


def _anchor(intensity: float, content: str = "我感到担心：Leo 说上线前很焦虑"):
    return ContentBlockFactory(
        parent=DiaryEntryFactory(source_day=DAY),
        tag=BlockTag.LIMBIC,
        content=content,
        body={"intensity": intensity, "valence": -0.6, "kind": "conversation_mood"},
    )


def test_the_previous_nights_anchors_do_not_make_a_dream():
    # Written at 02:00 on DAY by the sleep of the day before: created on DAY, but about DAY - 1.
    ContentBlockFactory(
        parent=DiaryEntryFactory(source_day=DAY - dt.timedelta(days=1)),
        tag=BlockTag.LIMBIC,
        content="我感到非常焦虑",
        body={"intensity": 0.9, "valence": -0.8, "kind": "spike"},
        created_at=timezone.make_aware(dt.datetime.combine(DAY, dt.time(2, 5))),
    )
    _anchor(0.4)
    with scripted({}) as provider:
        assert dream(_ctx()) == {"skipped_reason": "no_strong_emotion"}
    assert provider.calls == []


def test_a_calm_day_has_no_dream():
    _anchor(0.4)
    with scripted({}) as provider:
        assert dream(_ctx()) == {"skipped_reason": "no_strong_emotion"}
    assert provider.calls == [] and not DreamBlock.objects.exists()


def test_a_strong_day_dreams_once_in_the_anchors_language():
    _anchor(0.8)
    _anchor(0.35, "我感到有点累")
    MessageFactory(
        role=Role.USER, content="明天晚上产品要上线了", created_at=timezone.make_aware(dt.datetime(2026, 11, 26, 9))
    )

    first = dream(_ctx())
    second = dream(_ctx())

    block = DreamBlock.objects.get()
    assert first["dream_id"] == block.pk
    assert second == {"skipped_reason": "already_dreamed"}
    assert block.parent.source_day == DAY
    assert 300 <= len(block.content) <= 800
    assert is_chinese(block.content)


def test_dream_inputs_are_the_top_three_anchors_and_capped_snippets():
    for intensity in (0.9, 0.7, 0.6, 0.55):
        _anchor(intensity, f"I feel moved {intensity}")
    for minute in range(8):
        MessageFactory(
            role=Role.USER, content="x" * 3000, created_at=timezone.make_aware(dt.datetime(2026, 11, 26, 9, minute))
        )
    answer = {"title": "Upside-down sky", "content": "I dreamed " + "of lanterns " * 100}
    with scripted({"dream": [answer]}) as provider:
        dream(_ctx())

    payload = provider.calls[0].payload
    assert [a["intensity"] for a in payload["anchors"]] == [0.9, 0.7, 0.6]
    assert len(payload["snippets"]) == 5
    assert sum(len(s) for s in payload["snippets"]) <= 4000
    assert len(DreamBlock.objects.get().content) <= 800


@settings(max_examples=60, deadline=None)
@given(
    anchors=st.lists(st.text(min_size=1, max_size=400), min_size=1, max_size=3),
    snippets=st.lists(st.text(max_size=800), max_size=5),
)
def test_offline_dream_is_always_300_to_800_characters(anchors, snippets):
    payload = {
        "day": "2026-11-26",
        "anchors": [{"content": a, "intensity": 0.8} for a in anchors],
        "snippets": snippets,
    }
    content = dream_answer(payload)["content"]
    assert 300 <= len(content) <= 800


def test_offline_dreams_vary_by_night_repeat_for_a_night_and_never_turn_people_into_scenery():
    def night(day: str) -> dict:
        return dream_answer(
            {
                "day": day,
                "anchors": [{"content": 'I feel worried for Maya: they said "the exam is tomorrow".', "valence": -0.6}],
                "memories": ["Maya lives in Lisbon", "Maya plays the cello"],
                "snippets": ["The exam is tomorrow and I can't sleep."],
                "narratives": [],
                "people": ["Maya"],
            }
        )

    week = [night(f"2026-11-0{d}") for d in range(1, 8)]
    assert night("2026-11-01") == week[0]
    openings = {told["content"].split(",")[0] for told in week}
    assert len(openings) >= 3 and len({told["title"] for told in week}) >= 3
    for told in week:
        assert 300 <= len(told["content"]) <= 800
        assert "Maya" not in told["title"]


def test_an_offline_dream_of_a_day_in_traditional_characters_holds_the_things_its_simplified_twin_does():
    def dream(convert) -> dict:
        return dream_answer(
            {
                "day": "2026-11-26",
                "anchors": [{"content": convert("我感到担心：小明说考试的时候脑子一片空白。"), "valence": -0.6}],
                "memories": [convert("小明在准备钢琴考试"), convert("小明养了一只橘猫")],
                "snippets": [convert("那个时候我真的很紧张，钢琴考试的时候手一直在抖。")],
                "narratives": [],
                "people": [convert("小明")],
            }
        )

    simplified, traditional = dream(lambda text: text), dream(text_traditional)

    # The same things of the day (a filler word such as 時候 is none), and no one turned into scenery.
    assert traditional["title"] == simplified["title"] and "时候" not in traditional["title"]
    assert "小明" not in traditional["title"]


# --- Privacy between people: a dream is made of the day's material, which may be several people's ---

LEO_SAID = "My theremin recital at Aldwych is on Friday and I am shaking"
LEO_WORDS = ("Aldwych", "theremin", "recital")
LEO_QUERY = "Aldwych OR theremin OR recital"


def _at(hour: int) -> dt.datetime:
    return timezone.make_aware(dt.datetime.combine(DAY, dt.time(hour)))


def _dream_ids(diary: dict) -> list[int]:
    return [block["id"] for entry in diary["results"] for block in entry["blocks"] if block["tag"] == BlockTag.DREAM]


def _persons_day(person, *, said: str, fact: str, feeling: str, intensity: float):
    """One person's day: a conversation, a fact learned from it and the feeling it left."""
    conversation = ConversationFactory(person=person)
    MessageFactory(conversation=conversation, role=Role.USER, content=said, created_at=_at(9))
    SemanticMemoryFactory(person=person, content=fact, source_day=DAY, source_conversation=conversation)
    ContentBlockFactory(
        parent=DiaryEntryFactory(source_day=DAY),
        tag=BlockTag.LIMBIC,
        person=person,
        source_conversation=conversation,
        content=feeling,
        body={"intensity": intensity, "valence": -0.6, "kind": "conversation_mood"},
    )
    return conversation


@pytest.fixture
def leos_day():
    leo = PersonFactory(slug="leo", display_name="Leo")
    leo_chat = _persons_day(
        leo, said=LEO_SAID, fact="Leo plays the theremin", feeling="I feel nervous for the recital", intensity=0.9
    )
    return leo, leo_chat


@pytest.mark.usefixtures("private_cache")
def test_a_dream_mixing_two_peoples_days_reaches_the_operator_only(leos_day):
    leo, _ = leos_day
    maya = PersonFactory(slug="maya", display_name="Maya")
    maya_chat = _persons_day(
        maya, said="我的考试通过了", fact="Maya collects seashells", feeling="I feel glad about the exam", intensity=0.7
    )

    dream(_ctx())

    told = DreamBlock.objects.get()
    # The dream did take Leo's words (else nothing below could fail)...
    assert "Aldwych" in told.content
    assert sorted(told.body["person_ids"]) == sorted([leo.pk, maya.pk]) and told.person is None
    # ...and the operator's console still reads it.
    operator_diary = str(operator_client().get("/api/diary/").json())
    assert "Aldwych" in operator_diary
    # Nothing of it reaches Maya: recall, the tools, her turn and her token's view of the diary.
    maya_token = api_client(username="maya-app", scope="person", persons=[maya])
    turn = prepare_turn(conversation=maya_chat, user_message=LEO_QUERY, now=_at(12), store=False)
    assert turn[-1]["content"] == LEO_QUERY  # her own question; what Anima adds comes before it
    seen_by_maya = {
        "recall": memory_recall(query=LEO_QUERY, person=maya),
        "recall tool": tool_call(name="memory_recall", arguments={"query": LEO_QUERY, "person": "maya"}),
        "memory tool": tool_call(name="memory", arguments={"action": "recall", "person": "maya", "query": LEO_QUERY}),
        "turn": turn[:-1],
        "api recall": maya_token.get("/api/recall/", {"q": LEO_QUERY}).json(),
        "api diary": maya_token.get("/api/diary/").json(),
        "api tool": maya_token.post("/api/tools/memory_recall/", {"query": LEO_QUERY}, format="json").json(),
    }
    for surface, seen in seen_by_maya.items():
        for word in LEO_WORDS:
            assert word not in str(seen), (surface, word)


def test_a_dream_of_one_persons_day_is_theirs_and_goes_when_they_are_forgotten(leos_day):
    leo, _ = leos_day
    maya = PersonFactory(slug="maya")

    dream(_ctx())

    told = DreamBlock.objects.get()
    assert told.person == leo and told.body["person_ids"] == [leo.pk]
    leos_diary = api_client(username="leo-app", scope="person", persons=[leo]).get("/api/diary/").json()
    mayas_diary = api_client(username="maya-app", scope="person", persons=[maya]).get("/api/diary/").json()
    assert _dream_ids(leos_diary) == [told.pk] and _dream_ids(mayas_diary) == []
    person_forget(person=leo)
    assert not DreamBlock.objects.exists()


def test_a_line_from_someone_unknown_keeps_the_dream_from_every_person(leos_day):
    leo, _ = leos_day
    stranger = ConversationFactory(person=None, chat_id="unmapped-42")
    MessageFactory(
        conversation=stranger, role=Role.USER, content="The lighthouse keeper owes me money", created_at=_at(10)
    )

    dream(_ctx())

    told = DreamBlock.objects.get()
    # Leo's material and a stranger's line: not Leo's alone, so nobody's but the operator's.
    assert told.person is None and told.body["person_ids"] == [leo.pk]
    leos_diary = api_client(username="leo-app", scope="person", persons=[leo]).get("/api/diary/").json()
    assert _dream_ids(leos_diary) == [] and _dream_ids(operator_client().get("/api/diary/").json()) == [told.pk]


def test_a_person_met_through_a_channel_account_is_named_to_the_dream_as_one_to_keep_out(llm_stub):
    leo = PersonFactory(slug="leo", display_name="Leo")
    IdentityFactory(channel="telegram", external_id="tg-7", person=leo)
    chat = ConversationFactory(person=None, platform="telegram", channel="telegram", chat_id="tg-7")
    MessageFactory(conversation=chat, role=Role.USER, content=LEO_SAID, created_at=_at(9))
    ContentBlockFactory(
        parent=DiaryEntryFactory(source_day=DAY),
        tag=BlockTag.LIMBIC,
        source_conversation=chat,
        content="I feel nervous for the recital",
        body={"intensity": 0.9, "valence": -0.6, "kind": "conversation_mood"},
    )
    llm_stub.reply({"title": "Glass stairs", "content": "I walked down glass stairs into a humming sea. " * 8})

    dream(_ctx())

    payload = json.loads(llm_stub.requests[0]["messages"][1]["content"])
    assert payload["people"] == ["Leo"]
    assert DreamBlock.objects.get().person == leo
