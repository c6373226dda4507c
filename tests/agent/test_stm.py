from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.db import ProgrammingError, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kombu.exceptions import OperationalError as KombuOperationalError

from anima.agent.stm import long_term_intent_detect, stm_tool_available, update_short_term_memory
from anima.agent.tasks import short_term_consolidate_task
from anima.agent.turn import SUMMARY_NAME, prepare_turn
from anima.core.config import config_update
from anima.core.db import advisory_lock
from anima.core.llm import LlmTransientError
from anima.core.llm.testing import scripted
from conversations.models import Conversation, HistoryEntry, Role, ShortTermMemory, StmScope
from tests.factories import ConversationFactory, IdentityFactory, MessageFactory, PersonFactory, ShortTermMemoryFactory

pytestmark = pytest.mark.usefixtures("private_cache")


def at(hhmm: str, day: str = "2026-11-28") -> datetime:
    return datetime.fromisoformat(f"{day}T{hhmm}:00+08:00")


def rendered(messages: list[dict]) -> list[str]:
    return [m["content"] for m in messages[1:-1] if m["name"] != "passive_memory_context"]


@pytest.fixture
def chat():
    conversation = ConversationFactory()
    MessageFactory(conversation=conversation, content="Let's plan the Lisbon trip.", created_at=at("09:00"))
    MessageFactory(conversation=conversation, role=Role.ASSISTANT, content="Sure, which dates?", created_at=at("09:01"))
    MessageFactory(conversation=conversation, content="December 3 to 10.", created_at=at("09:02"))
    return conversation


def test_the_summary_replaces_the_covered_messages_on_the_next_turn(chat):
    result = update_short_term_memory(conversation=chat, summary="Planning Lisbon, Dec 3–10.", now=at("09:03"))
    assert result["success"] is True
    MessageFactory(conversation=chat, role=Role.ASSISTANT, content="Noted the dates.", created_at=at("09:04"))

    messages = prepare_turn(conversation=chat, user_message="Hotels?", now=at("09:10"))

    summary = messages[1]
    assert (summary["role"], summary["name"]) == ("assistant", SUMMARY_NAME)
    assert "Planning Lisbon, Dec 3–10." in summary["content"]
    assert rendered(messages)[1:] == ["Noted the dates."]
    assert chat.messages.count() == 5  # written beside the messages, never instead of them


def test_both_scopes_are_written_durably(chat):
    update_short_term_memory(conversation=chat, summary="Planning Lisbon.", now=at("09:03"))

    rows = {row.scope: row for row in ShortTermMemory.objects.filter(conversation=chat)}
    assert set(rows) == {StmScope.USER, StmScope.SERVER}
    assert rows[StmScope.USER].person == chat.person and rows[StmScope.SERVER].person is None
    assert {row.summary for row in rows.values()} == {"Planning Lisbon."}


def test_the_person_scope_follows_identity_resolution():
    maya = PersonFactory(slug="maya")
    IdentityFactory(channel="telegram", external_id="4242", person=maya)
    conversation = ConversationFactory(person=None, channel="telegram", chat_id="4242")
    MessageFactory(conversation=conversation, created_at=at("09:00"))

    update_short_term_memory(conversation=conversation, summary="Maya's exam.", now=at("09:01"))

    assert ShortTermMemory.objects.get(conversation=conversation, scope=StmScope.USER).person == maya


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(summary=st.text(min_size=1, max_size=4000).filter(lambda s: s.replace("\x00", "").strip()))
def test_long_summaries_are_cut_silently_to_the_configured_cap(summary):
    conversation = ConversationFactory()
    MessageFactory(conversation=conversation, created_at=at("09:00"))

    result = update_short_term_memory(conversation=conversation, summary=summary, now=at("09:01"))

    assert result["success"] is True
    stored = ShortTermMemory.objects.get(conversation=conversation, scope=StmScope.SERVER).summary
    assert stored == summary.replace("\x00", "").strip()[:1500]


def test_the_cap_is_configurable(chat):
    config_update(section="stm", values={"max_summary_chars": 100})
    update_short_term_memory(conversation=chat, summary="x" * 300, now=at("09:03"))
    assert len(ShortTermMemory.objects.filter(conversation=chat).first().summary) == 100


def test_at_most_one_successful_call_per_turn(chat):
    assert update_short_term_memory(conversation=chat, summary="first", now=at("09:03"))["success"] is True
    assert not stm_tool_available(conversation=chat)
    again = update_short_term_memory(conversation=chat, summary="second", now=at("09:03"))
    assert again["success"] is False and "already" in again["error"]

    prepare_turn(conversation=chat, user_message="Next question", now=at("09:05"))  # a new user turn
    assert update_short_term_memory(conversation=chat, summary="second", now=at("09:06"))["success"] is True
    assert ShortTermMemory.objects.filter(conversation=chat).first().summary == "second"


