from __future__ import annotations

import io
import json
from datetime import datetime

import pytest
from django.core.management import CommandError, call_command

from conversations.models import Role
from temporal.tick import temporal_tick_run
from tests.factories import ConversationFactory, MessageFactory

pytestmark = pytest.mark.usefixtures("private_cache")


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("prepare_turn", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def conversation():
    conversation = ConversationFactory(external_id="leo-tg")
    MessageFactory(
        conversation=conversation, content="早上好", created_at=datetime.fromisoformat("2026-11-28T10:05+08:00")
    )
    peer = ConversationFactory()
    MessageFactory(
        conversation=peer,
        content="Maya planned the Lisbon trip itinerary.",
        created_at=datetime.fromisoformat("2026-11-28T10:10+08:00"),
    )
    temporal_tick_run(at=datetime.fromisoformat("2026-11-28T10:30+08:00"))
    return conversation


def test_json_output_ends_with_the_exact_message_list_and_stores_the_message(conversation):
    output = run("--conversation", "leo-tg", "--message", "下午好", "--at", "2026-11-28T15:00+08:00", "--json")

    payload = json.loads(output.strip().splitlines()[-1])
    messages = payload["messages"]
    assert all(set(m) == {"role", "name", "content"} for m in messages)
    assert messages[0]["role"] == "system"
    assert messages[-1] == {"role": "user", "name": "", "content": "下午好"}
    assert [m["name"] for m in messages].count("temporal_summary_peers") == 1
    stored = conversation.messages.filter(role=Role.USER).order_by("-created_at").first()
    assert (stored.content, stored.created_at) == ("下午好", datetime.fromisoformat("2026-11-28T15:00+08:00"))


def test_no_store_prints_without_storing(conversation):
    output = run("--conversation", "leo-tg", "--message", "only looking", "--at", "2026-11-28T15:00", "--no-store")

    assert "--- [0] system" in output
    # Another person's conversation, as its themes in this (Chinese) conversation's language.
    assert "(temporal_summary_peers)" in output and "旅行" in output and "Lisbon" not in output
    assert output.rstrip().endswith("only looking")
    assert not conversation.messages.filter(content="only looking").exists()


def test_unknown_conversation_and_bad_time_are_clear_errors(conversation):
    with pytest.raises(CommandError, match="no conversation"):
        run("--conversation", "nope", "--message", "hi")
    with pytest.raises(CommandError, match="ISO-8601"):
        run("--conversation", "leo-tg", "--message", "hi", "--at", "yesterday")
