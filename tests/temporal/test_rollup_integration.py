"""Peer rollups on the real Redis (127.0.0.1:6379 or REDIS_URL); run by CI with ``-m integration``."""

from __future__ import annotations

import json
import os
from datetime import date, datetime

import pytest
import redis

from conversations.selectors import conversations_persons
from temporal.rollup import OWN, bucket_sources, day_chunks_by_conversation, peer_rollup_get, peer_rollup_key
from tests.factories import ConversationFactory

pytestmark = pytest.mark.integration

REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
DAY = date(2026, 11, 28)
BUCKET = datetime.fromisoformat("2026-11-28T10:00+08:00")


@pytest.fixture
def real_redis(settings):
    settings.CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
        }
    }
    client = redis.Redis.from_url(REDIS_URL)
    written: list[str] = []
    yield client, written
    if written:
        client.delete(*written)


def test_the_rollup_is_stored_under_the_exact_key_with_its_ttl(real_redis):
    client, written = real_redis
    ConversationFactory(
        temporal_day={
            "cst_date": DAY.isoformat(),
            "chunks": [
                {
                    "at": "2026-11-28T10:30:00+08:00",
                    "bucket": "2026-11-28T10:00+08:00",
                    "summary": "Leo 完成了支付迁移。",
                }
            ],
        }
    )
    chunks = day_chunks_by_conversation(day=DAY)
    sources = bucket_sources(
        chunks=chunks,
        bucket=BUCKET,
        viewer_id=None,
        owners=conversations_persons(conversation_ids=chunks),
        viewer_person_id=None,
        mode="full",
        chinese=True,
    )[OWN]

    value = peer_rollup_get(day=DAY, bucket=BUCKET, sources=sources, viewer_class=OWN)

    key = peer_rollup_key(day=DAY, bucket=BUCKET, sources_fp=value["sources_fp"], viewer_class=OWN)
    written.append(key)
    # What `redis-cli GET anima:temporal:peer_roll:…` prints: the JSON value, under the key exactly.
    raw = client.get(key)
    assert raw is not None and json.loads(raw) == value
    assert "支付迁移" in json.loads(raw)["summary"]
    assert 36 * 3600 - 60 <= client.ttl(key) <= 36 * 3600
    # A second viewer with the same peers reads the stored value back rather than merging again.
    assert key.endswith(f":{value['sources_fp']}:own")
    assert peer_rollup_get(day=DAY, bucket=BUCKET, sources=sources, viewer_class=OWN) == value
