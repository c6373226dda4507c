from __future__ import annotations

import io
import json
import threading
import time
from datetime import datetime

import pytest
from django.core.management import call_command
from django.db import connection

from anima.core.config import config_update
from anima.core.llm import LlmTransientError
from anima.core.llm.providers import Completion, provider_override
from anima.core.llm.testing import scripted
from anima.core.models import AutoLlmRun
from conversations.models import Conversation, Platform, Role
from temporal.privacy import TOPIC_RULE
from temporal.services import summary_clean
from temporal.tasks import temporal_tick
from temporal.tick import temporal_tick_run
from tests.factories import ConversationFactory, MessageFactory

pytestmark = pytest.mark.usefixtures("private_cache")


def at(hhmm: str, day: str = "2026-11-28") -> datetime:
    return datetime.fromisoformat(f"{day}T{hhmm}:00+08:00")


def chunks_of(conversation: Conversation) -> list[dict]:
    conversation.refresh_from_db()
    return conversation.temporal_day.get("chunks", [])


def test_a_tick_appends_one_chunk_per_conversation_and_never_changes_it():
    conversation = ConversationFactory()
    MessageFactory(
        conversation=conversation, content="明天晚上产品上线，我负责支付模块的迁移。", created_at=at("10:05")
    )
    last = MessageFactory(
        conversation=conversation, role=Role.ASSISTANT, content="需要我帮你列个检查清单吗？", created_at=at("10:06")
    )

    result = temporal_tick_run(at=at("10:30"))

    assert result["chunks_written"] == 1
    conversation.refresh_from_db()
    assert conversation.temporal_day["cst_date"] == "2026-11-28"
    [chunk] = conversation.temporal_day["chunks"]
    assert chunk["bucket"] == "2026-11-28T10:00+08:00"
    assert chunk["watermark_message_id"] == str(last.pk)
    assert datetime.fromisoformat(chunk["watermark_at"]) == last.created_at
    assert datetime.fromisoformat(chunk["at"]) == at("10:30")
    assert "支付" in chunk["summary"] and len(chunk["summary"]) <= 400

    # Nothing new: no chunk.
    assert temporal_tick_run(at=at("11:00"))["chunks_written"] == 0
    assert chunks_of(conversation) == [chunk]

    MessageFactory(
        conversation=conversation, content="检查清单做好了，支付迁移的回滚方案也准备了。", created_at=at("11:10")
    )
    temporal_tick_run(at=at("11:30"))
    first, second = chunks_of(conversation)
    assert first == chunk
    assert second["bucket"] == "2026-11-28T11:00+08:00"
    assert "回滚" in second["summary"]


def test_a_new_local_day_starts_a_new_list():
    conversation = ConversationFactory()
    MessageFactory(
        conversation=conversation, content="We planned the Lisbon trip itinerary today.", created_at=at("22:10")
    )
    temporal_tick_run(at=at("22:30"))
    MessageFactory(
        conversation=conversation,
        content="Booked the Lisbon hotel near the river this morning.",
        created_at=at("08:05", "2026-11-29"),
    )

    temporal_tick_run(at=at("08:30", "2026-11-29"))

    conversation.refresh_from_db()
    assert conversation.temporal_day["cst_date"] == "2026-11-29"
    [chunk] = conversation.temporal_day["chunks"]
    assert "hotel" in chunk["summary"] and "itinerary" not in chunk["summary"]


def test_the_midnight_tick_closes_yesterdays_last_bucket():
    conversation = ConversationFactory()
    MessageFactory(
        conversation=conversation, content="Late night debugging of the payment service.", created_at=at("23:40")
    )

    temporal_tick_run(at=at("00:00", "2026-11-29"))

    conversation.refresh_from_db()
    assert conversation.temporal_day["cst_date"] == "2026-11-28"
    assert conversation.temporal_day["chunks"][0]["bucket"] == "2026-11-28T23:30+08:00"


def test_cron_conversations_get_no_chunks():
    cron = ConversationFactory(platform=Platform.CRON, person=None)
    MessageFactory(conversation=cron, content="nightly backup finished without errors", created_at=at("03:00"))

    assert temporal_tick_run(at=at("03:30"))["conversations"] == 0
    assert chunks_of(cron) == []


def test_preambles_are_stripped_and_the_cap_holds():
    config_update(section="memory.temporal_summary", values={"chunk_chars": 60})
    conversation = ConversationFactory()
    MessageFactory(conversation=conversation, content="聊了上线", created_at=at("09:00"))
    answer = "好的，" + "今天讨论了产品上线的准备工作和支付迁移的风险。" * 5
    with scripted({"temporal.chunk": [{"summary": answer, "topic": "工作"}]}):
        temporal_tick_run(at=at("09:30"))

    [chunk] = chunks_of(conversation)
    assert chunk["summary"].startswith("今天讨论了")
    assert len(chunk["summary"]) <= 60
    assert chunk["topic"] == "work"


