from __future__ import annotations

import io
import itertools
import re
from datetime import date, datetime, timedelta

import pytest
from django.core.cache import cache
from django.db import ProgrammingError, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anima.agent import turn
from anima.agent.demo import DEMO_MESSAGE, demo_prepared_turn
from anima.agent.demo import FIXTURES as DEMO_FIXTURES
from anima.agent.turn import PEERS_NAME, prepare_turn
from anima.core.config import config_update
from conversations.models import Message, PeerBlock, Role, StmScope
from conversations.services import conversations_import, identity_map
from memory.imports import memories_import
from memory.models import EmotionalTendency, SelfBlock
from memory.selectors import self_layer_text
from memory.services import emotional_tendencies_refresh
from temporal.tick import temporal_tick_run
from tests.factories import (
    ContentBlockFactory,
    ConversationFactory,
    IdentityFactory,
    LimbicAnchorFactory,
    MessageFactory,
    PeerBlockFactory,
    PersonFactory,
    SelfLayerBlockFactory,
    SemanticMemoryFactory,
    ShortTermMemoryFactory,
    TemporalSummaryFactory,
)

pytestmark = pytest.mark.usefixtures("private_cache")


def summary_of(window: str, start: date, text: str, *, person, who: str = "", topic: str = "topic"):
    """A stored summary with one section owned by ``person``."""
    section = {"conversation_id": None, "person_id": person.pk, "who": who, "topic": topic, "text": text}
    body = {"window": window, "period_start": start.isoformat(), "sections": [section]}
    return TemporalSummaryFactory(source_day=start, content=f"- {text}", body=body)


def at(hhmm: str, day: str = "2026-11-28") -> datetime:
    return datetime.fromisoformat(f"{day}T{hhmm}:00+08:00")


def peers(messages: list[dict]) -> list[dict]:
    return [m for m in messages if m["name"] == PEERS_NAME]


def test_the_autobiography_summary_shows_a_person_only_their_own_and_nobodys_narrative_titles():
    leo, maya = PersonFactory(slug="leo", display_name="Leo"), PersonFactory(slug="maya", display_name="Maya")
    ContentBlockFactory(person=leo, title="Leo's mother's surgery")
    ContentBlockFactory(person=maya, title="Maya's piano recital")
    ContentBlockFactory(person=None, title="A quiet rainy day")
    SelfLayerBlockFactory(
        key=SelfBlock.AUTOBIOGRAPHY_SUMMARY,
        content="## Turning points\n- Leo's mother's surgery\n\n## Milestones\n- Maya's piano recital\n"
        "- A title no narrative has\n\n## Recent narratives\n- A quiet rainy day",
    )

    def self_section(person) -> str:
        system = prepare_turn(conversation=ConversationFactory(person=person), user_message="hi", now=at("10:00"))
        return system[0]["content"].split("## Resident memory")[0]

    for_maya, for_leo, for_stranger = self_section(maya), self_section(leo), self_section(None)

    assert "Maya's piano recital" in for_maya and "A quiet rainy day" in for_maya
    assert "surgery" not in for_maya and "Turning points" not in for_maya
    assert "Leo's mother's surgery" in for_leo and "recital" not in for_leo and "Milestones" not in for_leo
    assert "surgery" not in for_stranger and "recital" not in for_stranger and "A quiet rainy day" in for_stranger
    assert "A title no narrative has" not in for_maya + for_leo + for_stranger  # whose it is is unknown
    assert "Leo's mother's surgery" in self_layer_text() and "A title no narrative has" in self_layer_text()


