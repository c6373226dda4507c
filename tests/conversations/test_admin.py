"""The conversation page: paginated messages, readable temporal chunks, the short-term summary."""

from __future__ import annotations

import datetime as dt

from django.urls import reverse
from django.utils import timezone

from conversations.admin import MESSAGES_PER_PAGE
from conversations.models import ShortTermMemory, StmScope
from tests.factories import ConversationFactory, MessageFactory


def _change(conversation) -> str:
    return reverse("admin:conversations_conversation_change", args=[conversation.pk])


def _shown(response) -> list[str]:
    return [message.content for message in response.context["messages_page"]]


def test_messages_are_paginated_newest_page_first_with_a_link_to_all_of_them(admin_client):
    conversation = ConversationFactory()
    start = timezone.now() - dt.timedelta(hours=3)
    for n in range(MESSAGES_PER_PAGE + 5):
        MessageFactory(conversation=conversation, content=f"line {n:03d}", created_at=start + dt.timedelta(minutes=n))
    MessageFactory(content="from another conversation")
    response = admin_client.get(_change(conversation))
    assert _shown(response) == [f"line {n:03d}" for n in range(MESSAGES_PER_PAGE, MESSAGES_PER_PAGE + 5)]
    older = admin_client.get(_change(conversation), {"messages_page": 1})
    assert _shown(older)[0] == "line 000" and len(_shown(older)) == MESSAGES_PER_PAGE
    link = response.context["messages_changelist_url"]
    assert link in response.content.decode().replace("&amp;", "&")
    listed = admin_client.get(link).context["cl"].result_list
    assert len(listed) == MESSAGES_PER_PAGE + 5 and all(m.conversation_id == conversation.pk for m in listed)


def test_temporal_chunks_are_rendered_as_a_table(admin_client):
    conversation = ConversationFactory(
        temporal_day={
            "cst_date": "2026-07-18",
            "chunks": [
                {
                    "at": "2026-07-18T06:30:02+08:00",
                    "bucket": "2026-07-18T06:00+08:00",
                    "summary": "聊了搬家去杭州的计划",
                    "watermark_message_id": 77,
                    # Written in UTC by an earlier version: shown on the same clock as the rest of the row.
                    "watermark_at": "2026-07-17T22:29:10+00:00",
                }
            ],
        }
    )
    page = admin_client.get(_change(conversation)).content.decode()
    assert "<td>06:30</td><td>06:00</td><td>聊了搬家去杭州的计划</td>" in page
    assert "#77 at 06:29" in page
    assert 'name="temporal_day"' not in page  # operational state, not hand-edited


def test_short_term_summary_is_shown(admin_client):
    conversation = ConversationFactory()
    ShortTermMemory.objects.create(
        conversation=conversation, scope=StmScope.USER, summary="Leo 在准备搬家到杭州", covers_until=timezone.now()
    )
    page = admin_client.get(_change(conversation)).content.decode()
    assert "Leo 在准备搬家到杭州" in page
