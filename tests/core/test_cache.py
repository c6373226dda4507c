from __future__ import annotations

import logging
import os
import uuid

import pytest
from django.core.cache import caches
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anima.core.cache import (
    ProcessLru,
    cache_add_json,
    cache_delete,
    cache_delete_prefix,
    cache_get_json,
    cache_set_json,
)


def test_values_round_trip_through_the_in_process_default(private_cache):
    cache_set_json(key="anima:test:plain", value={"summary": "上线顺利", "n": 2}, timeout_seconds=60)
    assert cache_get_json(key="anima:test:plain") == {"summary": "上线顺利", "n": 2}
    assert cache_get_json(key="anima:test:absent") is None


def test_redis_down_warns_and_falls_back_in_process_instead_of_failing(redis_down, caplog):
    with caplog.at_level(logging.WARNING, logger="anima.core.cache"):
        cache_set_json(key="anima:test:down", value={"summary": "kept"}, timeout_seconds=60)
        value = cache_get_json(key="anima:test:down")

    assert value == {"summary": "kept"}
    # One warning: after the first failure Redis is left alone for a while, not retried per call.
    [warning] = [record.message for record in caplog.records if "cache unavailable" in record.message]
    assert "127.0.0.1:1" in warning and warning.endswith("in-process fallback for anima:test:down")


def test_redis_down_and_nothing_cached_is_a_miss_not_an_error(redis_down):
    assert cache_get_json(key="anima:test:never-written") is None


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.recursive(st.none() | st.booleans() | st.integers() | st.text(), lambda inner: st.lists(inner)))
def test_any_json_value_survives_the_fallback(redis_down, value):
    cache_set_json(key="anima:test:any", value=value, timeout_seconds=60)
    assert cache_get_json(key="anima:test:any") == value


def _add_twice_then_delete_and_add(key: str) -> None:
    assert cache_add_json(key=key, value="first", timeout_seconds=60) is True
    assert cache_add_json(key=key, value="second", timeout_seconds=60) is False
    assert cache_get_json(key=key) == "first"
    cache_delete(key=key)
    assert cache_get_json(key=key) is None
    assert cache_add_json(key=key, value="third", timeout_seconds=60) is True


def test_adding_stores_only_where_nothing_is_stored(private_cache):
    _add_twice_then_delete_and_add("anima:test:add")


def test_adding_with_redis_down_does_the_same_in_process(redis_down):
    _add_twice_then_delete_and_add("anima:test:add-down")


def test_deleting_by_prefix_drops_the_in_process_entries(private_cache):
    cache_set_json(key="anima:temporal:peer_roll:2026-11-20:x", value={"summary": "old"}, timeout_seconds=60)
    cache_delete_prefix(prefix="anima:temporal:peer_roll:")
    assert cache_get_json(key="anima:temporal:peer_roll:2026-11-20:x") is None


@pytest.mark.integration
@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs REDIS_URL")
def test_deleting_by_prefix_scans_redis_and_keeps_other_keys(settings):
    settings.CACHES = {
        "default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": os.environ["REDIS_URL"]},
    }
    prefix = f"anima:test:{uuid.uuid4().hex}:peer_roll:"
    for n in range(3):
        cache_set_json(key=f"{prefix}{n}", value={"n": n}, timeout_seconds=60)
    cache_set_json(key=f"{prefix[:-10]}other", value={"kept": True}, timeout_seconds=60)
    assert cache_delete_prefix(prefix=prefix) == 3
    assert [cache_get_json(key=f"{prefix}{n}") for n in range(3)] == [None, None, None]
    assert cache_get_json(key=f"{prefix[:-10]}other") == {"kept": True}


def test_a_process_lru_keeps_the_most_recently_used_entries_within_its_size():
    lru = ProcessLru(2)
    lru.put_many({"a": 1, "b": 2})
    assert lru.get_many(["a", "x"]) == {"a": 1}  # "a" is now the most recently used
    lru.put_many({"c": 3})  # evicts "b", the least recently used
    assert lru.get_many(["a", "b", "c"]) == {"a": 1, "c": 3}
    lru.clear()
    assert lru.get_many(["a", "c"]) == {}


@pytest.mark.integration
@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs REDIS_URL")
def test_adding_on_redis_is_one_step(settings):
    settings.CACHES = {
        "default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": os.environ["REDIS_URL"]},
    }
    _add_twice_then_delete_and_add(f"anima:test:{uuid.uuid4().hex}:add")


@pytest.mark.integration
@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs REDIS_URL")
def test_a_value_on_redis_that_is_not_json_is_a_miss(settings, caplog):
    settings.CACHES = {
        "default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": os.environ["REDIS_URL"]},
    }
    key = f"anima:test:{uuid.uuid4().hex}:raw"
    caches["default"].client.get_client(write=True).set(key, b"\xff not json", ex=60)

    with caplog.at_level(logging.WARNING, logger="anima.core.cache"):
        assert cache_get_json(key=key) is None
    assert any("is not JSON" in record.message for record in caplog.records)