def test_the_system_prompt_carries_self_resident_person_memory_time_summary_and_the_citation_rule():
    leo = PersonFactory(slug="leo", display_name="Leo")
    SelfLayerBlockFactory(content="I am Anima, a companion who remembers.")
    pinned = SemanticMemoryFactory(person=None, pinned=True, content="Anima 的生日是 3 月 1 日")
    about_leo = SemanticMemoryFactory(person=leo, content="Leo 住在杭州，是软件工程师")
    other = SemanticMemoryFactory(person=PersonFactory(slug="maya"), content="Maya 在学葡萄牙语")
    maya = other.person
    summary_of("day", date(2026, 11, 27), "Leo 的产品上线成功。", person=leo, who="Leo")
    summary_of("day", date(2026, 11, 24), "Maya 计划去里斯本。", person=maya, who="Maya", topic="travel, plans")
    conversation = ConversationFactory(person=leo, title="早安")  # a Chinese conversation: topics in Chinese

    system = prepare_turn(conversation=conversation, user_message="早", now=at("10:00"))[0]

    assert system["role"] == "system"
    text = system["content"]
    assert "I am Anima" in text
    assert f"Anima 的生日是 3 月 1 日 [[anima:{pinned.pk}]]" in text
    assert f"Leo 住在杭州，是软件工程师 [[anima:{about_leo.pk}]]" in text
    assert other.content not in text
    assert "## 时间摘要" in text
    assert (
        text.index("### 昨天")
        < text.index("Leo 的产品上线成功")
        < text.index("### 近 7 天")
        < text.index("Maya: 旅行、计划")
    )
    assert "里斯本" not in text  # Maya's own words stay hers: Leo's prompt has her topic line only
    assert "[[anima:ID]]" in text  # the citation rule


def test_the_system_prompt_is_a_snapshot_until_the_next_0200_boundary():
    conversation = ConversationFactory()
    first = prepare_turn(conversation=conversation, user_message="hi", now=at("10:00"))[0]["content"]
    added = SemanticMemoryFactory(person=None, pinned=True, content="The launch date is December 3")

    assert prepare_turn(conversation=conversation, user_message="hi", now=at("23:00"))[0]["content"] == first
    late = prepare_turn(conversation=conversation, user_message="hi", now=at("01:59", "2026-11-29"))[0]["content"]
    assert late == first

    rebuilt = prepare_turn(conversation=conversation, user_message="hi", now=at("02:05", "2026-11-29"))[0]["content"]
    assert f"[[anima:{added.pk}]]" in rebuilt
    conversation.refresh_from_db()
    assert conversation.system_prompt == rebuilt
    assert conversation.system_prompt_built_at == at("02:05", "2026-11-29")


def test_history_then_passive_recall_right_before_the_user_message_which_is_stored():
    leo = PersonFactory(slug="leo")
    conversation = ConversationFactory(person=leo)
    MessageFactory(conversation=conversation, content="早上好", created_at=at("09:00"))
    MessageFactory(conversation=conversation, role=Role.ASSISTANT, content="早上好，Leo！", created_at=at("09:01"))
    prepare_turn(conversation=conversation, user_message="早上好", now=at("09:02"), store=False)  # the snapshot
    # Learnt after the system prompt was built: only passive recall can bring it into this turn.
    fact = SemanticMemoryFactory(person=leo, content="Leo 的猫叫 Miso，是一只橘猫")

    messages = prepare_turn(conversation=conversation, user_message="我的猫叫什么名字？", now=at("09:05"))

    assert f"[[anima:{fact.pk}]]" not in messages[0]["content"]
    assert [(m["role"], m["content"]) for m in messages[1:3]] == [("user", "早上好"), ("assistant", "早上好，Leo！")]
    passive, user = messages[-2:]
    assert passive["role"] == "assistant" and passive["name"] == "passive_memory_context"
    assert f"[[anima:{fact.pk}]]" in passive["content"]
    assert user == {"role": "user", "name": "", "content": "我的猫叫什么名字？"}
    stored = conversation.messages.order_by("-created_at").first()
    assert (stored.content, stored.created_at) == ("我的猫叫什么名字？", at("09:05"))


