from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from conversations.models import Platform, Role
from temporal.selectors import day_conversation_ids, day_conversations, person_names
from tests.factories import ConversationFactory, MessageFactory, PersonFactory

DAY = dt.date(2026, 11, 26)


def _said(conversation, *texts: str, day: dt.date = DAY) -> None:
    for minute, text in enumerate(texts):
        at = timezone.make_aware(dt.datetime.combine(day, dt.time(10, minute)))
        MessageFactory(conversation=conversation, role=Role.USER, content=text, created_at=at)


def test_the_days_conversation_ids_are_those_light_sleep_would_read_in_one_query():
    cut, short = ConversationFactory(), ConversationFactory()
    _said(cut, "x" * 50, "short")  # the long one is cut, the conversation kept
    _said(short, "hello")
    exact = ConversationFactory()
    _said(exact, "z" * 20)  # exactly max_chars fits
    too_long = ConversationFactory()
    _said(too_long, "y" * 50)  # nothing fits: no dialogue to read
    _said(ConversationFactory(platform=Platform.CRON), "a cron job")
    _said(ConversationFactory(), "another day", day=DAY - dt.timedelta(days=1))

    with CaptureQueriesContext(connection) as queries:
        ids = day_conversation_ids(day=DAY, max_chars=20)

    assert ids == [item.conversation.pk for item in day_conversations(day=DAY, max_chars=20)]
    assert ids == sorted([cut.pk, short.pk, exact.pk]) and len(queries) == 1
    uncut = [item.conversation.pk for item in day_conversations(day=DAY)]
    assert day_conversation_ids(day=DAY) == uncut == sorted([cut.pk, short.pk, exact.pk, too_long.pk])


@pytest.mark.parametrize(
    ("slug", "display_name", "names"),
    [
        ("maya", "Maya Silva", ("Maya Silva", "Maya")),
        # An imported person's display name is often their slug: summaries and facts call them by it read as a name.
        ("maya-silva", "maya-silva", ("Maya Silva", "maya-silva")),
        ("leo", "leo", ("Leo", "leo")),
        ("xiaoyu", "王小雨", ("Xiaoyu", "王小雨")),
    ],
)
def test_a_person_is_called_by_their_label_display_name_and_slug_longest_first(slug, display_name, names):
    assert person_names(person=PersonFactory.build(slug=slug, display_name=display_name)) == names
