"""history_search: text (segmented, mixed Chinese/English, recall's query language), time range, channel, person;
the latest user message of a conversation."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from anima.core.search_query import QuerySyntaxError
from conversations.models import Role
from conversations.selectors import history_search, message_latest_user
from tests.factories import ConversationFactory, HistoryEntryFactory, MessageFactory, PersonFactory

DAY = dt.datetime(2026, 10, 3, 12, 0, tzinfo=dt.UTC)


def _contents(entries) -> list[str]:
    return [entry.content for entry in entries]


def test_text_matches_segmented_chinese_and_stemmed_english():
    HistoryEntryFactory(content="你的邮箱是 leo@example.com", timestamp=DAY)
    HistoryEntryFactory(content="We were running late", timestamp=DAY)
    HistoryEntryFactory(content="无关的事情", timestamp=DAY)

    assert _contents(history_search(text="邮箱")) == ["你的邮箱是 leo@example.com"]
    assert _contents(history_search(text="run")) == ["We were running late"]


def test_text_reads_the_query_language_of_recall():
    HistoryEntryFactory(content="she loves green tea", timestamp=DAY)
    HistoryEntryFactory(content="green shirt, black tea", timestamp=DAY + dt.timedelta(hours=1))
    HistoryEntryFactory(content="coffee only", timestamp=DAY + dt.timedelta(hours=2))
    HistoryEntryFactory(content="你的邮箱是 leo@example.com", timestamp=DAY)

    assert _contents(history_search(text='"green tea"')) == ["she loves green tea"]
    assert _contents(history_search(text="tea AND NOT shirt")) == ["she loves green tea"]
    assert _contents(history_search(text="coffee OR shirt")) == ["coffee only", "green shirt, black tea"]
    assert _contents(history_search(text="你的邮箱是啥？")) == ["你的邮箱是 leo@example.com"]  # bigrams
    # Plain words still match a substring too; explicit syntax is honoured by full-text search alone.
    assert _contents(history_search(text="leo@exam")) == ["你的邮箱是 leo@example.com"]
    assert _contents(history_search(text='"leo@exam"')) == []


@pytest.mark.parametrize("text", ["green AND", "tea NOT", "OR tea"])
def test_a_query_with_a_dangling_operator_is_refused(text):
    HistoryEntryFactory(content="she loves green tea", timestamp=DAY)

    with pytest.raises(QuerySyntaxError, match="operator") as caught:
        history_search(text=text)
    assert caught.value.field == "q"


def test_time_range_is_inclusive_of_whole_days_and_exact_datetimes():
    for offset in range(3):
        HistoryEntryFactory(content=f"day {offset}", timestamp=DAY + dt.timedelta(days=offset))

    by_day = history_search(since=(DAY + dt.timedelta(days=1)).date(), until=(DAY + dt.timedelta(days=2)).date())
    by_moment = history_search(until=DAY + dt.timedelta(days=1))

    assert _contents(by_day) == ["day 1", "day 2"]
    assert _contents(by_moment) == ["day 0", "day 1"]


def test_channel_person_and_global_scopes():
    leo = PersonFactory(slug="leo")
    HistoryEntryFactory(person=leo, channel="telegram", content="leo on telegram", timestamp=DAY)
    HistoryEntryFactory(person=leo, channel="cli", content="leo on cli", timestamp=DAY)
    HistoryEntryFactory(person=None, channel="cli", content="global on cli", timestamp=DAY)

    assert _contents(history_search(person=leo, channel="cli")) == ["leo on cli"]
    assert _contents(history_search(global_only=True)) == ["global on cli"]
    assert len(history_search(channel="cli")) == 2


def test_limit_caps_results_newest_ranked_first_for_text():
    for offset in range(5):
        HistoryEntryFactory(content=f"咖啡 {offset}", timestamp=DAY + dt.timedelta(hours=offset))

    assert _contents(history_search(text="咖啡", limit=2)) == ["咖啡 4", "咖啡 3"]


@settings(max_examples=60, deadline=None)
@given(text=st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=200))
@example(text="\x0bAND")  # an operator with no term: refused before the database sees it
def test_no_text_makes_the_database_raise(text):
    # A malformed query may only be refused by QuerySyntaxError (naming the field), as recall's searches are.
    try:
        list(history_search(text=text, limit=5))
    except QuerySyntaxError as refused:
        assert refused.field == "q"


def test_the_latest_user_message_is_the_newest_users_the_later_stored_on_a_tie():
    conversation, other = ConversationFactory(), ConversationFactory()
    assert message_latest_user(conversation=conversation) is None
    MessageFactory(conversation=conversation, role=Role.USER, content="first", created_at=DAY)
    tied = MessageFactory(conversation=conversation, role=Role.USER, content="same instant", created_at=DAY)
    MessageFactory(conversation=conversation, role=Role.ASSISTANT, content="reply", created_at=DAY + dt.timedelta(1))
    MessageFactory(conversation=other, role=Role.USER, content="elsewhere", created_at=DAY + dt.timedelta(2))

    assert message_latest_user(conversation=conversation) == tied