def test_passive_recall_reads_the_message_after_the_turn_it_answers():
    leo = PersonFactory(slug="leo")
    conversation = ConversationFactory(person=leo)
    prepare_turn(conversation=conversation, user_message="hi", now=at("09:00"), store=False)  # the snapshot
    fact = SemanticMemoryFactory(person=leo, content="Leo's grandmother had knee surgery last month")
    MessageFactory(
        conversation=conversation,
        role=Role.ASSISTANT,
        content="How is your grandmother's knee since the surgery?",
        created_at=at("09:01"),
    )
    answer = "Much better, she walks on her own again!"

    alone = prepare_turn(conversation=ConversationFactory(person=leo), user_message=answer, store=False)
    messages = prepare_turn(conversation=conversation, user_message=answer, now=at("09:02"), store=False)

    assert all(message["name"] != "passive_memory_context" for message in alone)
    assert messages[-2]["name"] == "passive_memory_context"
    assert f"[[anima:{fact.pk}]]" in messages[-2]["content"]


def test_no_store_leaves_the_conversation_untouched():
    conversation = ConversationFactory()
    prepare_turn(conversation=conversation, user_message="just looking", now=at("09:05"), store=False)
    assert not conversation.messages.exists()


def _busy_morning():
    """Viewer talks at 10:10 and 10:40; two peers talk in the 10:00 bucket, one of them twice."""
    viewer = ConversationFactory()
    MessageFactory(conversation=viewer, content="viewer early", created_at=at("10:10"))
    MessageFactory(conversation=viewer, content="viewer late", created_at=at("10:40"))
    maya, leo = ConversationFactory(), ConversationFactory()
    MessageFactory(conversation=maya, content="Maya planned the Lisbon trip itinerary.", created_at=at("10:02"))
    temporal_tick_run(at=at("10:15"))
    MessageFactory(conversation=maya, content="Maya booked the Lisbon hotel by the river.", created_at=at("10:20"))
    MessageFactory(conversation=leo, content="Leo finished the payment migration checklist.", created_at=at("10:25"))
    temporal_tick_run(at=at("10:30"))
    return viewer, maya, leo


def test_one_merged_peer_block_per_closed_bucket_placed_at_the_bucket_end():
    viewer, maya, _ = _busy_morning()
    maya.refresh_from_db()
    assert len(maya.temporal_day["chunks"]) == 2  # two raw chunks in one bucket…

    messages = prepare_turn(conversation=viewer, user_message="now?", now=at("10:45"))

    [block] = peers(messages)  # …rendered as one block, never side by side
    assert block["role"] == "assistant"
    assert "travel" in block["content"] and "money" in block["content"]  # their topics, never their words
    assert "Lisbon" not in block["content"] and "payment" not in block["content"]
    order = [m["content"] if m["name"] != PEERS_NAME else "PEERS" for m in messages[1:]]
    # "viewer late" (10:40) is older than the block's first showing (10:45): the block never
    # lands before a message that may already have been sent without it.
    assert order == ["viewer early", "viewer late", "PEERS", "now?"]
    assert "viewer" not in block["content"]  # the viewer's own chunk is not a peer


def test_a_turn_right_after_the_tick_shows_the_block_at_the_bucket_end():
    viewer = ConversationFactory()
    MessageFactory(conversation=viewer, content="viewer early", created_at=at("10:10"))
    MessageFactory(conversation=ConversationFactory(), content="Maya booked the Lisbon hotel.", created_at=at("10:20"))
    temporal_tick_run(at=at("10:30"))

    messages = prepare_turn(conversation=viewer, user_message="now?", now=at("10:31"))

    order = [m["content"] if m["name"] != PEERS_NAME else "PEERS" for m in messages[1:]]
    assert order == ["viewer early", "PEERS", "now?"]


