from __future__ import annotations

import re
from datetime import date, datetime

import pytest

from anima.core.cache import cache_get_json
from anima.core.llm import LlmTransientError
from anima.core.llm.testing import scripted
from conversations.selectors import conversations_persons
from temporal.rollup import (
    OTHER,
    OWN,
    bucket_sources,
    day_chunks_by_conversation,
    peer_rollup_get,
    peer_rollup_key,
    peer_rollups_warm,
    sources_fingerprint,
)
from tests.conftest import CLOSED_PORT_REDIS
from tests.factories import ConversationFactory, PersonFactory

pytestmark = pytest.mark.usefixtures("private_cache")

DAY = date(2026, 11, 28)
BUCKET = datetime.fromisoformat("2026-11-28T10:00+08:00")


def with_chunks(*summaries: str, bucket: str = "2026-11-28T10:00+08:00", person=None, topic: str = ""):
    chunks = [
        {"at": f"2026-11-28T10:3{i}:00+08:00", "bucket": bucket, "summary": text, **({"topic": topic} if topic else {})}
        for i, text in enumerate(summaries)
    ]
    extra = {"person": person} if person is not None else {}
    return ConversationFactory(temporal_day={"cst_date": DAY.isoformat(), "chunks": chunks}, **extra)


def peers(viewer, *, mode: str = "topics", bucket: datetime = BUCKET, chinese: bool = False) -> dict[str, list]:
    """The peer sets ``viewer`` (a conversation, or None for nobody in particular) sees in ``bucket``."""
    chunks = day_chunks_by_conversation(day=DAY)
    return bucket_sources(
        chunks=chunks,
        bucket=bucket,
        viewer_id=viewer.pk if viewer else None,
        owners=conversations_persons(conversation_ids=chunks),
        viewer_person_id=viewer.person_id if viewer else None,
        mode=mode,
        chinese=chinese,
    )


def test_key_and_value_have_the_agreed_shape():
    leo = PersonFactory(slug="leo")
    peer = with_chunks("Leo planned the Lisbon trip.", person=leo)
    viewer = ConversationFactory(person=leo)  # Leo's other conversation: his own peer, in full
    sources = peers(viewer)[OWN]

    value = peer_rollup_get(day=DAY, bucket=BUCKET, sources=sources, viewer_class=OWN)

    key = peer_rollup_key(day=DAY, bucket=BUCKET, sources_fp=value["sources_fp"], viewer_class=OWN)
    assert re.fullmatch(r"anima:temporal:peer_roll:2026-11-28:2026-11-28T10:00\+08:00:[0-9a-f]{16}:own", key)
    assert set(value) == {"summary", "sources_fp", "created_at"}
    assert "Lisbon" in value["summary"]
    assert cache_get_json(key=key) == value
    assert sources == [(peer.pk, "2026-11-28T10:30:00+08:00", "Leo planned the Lisbon trip.")]


def test_other_people_are_topic_lines_unless_the_config_says_full_or_none():
    leo_peer = with_chunks("Leo gave his email leo@example.com for the Lisbon booking.", topic="travel")
    old_chunk = with_chunks("Leo called 13800138000 about his doctor's appointment.")  # written before topics
    maya = ConversationFactory()

    topics, full, none = peers(maya), peers(maya, mode="full"), peers(maya, mode="none")

    shown = [text for _, _, text in topics[OTHER]]
    assert topics[OWN] == [] and shown == ["travel", "health, plans"]  # the old chunk: its summary's themes
    assert [text for _, _, text in peers(maya, chinese=True)[OTHER]] == ["旅行", "健康、计划"]
    assert [pk for pk, _, _ in full[OWN]] == [leo_peer.pk, old_chunk.pk] and full[OTHER] == []
    assert none == {OWN: [], OTHER: []}
    value = peer_rollup_get(day=DAY, bucket=BUCKET, sources=topics[OTHER], viewer_class=OTHER)
    assert value["summary"] == "- travel\n- health, plans"
    assert cache_get_json(
        key=peer_rollup_key(day=DAY, bucket=BUCKET, sources_fp=value["sources_fp"], viewer_class=OTHER)
    )