def test_explicit_long_term_intent_hides_the_tool(chat):
    assert long_term_intent_detect(text="请记住我女儿属虎") and long_term_intent_detect(
        text="Please remember that I'm vegan"
    )
    assert not long_term_intent_detect(text="Do you remember Lisbon?")
    assert long_term_intent_detect(text="記住，我對花生過敏") and long_term_intent_detect(text="別忘了我女兒屬虎")
    assert long_term_intent_detect(text="Don\u2019t forget my birthday is May 3")  # a phone's apostrophe
    assert not stm_tool_available(conversation=chat, long_term_intent=True)
    result = update_short_term_memory(conversation=chat, summary="x", long_term_intent=True, now=at("09:03"))
    assert result["success"] is False
    assert not ShortTermMemory.objects.exists()


def test_an_empty_summary_is_refused(chat):
    assert update_short_term_memory(conversation=chat, summary="   ", now=at("09:03"))["success"] is False


def test_summaries_live_24_hours_and_raw_messages_12(chat):
    update_short_term_memory(conversation=chat, summary="Planning Lisbon.", now=at("09:03"))
    MessageFactory(conversation=chat, role=Role.ASSISTANT, content="Noted.", created_at=at("09:04"))

    # 20 h later: the summary is live; the raw message after it lapsed in the 12 h silence.
    later = prepare_turn(conversation=chat, user_message="Back!", now=at("05:00", "2026-11-29"), store=False)
    assert later[1]["name"] == SUMMARY_NAME and rendered(later) == [later[1]["content"]]

    # 25 h later: the summary has expired too; nothing of the old session is rendered.
    expired = prepare_turn(conversation=chat, user_message="Back!", now=at("10:00", "2026-11-29"), store=False)
    assert rendered(expired) == []


def test_raw_messages_stay_while_the_conversation_is_active(chat):
    messages = prepare_turn(conversation=chat, user_message="More?", now=at("20:00"))
    assert rendered(messages) == ["Let's plan the Lisbon trip.", "Sure, which dates?", "December 3 to 10."]


def test_consolidation_archives_older_messages_as_history_and_covers_them():
    config_update(section="stm", values={"consolidate_after_messages": 10})
    conversation = ConversationFactory()
    start = at("09:00")
    for i in range(14):
        MessageFactory(
            conversation=conversation,
            role=Role.USER if i % 2 == 0 else Role.ASSISTANT,
            content=f"We compared Lisbon hotel option {i} near the river." if i % 2 == 0 else f"Noted option {i}.",
            created_at=start + timedelta(minutes=i),
        )

    messages = prepare_turn(conversation=conversation, user_message="Which one?", now=at("10:00"))

    assert messages[1]["name"] == SUMMARY_NAME and "Lisbon" in messages[1]["content"]
    assert rendered(messages)[1:] == [m.content for m in conversation.messages.order_by("created_at")[9:14]]
    entries = HistoryEntry.objects.filter(conversation=conversation)
    assert {entry.person for entry in entries} == {None, conversation.person}
    assert all("Lisbon" in entry.content for entry in entries)
    assert conversation.messages.count() == 15  # nothing deleted
    with pytest.raises(ProgrammingError), transaction.atomic():
        entries.update(content="rewritten")


HOTELS = [f"Hotel option {i}." for i in range(14)]


def _past_the_threshold() -> Conversation:
    """A conversation of the 14 raw messages HOTELS, consolidation due after 10."""
    config_update(section="stm", values={"consolidate_after_messages": 10})
    conversation = ConversationFactory()
    for i, content in enumerate(HOTELS):
        MessageFactory(conversation=conversation, content=content, created_at=at("09:00") + timedelta(minutes=i))
    return conversation


DIGEST = {"temporal.chunk": [{"summary": "We compared fourteen hotel options.", "topic": "hotels"}]}


def test_a_turn_finding_its_conversation_being_consolidated_renders_it_raw_and_calls_no_model():
    conversation = _past_the_threshold()
    with scripted(DIGEST) as provider:
        with advisory_lock(f"stm:{conversation.pk}") as held:  # another turn, or a worker, is mid-call
            assert held
            during = prepare_turn(conversation=conversation, user_message="Which one?", now=at("10:00"), store=False)
        assert provider.calls == [] and rendered(during) == HOTELS
        assert not HistoryEntry.objects.filter(conversation=conversation).exists()

        after = prepare_turn(conversation=conversation, user_message="Which one?", now=at("10:01"), store=False)

    assert len(provider.calls) == 1
    assert after[1]["name"] == SUMMARY_NAME and after[1]["content"].endswith("We compared fourteen hotel options.")
    assert rendered(after)[1:] == HOTELS[9:]


@pytest.mark.parametrize(
    "failure",
    [{"summary": "Sure, here is the summary:", "topic": "hotels"}, LlmTransientError("model down")],
    ids=["empty digest", "model down"],
)
def test_a_failed_consolidation_archives_nothing_and_is_tried_again_after_a_while(failure):
    conversation = _past_the_threshold()
    with scripted({"temporal.chunk": [failure]}) as provider:
        first = prepare_turn(conversation=conversation, user_message="Which one?", now=at("10:00"), store=False)
        # The next turns do not ask (and wait for) the model again until stm.retry_after_minutes (10) have passed.
        soon = prepare_turn(conversation=conversation, user_message="Which one?", now=at("10:09"), store=False)
    assert len(provider.calls) == 1
    assert rendered(first) == rendered(soon) == HOTELS
    assert not HistoryEntry.objects.filter(conversation=conversation).exists()

    with scripted(DIGEST):
        then = prepare_turn(conversation=conversation, user_message="Which one?", now=at("10:10"), store=False)
    assert then[1]["content"].endswith("We compared fourteen hotel options.") and rendered(then)[1:] == HOTELS[9:]