def test_a_turn_before_the_tick_does_not_freeze_the_bucket_empty():
    viewer = ConversationFactory()
    MessageFactory(conversation=ConversationFactory(), content="Maya booked the Lisbon hotel.", created_at=at("10:20"))
    temporal_tick_run(at=at("10:00"))
    first = prepare_turn(conversation=viewer, user_message="still there?", now=at("10:30") + timedelta(seconds=5))
    assert peers(first) == []  # the 10:00 bucket has closed, but no tick has summarised it yet

    temporal_tick_run(at=at("10:30"))  # the beat's 10:30 tick, finishing after that turn
    second = prepare_turn(conversation=viewer, user_message="and now?", now=at("10:45"))

    [block] = peers(second)
    assert "travel" in block["content"]
    sent = [m for m in first if m["name"] != "passive_memory_context"]
    assert second[: len(sent)] == sent  # what was sent stays a byte-identical prefix


def test_peers_are_never_in_the_system_prompt():
    viewer, _, _ = _busy_morning()
    messages = prepare_turn(conversation=viewer, user_message="now?", now=at("10:45"))
    assert "Lisbon" not in messages[0]["content"] and "payment" not in messages[0]["content"]


def test_an_open_bucket_has_no_block_yet():
    viewer, _, _ = _busy_morning()
    assert peers(prepare_turn(conversation=viewer, user_message="now?", now=at("10:29"), store=False)) == []


def test_older_buckets_are_never_rewritten():
    viewer, maya, _ = _busy_morning()
    before = peers(prepare_turn(conversation=viewer, user_message="now?", now=at("10:45")))
    # A late chunk lands in the already-rendered 10:00 bucket, and new activity opens 11:00.
    late = ConversationFactory()
    late.temporal_day = {
        "cst_date": "2026-11-28",
        "chunks": [{"at": "2026-11-28T10:50:00+08:00", "bucket": "2026-11-28T10:00+08:00", "summary": "Late news."}],
    }
    late.save()
    MessageFactory(conversation=maya, content="Maya packed her luggage for Lisbon.", created_at=at("11:10"))
    temporal_tick_run(at=at("11:30"))

    after = peers(prepare_turn(conversation=viewer, user_message="and now?", now=at("11:35")))

    assert after[0] == before[0]
    assert "Late news" not in after[0]["content"]
    assert len(after) == 2 and "travel" in after[1]["content"]
    with pytest.raises(ProgrammingError, match="Cannot update"), transaction.atomic():
        PeerBlock.objects.filter(conversation=viewer).update(content="rewritten")


# --- KV-cache stability property ---------------------------------------------------------------

_days = itertools.count()
_words = st.sampled_from(
    [
        "Maya planned the Lisbon trip itinerary.",
        "The payment migration finished without errors.",
        "Booked a hotel near the river.",
        "我的猫 Miso 今天去看了兽医。",
        "明天晚上产品就要上线了。",
        "The exam moved to Friday afternoon.",
    ]
)
_step = st.one_of(
    st.tuples(st.just("peer"), st.integers(0, 2), st.lists(_words, min_size=1, max_size=3)),
    st.tuples(st.just("tick"), st.just(0), st.just([])),
    st.tuples(st.just("turn"), st.just(0), st.lists(_words, min_size=1, max_size=3)),
    # The cache is lost (Redis restart) and an operator changes the rollup cap: re-merged text differs.
    st.tuples(st.just("evict"), st.integers(50, 120), st.just([])),
)


def _runtime_tail(messages: list[dict]) -> int:
    return 2 if len(messages) > 1 and messages[-2]["name"] == "passive_memory_context" else 1


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(_step, st.sampled_from([0, 1, 7, 29, 30, 31, 45])), min_size=4, max_size=16))
def test_the_prefix_already_sent_stays_byte_identical(steps):
    # A fresh day per example keeps examples apart (they share one database).
    day = (date(2030, 1, 1) + timedelta(days=next(_days))).isoformat()
    config_update(section="memory.temporal_summary", values={"peer_rollup_chars": 500})
    SemanticMemoryFactory(person=None, content="Miso 是 Leo 的猫，Lisbon trip in December")
    viewer = ConversationFactory()
    others = ConversationFactory.create_batch(3)
    now = at("08:00", day)
    previous: list[dict] | None = None
    for (kind, index, words), minutes in steps:
        now += timedelta(minutes=minutes)
        if now >= at("23:59", day):
            break
        if kind == "peer":
            MessageFactory(conversation=others[index], content=" ".join(words), created_at=now)
        elif kind == "tick":
            temporal_tick_run(at=now)
        elif kind == "evict":
            cache.clear()
            config_update(section="memory.temporal_summary", values={"peer_rollup_chars": index})
        else:
            messages = prepare_turn(conversation=viewer, user_message=" ".join(words), now=now)
            MessageFactory(conversation=viewer, role=Role.ASSISTANT, content="ok: " + " ".join(words), created_at=now)
            if previous is not None:
                prefix = previous[: -_runtime_tail(previous)]
                assert messages[: len(prefix)] == prefix
            previous = messages