def test_the_fingerprint_ignores_order_and_the_viewers_own_chunks():
    a = with_chunks("Leo fixed the payment migration.")
    b = with_chunks("Maya booked the hotel.")
    outsider_one, outsider_two = ConversationFactory(), ConversationFactory()

    seen_by = {c.pk: peers(c, mode="full")[OWN] for c in (a, b, outsider_one, outsider_two)}

    assert sources_fingerprint(seen_by[outsider_one.pk]) == sources_fingerprint(
        list(reversed(seen_by[outsider_two.pk]))
    )
    assert [s[0] for s in seen_by[a.pk]] == [b.pk]
    assert len(sources_fingerprint(seen_by[a.pk])) == 16
    assert sources_fingerprint(seen_by[a.pk]) != sources_fingerprint(seen_by[outsider_one.pk])


def test_a_miss_merges_once_and_viewers_with_the_same_peers_share_it():
    leo = PersonFactory(slug="leo")
    with_chunks("Leo fixed the payment migration.", "Leo wrote the rollback plan.", person=leo)
    one, two = ConversationFactory(person=leo), ConversationFactory(person=leo)
    with scripted({"temporal.peer-rollup": [{"summary": "Sure: Leo readied the payment launch."}]}) as provider:
        first = peer_rollup_get(day=DAY, bucket=BUCKET, sources=peers(one)[OWN], viewer_class=OWN)
        second = peer_rollup_get(day=DAY, bucket=BUCKET, sources=peers(two)[OWN], viewer_class=OWN)

    assert provider.purposes() == ["temporal.peer-rollup"]
    assert first == second
    assert first["summary"] == "Leo readied the payment launch."


def test_other_peoples_topics_never_reach_a_model():
    with_chunks("Maya planned the Lisbon trip.", topic="travel, plans")
    with scripted({}) as provider:
        value = peer_rollup_get(day=DAY, bucket=BUCKET, sources=peers(None)[OTHER], viewer_class=OTHER)

    assert provider.calls == [] and value["summary"] == "- travel, plans"


def test_without_an_llm_the_summaries_are_concatenated_and_truncated():
    long = "支付模块迁移完成，性能问题已经定位并修复。" * 40
    with_chunks("Maya planned the Lisbon trip.", long)
    with scripted({"temporal.peer-rollup": [LlmTransientError("no model")]}):
        value = peer_rollup_get(day=DAY, bucket=BUCKET, sources=peers(None, mode="full")[OWN], viewer_class=OWN)

    assert value["summary"].startswith("- Maya planned the Lisbon trip.\n- 支付模块迁移完成")
    assert len(value["summary"]) <= 500


def test_no_peers_no_rollup():
    viewer = with_chunks("Only my own chunk.")
    assert peers(viewer, mode="full") == {OWN: [], OTHER: []}
    assert peer_rollup_get(day=DAY, bucket=BUCKET, sources=[], viewer_class=OWN) is None


def test_redis_down_still_answers(settings, monkeypatch):
    settings.CACHES = CLOSED_PORT_REDIS
    monkeypatch.setattr("anima.core.cache._down_until", 0.0)
    with_chunks("Leo fixed the payment migration.")

    value = peer_rollup_get(day=DAY, bucket=BUCKET, sources=peers(None, mode="full")[OWN], viewer_class=OWN)

    assert "payment" in value["summary"]


def test_warming_fills_every_peer_set_of_the_last_four_closed_buckets():
    a = with_chunks("Leo fixed the payment migration.", bucket="2026-11-28T08:00+08:00")
    b = with_chunks("Maya booked the hotel.", bucket="2026-11-28T08:00+08:00")
    with_chunks("Too early to be warmed.", bucket="2026-11-28T07:30+08:00")
    now = datetime.fromisoformat("2026-11-28T10:00+08:00")  # last four closed: 08:00 … 09:30

    # Seen by a, by b, and by anyone else (in either language: topic lines are shown in the viewer's).
    assert peer_rollups_warm(day=DAY, now=now) == 4

    bucket = datetime.fromisoformat("2026-11-28T08:00+08:00")
    for viewer, chinese in ((a, False), (b, False), (None, False), (None, True)):
        sources = peers(viewer, bucket=bucket, chinese=chinese)[OTHER]
        key = peer_rollup_key(day=DAY, bucket=bucket, sources_fp=sources_fingerprint(sources), viewer_class=OTHER)
        assert cache_get_json(key=key)
