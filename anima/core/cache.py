"""A discardable JSON cache over Django's default cache that survives Redis being down.

With django-redis (``REDIS_URL``) values are stored as JSON strings under the exact key given,
so ``redis-cli GET anima:temporal:peer_roll:…`` reads what Anima wrote (django-redis' own
``:1:`` key versioning is bypassed). Without Redis the default cache is the in-process one.
When Redis refuses, times out or drops the connection, the call logs a warning and falls back
to an in-process cache: a cache outage degrades speed, never correctness, and never raises.
After a failure the cache is left alone for ``RETRY_AFTER_SECONDS`` so that a Redis that
times out does not add its timeout to every call (and the log gets one warning, not thousands).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from django.core.cache import caches
from django.core.cache.backends.base import BaseCache
from django.core.cache.backends.locmem import LocMemCache
from django_redis.exceptions import ConnectionInterrupted
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 30.0
_CACHE_ERRORS = (ConnectionInterrupted, RedisError, OSError)
_fallback = LocMemCache("anima-cache-fallback", {"OPTIONS": {"MAX_ENTRIES": 10_000}})
_down_until = 0.0


def _cache_failed(exc: Exception, key: str) -> None:
    global _down_until
    _down_until = time.monotonic() + RETRY_AFTER_SECONDS
    logger.warning("cache unavailable (%s); using the in-process fallback for %s", exc, key)


def _cache_down() -> bool:
    return time.monotonic() < _down_until


def _redis_client():
    """The raw redis client when the default cache is django-redis, else None."""
    backend = caches["default"]
    client = getattr(backend, "client", None)
    return client.get_client(write=True) if client is not None and hasattr(client, "get_client") else None


def _cached(key: str, *, plain: Callable[[BaseCache], Any], redis: Callable[[Any], Any]) -> Any:
    """``redis`` on django-redis' raw client, else ``plain`` on the default cache; ``plain`` on the in-process
    fallback while Redis is down (a failure here starts that)."""
    if _cache_down():
        return plain(_fallback)
    try:
        client = _redis_client()
        return plain(caches["default"]) if client is None else redis(client)
    except _CACHE_ERRORS as exc:
        _cache_failed(exc, key)
        return plain(_fallback)


def _json_loaded(raw: bytes | None, *, key: str) -> Any | None:
    try:
        return None if raw is None else json.loads(raw)
    except ValueError:
        logger.warning("cache value under %s is not JSON; treating it as a miss", key)
        return None


def cache_get_json(*, key: str) -> Any | None:
    """The value stored under ``key``, or None when absent (or the cache is unreachable and the fallback lacks it)."""
    return _cached(key, plain=lambda cache: cache.get(key), redis=lambda client: _json_loaded(client.get(key), key=key))


def cache_set_json(*, key: str, value: Any, timeout_seconds: int) -> None:
    """Store a JSON-serialisable ``value`` under ``key`` for ``timeout_seconds``."""
    _cached(
        key,
        plain=lambda cache: cache.set(key, value, timeout_seconds),
        redis=lambda client: client.set(key, json.dumps(value, ensure_ascii=False), ex=timeout_seconds),
    )


def cache_add_json(*, key: str, value: Any, timeout_seconds: int) -> bool:
    """Store ``value`` under ``key`` only if nothing is stored there; whether it was stored (Redis: SET NX, one step,
    so of several processes adding at once exactly one gets True)."""
    return bool(
        _cached(
            key,
            plain=lambda cache: cache.add(key, value, timeout_seconds),
            redis=lambda client: client.set(key, json.dumps(value, ensure_ascii=False), ex=timeout_seconds, nx=True),
        )
    )


def cache_delete(*, key: str) -> None:
    """Drop ``key`` (absent is fine); from Redis, and from the in-process fallback too (set while Redis was down)."""

    def from_redis(client) -> None:
        _fallback.delete(key)
        client.delete(key)

    _cached(key, plain=lambda cache: cache.delete(key), redis=from_redis)


def cache_delete_prefix(*, prefix: str) -> int:
    """Drop every entry whose key starts with ``prefix`` (Redis: a SCAN, never KEYS); returns how many.

    Without Redis the in-process caches hold nothing else worth keeping and cannot be scanned by
    prefix portably: they are cleared whole (only this process's; other processes' copies sit under
    keys nothing asks for again once their sources changed, and expire with their TTL).
    """
    _fallback.clear()
    try:
        client = None if _cache_down() else _redis_client()
        if client is None:
            caches["default"].clear()
            return 0
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        return client.delete(*keys) if keys else 0
    except _CACHE_ERRORS as exc:
        _cache_failed(exc, prefix)
        return 0


class ProcessLru:
    """A bounded map in this process, the least recently used entries dropped first; safe across threads.

    For values that never change for their key (a word's lexemes, a query's vector): the next lookup of a
    key skips the work that made it.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, keys: Iterable[Hashable]) -> dict[Hashable, Any]:
        """The entries held for ``keys`` (each now the most recently used)."""
        with self._lock:
            found = {key: self._items[key] for key in keys if key in self._items}
            for key in found:
                self._items.move_to_end(key)
        return found

    def put_many(self, items: dict[Hashable, Any]) -> None:
        with self._lock:
            for key, value in items.items():
                self._items[key] = value
                self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