def test_a_stored_block_is_what_renders_whatever_the_peers_did_since():
    viewer, _, _ = _busy_morning()
    PeerBlockFactory(conversation=viewer, bucket=at("10:00"), content="Other conversations 10:00–10:30: as first shown")

    [block] = peers(prepare_turn(conversation=viewer, user_message="now?", now=at("10:45")))

    assert block["content"] == "Other conversations 10:00–10:30: as first shown"


def test_the_demo_prints_a_prepared_turn_with_peers_and_passive_recall():
    for name, importer in (("conversations.jsonl", conversations_import), ("memories.jsonl", memories_import)):
        with (DEMO_FIXTURES / name).open(encoding="utf-8") as handle:
            importer(lines=handle)
    out = io.StringIO()

    demo_prepared_turn(stdout=out)

    text = out.getvalue()
    assert "(temporal_summary_peers)" in text and "Maya" in text
    assert "小雨" in text
    # Every fact shows once: passive recall leaves out what the system prompt already holds.
    cited = re.findall(r"\[\[anima:(\d+)\]\]", text)
    assert cited and len(cited) == len(set(cited))
    assert text.rstrip().endswith(DEMO_MESSAGE)
    assert not Message.objects.filter(content=DEMO_MESSAGE).exists()


def test_the_time_summary_section_rolls_from_yesterday_back_to_years_and_is_capped():
    conversation = ConversationFactory()

    def summary(window: str, start: date, content: str):
        return summary_of(window, start, content, person=conversation.person)

    summary("day", date(2026, 11, 28), "today is not summarised yet")
    summary("day", date(2026, 11, 10), "day −18")
    summary("month", date(2026, 10, 1), "October")
    summary("month", date(2026, 5, 1), "May")
    summary("year", date(2024, 1, 1), "Year 2024")
    summary("year", date(2026, 1, 1), "this year so far")

    system = prepare_turn(conversation=conversation, user_message="hi", now=at("10:00"))[0]["content"]

    assert "today is not summarised yet" not in system and "this year so far" not in system
    # An English conversation: English headings.
    order = ["## Time summaries", "### Last 30 days", "- 2026-11-10:\n  - day −18", "### Last 90 days"]
    order += ["- 2026-10:\n  - October", "### Last year", "- 2026-05:\n  - May"]
    order += ["### Earlier", "- 2024:\n  - Year 2024"]
    assert [system.index(part) for part in order] == sorted(system.index(part) for part in order)

    summary("day", date(2026, 11, 29), "长" * 9000)
    rebuilt = prepare_turn(conversation=conversation, user_message="hi", now=at("03:00", "2026-11-30"))[0]["content"]
    section = rebuilt[rebuilt.index("## Time summaries") : rebuilt.index("## Memory citations")]
    assert 5000 < len(section.strip()) <= 6000


def test_yesterdays_blocks_stay_until_the_0200_rebuild():
    viewer, _, _ = _busy_morning()
    evening = prepare_turn(conversation=viewer, user_message="late", now=at("23:50"))

    after_midnight = prepare_turn(conversation=viewer, user_message="later", now=at("00:40", "2026-11-29"))
    prefix = evening[: -_runtime_tail(evening)]
    assert after_midnight[: len(prefix)] == prefix and peers(prefix)

    next_morning = prepare_turn(conversation=viewer, user_message="morning", now=at("02:10", "2026-11-29"))
    assert peers(next_morning) == []


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=300))
def test_any_user_message_assembles_and_ends_the_list_verbatim(text):
    conversation = ConversationFactory()
    messages = prepare_turn(conversation=conversation, user_message=text, now=at("12:00"), store=False)
    assert messages[-1] == {"role": "user", "name": "", "content": text}


