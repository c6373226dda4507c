"""Request limits per API token: DRF's rate throttle, counted in the cache (Redis where configured).

One count per token, whatever surface it calls: the REST API and the proxy through DRF
(``DEFAULT_THROTTLE_CLASSES``), MCP over HTTP through :func:`token_throttle_check`. Processes that
share Redis share the count; with the in-process cache each process counts its own. Scoped
(non-staff) tokens are held to ``ANIMA_THROTTLE_RATE``, operator (staff) tokens to
``ANIMA_THROTTLE_OPERATOR_RATE`` (default off: the operator's own tools and load runs); a request
without a token (a console session) is not limited. Past the limit: 429 with ``Retry-After``.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import Throttled
from rest_framework.throttling import SimpleRateThrottle

from anima.core.cache import cache_get_json, cache_set_json


class _JsonCache:
    """The cache as DRF's throttle uses it, through Anima's JSON cache: a Redis outage never fails a request."""

    def get(self, key: str, default: Any = None) -> Any:
        value = cache_get_json(key=key)
        return default if value is None else value

    def set(self, key: str, value: Any, timeout: int) -> None:
        cache_set_json(key=key, value=value, timeout_seconds=max(1, int(timeout)))


class TokenRateThrottle(SimpleRateThrottle):
    cache = _JsonCache()

    def __init__(self) -> None:
        # The rate depends on whose token asks: chosen per request in ``allow``.
        self.rate = None
        self.key = None

    def get_cache_key(self, request, view) -> str | None:
        return self.key

    def allow_request(self, request, view) -> bool:
        return self.allow(user=request.user, token=request.auth)

    def allow(self, *, user, token: Any) -> bool:
        """Count one request of ``token`` (of ``user``); False once its rate is used up."""
        if not isinstance(token, Token):
            return True
        self.rate = settings.ANIMA_THROTTLE_OPERATOR_RATE if user.is_staff else settings.ANIMA_THROTTLE_RATE
        if self.rate is None:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        # The key holds no usable secret: a digest of the token's key.
        self.key = f"anima:throttle:{hashlib.sha256(token.key.encode()).hexdigest()[:32]}"
        return super().allow_request(None, None)


def token_throttle_check(*, user, token: Token) -> None:
    """For a surface outside DRF: count the request, raising Throttled (429, ``wait`` seconds) past the limit."""
    throttle = TokenRateThrottle()
    if not throttle.allow(user=user, token=token):
        raise Throttled(wait=throttle.wait())