def test_a_chunks_topic_line_is_themes_of_the_closed_vocabulary_whatever_the_model_says():
    conversation = ConversationFactory()
    said = "顺便记一下，我的邮箱是 leo@example.com，电话 13800138000，明天去医院复查。"
    MessageFactory(conversation=conversation, content=said, created_at=at("09:00"))
    leaky = "Leo 留下邮箱 ｌｅｏ＠ｅｘａｍｐｌｅ．ｃｏｍ 和电话 one three eight, zero zero one three"
    with scripted({"temporal.chunk": [{"summary": said, "topic": leaky}]}) as provider:
        temporal_tick_run(at=at("09:30"))
    MessageFactory(conversation=conversation, content=said, created_at=at("09:40"))
    with scripted({"temporal.chunk": [{"summary": said, "topic": "Work, 健康, leo at example dot com"}]}):
        temporal_tick_run(at=at("10:00"))

    first, second = (chunk["topic"] for chunk in chunks_of(conversation))
    assert first == "health, plans"  # nothing of the model's line maps: the themes of the messages
    assert second == "work, health"  # the vocabulary names the model gave, and nothing else
    # The model is asked for the same closed vocabulary as the day summaries.
    assert TOPIC_RULE in provider.calls[0].messages[0]["content"]


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("Sure, here is the summary: Leo prepared the launch.", "Leo prepared the launch."),
        ("收到。Leo 准备了上线。", "Leo 准备了上线。"),
        ("好友聚会改到周六。", "好友聚会改到周六。"),
        ("Leo\x00 prepared the launch.", "Leo prepared the launch."),
    ],
)
def test_summary_clean_strips_only_acknowledgements(raw, clean):
    assert summary_clean(raw, max_chars=400) == clean


def test_without_an_llm_answer_the_messages_wait_for_the_next_tick():
    conversation = ConversationFactory()
    message = MessageFactory(conversation=conversation, content="The exam moved to Friday.", created_at=at("14:05"))
    with scripted({"temporal.chunk": [LlmTransientError("model down")]}):
        assert temporal_tick_run(at=at("14:30"))["failed"] == 1
    assert chunks_of(conversation) == []

    temporal_tick_run(at=at("15:00"))
    [chunk] = chunks_of(conversation)
    assert chunk["watermark_message_id"] == str(message.pk)


@pytest.mark.parametrize("empty", ["", "   ", "好的，", "Sure, here is the summary:"])
def test_an_empty_digest_is_no_answer_and_the_messages_wait_for_the_next_tick(empty):
    conversation = ConversationFactory()
    message = MessageFactory(conversation=conversation, content="The exam moved to Friday.", created_at=at("14:05"))
    with scripted({"temporal.chunk": [{"summary": empty, "topic": "exam"}]}):
        assert temporal_tick_run(at=at("14:30"))["failed"] == 1
    assert chunks_of(conversation) == []

    temporal_tick_run(at=at("15:00"))
    [chunk] = chunks_of(conversation)
    assert chunk["summary"] and chunk["watermark_message_id"] == str(message.pk)


def test_the_command_runs_on_a_simulated_clock():
    conversation = ConversationFactory()
    MessageFactory(conversation=conversation, content="Miso the cat went to the vet today.", created_at=at("16:10"))
    out = io.StringIO()

    call_command("temporal_tick", "--at", "2026-11-28T16:30", stdout=out)

    assert json.loads(out.getvalue())["chunks_written"] == 1
    assert chunks_of(conversation)[0]["bucket"] == "2026-11-28T16:00+08:00"


class SlowProvider:
    """Answers every chunk slowly, so two ticks really overlap on the same conversations."""

    name = model = "slow"
    dialect = "none"

    def complete(self, *, request) -> Completion:
        time.sleep(0.05)
        if request.purpose != "temporal.chunk":
            return Completion(text=json.dumps({"summary": "peers"}), model="slow")
        count = len(request.payload["dialogue"])
        return Completion(text=json.dumps({"summary": f"{count} messages discussed", "topic": "chat"}), model="slow")


def _two_ticks_at_once(moment: datetime) -> None:
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait()
            temporal_tick_run(at=moment)
        except BaseException as exc:  # noqa: BLE001 — surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_ticks_neither_duplicate_nor_lose_chunks():
    conversations = ConversationFactory.create_batch(6)
    for conversation in conversations:
        MessageFactory.create_batch(2, conversation=conversation, created_at=at("10:05"))

    with provider_override(SlowProvider()):
        _two_ticks_at_once(at("10:30"))
        for conversation in conversations:
            MessageFactory(conversation=conversation, created_at=at("10:40"))
        _two_ticks_at_once(at("11:00"))

    # Each conversation was digested exactly once per round: no tick duplicated another's work.
    assert AutoLlmRun.objects.filter(purpose="temporal.chunk").count() == 2 * len(conversations)
    for conversation in conversations:
        chunks = chunks_of(conversation)
        assert [chunk["summary"] for chunk in chunks] == ["2 messages discussed", "1 messages discussed"]
        newest = conversation.messages.order_by("-created_at", "-pk").first()
        assert chunks[-1]["watermark_message_id"] == str(newest.pk)


def test_the_scheduled_celery_task_runs_a_tick_now():
    conversation = ConversationFactory()
    message = MessageFactory(conversation=conversation, content="The quarterly report went out this morning.")

    assert temporal_tick.name == "temporal.tasks.temporal_tick"  # what the beat schedule calls
    result = temporal_tick.delay().get()

    assert result["chunks_written"] == 1
    assert chunks_of(conversation)[0]["watermark_message_id"] == str(message.pk)