def test_a_conversation_whose_human_is_unknown_sees_no_one_s_private_memories():
    leo = PersonFactory(slug="leo-private")
    SemanticMemoryFactory(person=leo, content="Leo 的邮箱是 leo@example.com", pinned=True)
    SemanticMemoryFactory(person=None, content="I prefer concise, direct expression", pinned=True)
    stranger = ConversationFactory(person=None, chat_id="unmapped-account", channel="web")
    messages = prepare_turn(conversation=stranger, user_message="你的邮箱是啥？ leo@example.com", store=False)
    everything = "\n".join(message["content"] for message in messages[:-1])
    assert "concise, direct expression" in everything
    assert "leo@example.com" not in everything


def test_blocks_of_buckets_the_summary_covers_stay_out_even_when_first_shown_late():
    viewer = ConversationFactory()
    MessageFactory(conversation=viewer, content="viewer early", created_at=at("10:10"))
    MessageFactory(conversation=ConversationFactory(), content="Maya booked the Lisbon hotel.", created_at=at("10:20"))
    temporal_tick_run(at=at("10:30"))
    ShortTermMemoryFactory(
        conversation=viewer, scope=StmScope.USER, summary="We talked about the morning.", covers_until=at("11:00")
    )

    messages = prepare_turn(conversation=viewer, user_message="later", now=at("11:45"), store=False)

    assert peers(messages) == []  # the 10:00 bucket lies inside what the summary stands for


def _feelings(person, first: date, days: int, valence: float, arousal: float) -> None:
    # Usual days vary a little, as real ones do.
    for offset in range(days):
        wobble = (offset % 3 - 1) * 0.05
        LimbicAnchorFactory(
            person=person, day=first + timedelta(days=offset), valence=valence + wobble, arousal=arousal - wobble
        )


def _a_stressed_week(person, *, said: str, last: date):
    """A conversation of ``person``'s, a usual month of feelings, then a week of stress up to ``last``, summed up."""
    conversation = ConversationFactory(person=person)
    MessageFactory(conversation=conversation, role=Role.USER, content=said)
    _feelings(person, last - timedelta(days=29), 23, valence=0.6, arousal=0.3)
    _feelings(person, last - timedelta(days=6), 7, valence=-0.5, arousal=0.7)
    emotional_tendencies_refresh(day=last)
    return conversation


def test_a_tendency_line_appears_after_a_run_of_sad_days_and_disappears_after_happy_ones():
    leo = PersonFactory(slug="leo", display_name="Leo")
    last_sad = date(2026, 11, 20)
    conversation = _a_stressed_week(leo, said="Work has been a lot lately.", last=last_sad)

    after_sad = prepare_turn(conversation=conversation, user_message="hi", now=at("10:00", "2026-11-21"))

    assert "Leo has seemed more stressed than usual this week." in after_sad[0]["content"]

    _feelings(leo, last_sad + timedelta(days=1), 7, valence=0.6, arousal=0.3)
    emotional_tendencies_refresh(day=last_sad + timedelta(days=7))

    after_happy = prepare_turn(conversation=conversation, user_message="hi", now=at("10:00", "2026-11-28"))

    assert "this week" not in after_happy[0]["content"]
    assert "than usual" not in after_happy[0]["content"]


