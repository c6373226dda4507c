from __future__ import annotations

import re
from datetime import date, datetime

import pytest

from anima.core.cache import cache_get_json
from anima.core.llm import LlmTransientError
from anima.core.llm.testing import scripted
from temporal.rollup import (
    bucket_sources,
    day_chunks_by_conversation,
    peer_rollup_get,
    peer_rollup_key,
    peer_rollups_warm,
    sources_fingerprint,
)
from tests.conftest import CLOSED_PORT_REDIS
from tests.factories import ConversationFactory

pytestmark = pytest.mark.usefixtures("private_cache")

DAY = date(2026, 11, 28)
BUCKET = datetime.fromisoformat("2026-11-28T10:00+08:00")


def with_chunks(*summaries: str, bucket: str = "2026-11-28T10:00+08:00"):
    chunks = [
        {"at": f"2026-11-28T10:3{i}:00+08:00", "bucket": bucket, "summary": text} for i, text in enumerate(summaries)
    ]
    return ConversationFactory(temporal_day={"cst_date": DAY.isoformat(), "chunks": chunks})


def test_key_and_value_have_the_agreed_shape():
    peer = with_chunks("Maya planned the Lisbon trip.")
    viewer = ConversationFactory()
    sources = bucket_sources(chunks=day_chunks_by_conversation(day=DAY), bucket=BUCKET, viewer_id=viewer.pk)

    value = peer_rollup_get(day=DAY, bucket=BUCKET, sources=sources)

    key = peer_rollup_key(day=DAY, bucket=BUCKET, sources_fp=value["sources_fp"])
    assert re.fullmatch(r"anima:temporal:peer_roll:2026-11-28:2026-11-28T10:00\+08:00:[0-9a-f]{16}", key)
    assert set(value) == {"summary", "sources_fp", "created_at"}
    assert "Lisbon" in value["summary"]
    assert cache_get_json(key=key) == value
    assert sources == [(peer.pk, "2026-11-28T10:30:00+08:00", "Maya planned the Lisbon trip.")]


def test_the_fingerprint_ignores_order_and_the_viewers_own_chunks():
    a = with_chunks("Leo fixed the payment migration.")
    b = with_chunks("Maya booked the hotel.")
    outsider_one, outsider_two = ConversationFactory(), ConversationFactory()
    chunks = day_chunks_by_conversation(day=DAY)

    seen_by = {
        c.pk: bucket_sources(chunks=chunks, bucket=BUCKET, viewer_id=c.pk) for c in (a, b, outsider_one, outsider_two)
    }

    assert sources_fingerprint(seen_by[outsider_one.pk]) == sources_fingerprint(
        list(reversed(seen_by[outsider_two.pk]))
    )
    assert [s[0] for s in seen_by[a.pk]] == [b.pk]
    assert len(sources_fingerprint(seen_by[a.pk])) == 16
    assert sources_fingerprint(seen_by[a.pk]) != sources_fingerprint(seen_by[outsider_one.pk])


def test_a_miss_merges_once_and_viewers_with_the_same_peers_share_it():
    with_chunks("Leo fixed the payment migration.", "Leo wrote the rollback plan.")
    one, two = ConversationFactory(), ConversationFactory()
    chunks = day_chunks_by_conversation(day=DAY)
    with scripted({"temporal.peer-rollup": [{"summary": "Sure: Leo readied the payment launch."}]}) as provider:
        first = peer_rollup_get(
            day=DAY, bucket=BUCKET, sources=bucket_sources(chunks=chunks, bucket=BUCKET, viewer_id=one.pk)
        )
        second = peer_rollup_get(
            day=DAY, bucket=BUCKET, sources=bucket_sources(chunks=chunks, bucket=BUCKET, viewer_id=two.pk)
        )

    assert provider.purposes() == ["temporal.peer-rollup"]
    assert first == second
    assert first["summary"] == "Leo readied the payment launch."


def test_without_an_llm_the_summaries_are_concatenated_and_truncated():
    long = "支付模块迁移完成，性能问题已经定位并修复。" * 40
    with_chunks("Maya planned the Lisbon trip.", long)
    chunks = day_chunks_by_conversation(day=DAY)
    with scripted({"temporal.peer-rollup": [LlmTransientError("no model")]}):
        value = peer_rollup_get(
            day=DAY, bucket=BUCKET, sources=bucket_sources(chunks=chunks, bucket=BUCKET, viewer_id=None)
        )

    assert value["summary"].startswith("- Maya planned the Lisbon trip.\n- 支付模块迁移完成")
    assert len(value["summary"]) <= 500


def test_no_peers_no_rollup():
    viewer = with_chunks("Only my own chunk.")
    chunks = day_chunks_by_conversation(day=DAY)
    assert (
        peer_rollup_get(
            day=DAY, bucket=BUCKET, sources=bucket_sources(chunks=chunks, bucket=BUCKET, viewer_id=viewer.pk)
        )
        is None
    )


def test_redis_down_still_answers(settings, monkeypatch):
    settings.CACHES = CLOSED_PORT_REDIS
    monkeypatch.setattr("anima.core.cache._down_until", 0.0)
    with_chunks("Leo fixed the payment migration.")
    chunks = day_chunks_by_conversation(day=DAY)

    value = peer_rollup_get(
        day=DAY, bucket=BUCKET, sources=bucket_sources(chunks=chunks, bucket=BUCKET, viewer_id=None)
    )

    assert "payment" in value["summary"]


def test_warming_fills_every_peer_set_of_the_last_four_closed_buckets():
    a = with_chunks("Leo fixed the payment migration.", bucket="2026-11-28T08:00+08:00")
    b = with_chunks("Maya booked the hotel.", bucket="2026-11-28T08:00+08:00")
    with_chunks("Too early to be warmed.", bucket="2026-11-28T07:30+08:00")
    now = datetime.fromisoformat("2026-11-28T10:00+08:00")  # last four closed: 08:00 … 09:30

    assert peer_rollups_warm(day=DAY, now=now) == 3  # seen by a, by b, and by anyone else

    chunks = day_chunks_by_conversation(day=DAY)
    bucket = datetime.fromisoformat("2026-11-28T08:00+08:00")
    for viewer in (a.pk, b.pk, None):
        sources = bucket_sources(chunks=chunks, bucket=bucket, viewer_id=viewer)
        assert cache_get_json(key=peer_rollup_key(day=DAY, bucket=bucket, sources_fp=sources_fingerprint(sources)))