def test_with_a_broker_the_turn_hands_consolidation_to_a_worker_and_renders_raw_meanwhile(
    memory_broker, django_capture_on_commit_callbacks
):
    conversation = _past_the_threshold()
    with scripted(DIGEST) as provider:
        # Three turns before a worker gets to it: the conversation is due in each, and one task is sent.
        for minute in ("10:00", "10:01", "10:02"):
            with django_capture_on_commit_callbacks(execute=True):
                messages = prepare_turn(
                    conversation=conversation, user_message="Which one?", now=at(minute), store=False
                )
            assert rendered(messages) == HOTELS
        assert provider.calls == []
        [sent] = memory_broker()
        assert sent == {
            "task": "anima.agent.tasks.short_term_consolidate_task",
            "kwargs": {"conversation_id": conversation.pk, "now": at("10:00").isoformat()},
        }

        # What the worker does with it: consolidated as of the turn, once.
        assert short_term_consolidate_task(**sent["kwargs"])["status"] == "done"
    assert len(provider.calls) == 1
    assert HistoryEntry.objects.filter(conversation=conversation).count() == 2

    # Once the worker is done, the next time the conversation is due a turn sends again.
    for i in range(6):
        MessageFactory(conversation=conversation, content=f"More {i}.", created_at=at("10:10") + timedelta(minutes=i))
    with django_capture_on_commit_callbacks(execute=True):
        prepare_turn(conversation=conversation, user_message="Which one?", now=at("10:20"), store=False)
    assert [message["kwargs"]["now"] for message in memory_broker()] == [at("10:20").isoformat()]


def test_with_the_broker_down_the_turn_still_gets_its_answer(broker_down, django_capture_on_commit_callbacks):
    conversation = _past_the_threshold()
    with scripted(DIGEST) as provider, django_capture_on_commit_callbacks(execute=True) as sent:
        messages = prepare_turn(conversation=conversation, user_message="Which one?", now=at("10:00"), store=False)

    assert len(sent) == 1
    # What the turn was spared: the broker refused the task. Refused, it is not taken for sent: trying again tries.
    with pytest.raises(KombuOperationalError):
        sent[0]()
    assert provider.calls == [] and rendered(messages) == HOTELS


def test_a_conversation_without_a_person_renders_the_server_scope():
    conversation = ConversationFactory(person=None, chat_id="")
    MessageFactory(conversation=conversation, content="Shift swap on Friday.", created_at=at("09:00"))
    ShortTermMemoryFactory(
        conversation=conversation,
        scope=StmScope.USER,
        summary="not this one",
        covers_until=at("09:00"),
        updated_at=at("09:01"),
    )
    ShortTermMemoryFactory(
        conversation=conversation,
        scope=StmScope.SERVER,
        summary="Swapped shifts.",
        covers_until=at("09:00"),
        updated_at=at("09:01"),
    )

    messages = prepare_turn(conversation=conversation, user_message="ok", now=at("09:10"), store=False)

    assert messages[1]["content"].endswith("Swapped shifts.")
    assert rendered(messages) == [messages[1]["content"]]


def test_messages_archived_once_are_never_archived_again_after_the_summary_expires():
    config_update(section="stm", values={"consolidate_after_messages": 10})
    chat = ConversationFactory()
    start = at("09:00")
    for n in range(12):
        MessageFactory(conversation=chat, content=f"early message {n}", created_at=start + timedelta(minutes=n))
    with scripted({"temporal.chunk": [{"summary": f"digest {n}", "topic": "chat"} for n in range(10)]}) as provider:
        moment = start + timedelta(minutes=15)
        prepare_turn(conversation=chat, user_message="first", now=moment, store=False)
        # A message every five hours for 30 hours: the summary expires (24 h) before the raw messages
        # reach the threshold again, and no 12 h silence comes.
        for n in range(6):
            moment += timedelta(hours=5)
            MessageFactory(conversation=chat, content=f"later message {n}", created_at=moment)
            prepare_turn(conversation=chat, user_message="again", now=moment, store=False)
    sent = [turn["content"] for call in provider.calls for turn in call.payload["dialogue"]]
    assert sent and len(sent) == len(set(sent))


def test_a_remember_request_in_the_turn_hides_the_tool_and_routes_a_call_to_long_term_memory(chat):
    assert stm_tool_available(conversation=chat)
    MessageFactory(conversation=chat, content="记住：我女儿对花生过敏。", created_at=at("09:04"))

    assert not stm_tool_available(conversation=chat)
    result = update_short_term_memory(conversation=chat, summary="x", now=at("09:05"))
    assert result["success"] is False and "memory_remember" in result["error"]
    assert not ShortTermMemory.objects.exists()