def test_the_tendency_line_is_in_the_conversations_language_and_changes_the_prefix_once_a_day():
    leo = PersonFactory(slug="leo", display_name="Leo")
    conversation = ConversationFactory(person=leo)
    MessageFactory(conversation=conversation, role=Role.USER, content="最近工作压力好大，天天加班")
    day = date(2026, 11, 20)
    _feelings(leo, day - timedelta(days=29), 23, valence=0.6, arousal=0.3)
    morning = prepare_turn(conversation=conversation, user_message="早", now=at("09:00", "2026-11-21"))
    _feelings(leo, day - timedelta(days=6), 7, valence=-0.5, arousal=0.7)
    emotional_tendencies_refresh(day=day)  # a late (or re-run) night's step, after today's snapshot

    noon = prepare_turn(conversation=conversation, user_message="在吗", now=at("12:00", "2026-11-21"))
    next_day = prepare_turn(conversation=conversation, user_message="早", now=at("09:00", "2026-11-22"))

    assert noon[0]["content"] == morning[0]["content"]  # the snapshot stands until the next 02:00
    assert "这一周 Leo 似乎比平时压力更大。" in next_day[0]["content"]


def test_in_a_conversation_written_in_traditional_characters_the_tendency_line_is_too_and_the_name_as_written():
    yu = PersonFactory(slug="yu", display_name="于小明")
    conversation = _a_stressed_week(yu, said="最近工作壓力好大，天天加班", last=date(2026, 11, 20))

    system = prepare_turn(conversation=conversation, user_message="早安", now=at("09:00", "2026-11-21"))[0]["content"]

    assert "這一週于小明似乎比平時壓力更大。" in system


def test_a_conversation_carries_only_its_own_persons_tendency():
    leo = PersonFactory(slug="leo", display_name="Leo")
    maya = PersonFactory(slug="maya", display_name="Maya")
    day = date(2026, 11, 20)
    for person in (leo, maya):
        _feelings(person, day - timedelta(days=29), 23, valence=0.6, arousal=0.3)
    _feelings(leo, day - timedelta(days=6), 7, valence=-0.5, arousal=0.7)
    _feelings(maya, day - timedelta(days=6), 7, valence=0.6, arousal=0.3)
    emotional_tendencies_refresh(day=day)
    now = at("10:00", "2026-11-21")

    maya_prompt = prepare_turn(conversation=ConversationFactory(person=maya), user_message="hi", now=now)[0]
    nobodys_prompt = prepare_turn(conversation=ConversationFactory(person=None), user_message="hi", now=now)[0]

    assert EmotionalTendency.objects.get(person=None, day=day).mood  # everyone's week did move
    for prompt in (maya_prompt, nobodys_prompt):
        assert "than usual" not in prompt["content"]
        assert "Leo" not in prompt["content"]


@pytest.mark.parametrize("first_turn", [None, at("10:00", "2026-11-27")], ids=["first", "after-0200"])
def test_a_snapshot_built_for_a_person_who_changed_meanwhile_is_never_stored_or_shown(monkeypatch, first_turn):
    leo, maya = PersonFactory(slug="leo", display_name="Leo"), PersonFactory(slug="maya", display_name="Maya")
    SemanticMemoryFactory(person=leo, content="Leo's cat is called Miso")
    SemanticMemoryFactory(person=maya, content="Maya works night shifts as a nurse")
    IdentityFactory(channel="telegram", external_id="42", person=leo)
    conversation = ConversationFactory(person=None, platform="telegram", channel="telegram", chat_id="42")
    if first_turn is not None:  # yesterday's snapshot, due for its rebuild
        prepare_turn(conversation=conversation, user_message="hi", now=first_turn, store=False)
    build = turn.system_prompt_build

    def remapped_while_building(**kwargs) -> str:
        prompt = build(**kwargs)
        if "Miso" in prompt:  # another request maps the account to Maya while this turn builds Leo's
            identity_map(channel="telegram", external_id="42", person_slug="maya")
        return prompt

    monkeypatch.setattr(turn, "system_prompt_build", remapped_while_building)
    system = prepare_turn(conversation=conversation, user_message="hi", now=at("10:00"), store=False)[0]["content"]

    conversation.refresh_from_db()
    assert "## About Maya" in system and "Miso" not in system
    assert conversation.system_prompt == system
