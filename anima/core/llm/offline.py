"""Registry of the offline provider's deterministic handlers, one per purpose.

Apps register handlers in ``<app>/offline.py`` (or a package ``<app>/offline/`` whose ``__init__``
imports its modules) with ``@offline_handler("<purpose>")``; those modules are imported once, on
the first offline call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.utils.module_loading import autodiscover_modules

from anima.core.llm.errors import LlmError

OfflineHandler = Callable[[dict], dict]

_handlers: dict[str, OfflineHandler] = {}
_discovery_lock = threading.Lock()
_discovered = False


def offline_handler(purpose: str) -> Callable[[OfflineHandler], OfflineHandler]:
    """Register ``handler(payload) -> answer`` as the offline answer for ``purpose``."""

    def register(handler: OfflineHandler) -> OfflineHandler:
        existing = _handlers.get(purpose)
        if existing is not None and _qualified_name(existing) != _qualified_name(handler):
            raise ValueError(
                f"offline handler for {purpose!r} registered twice: "
                f"{_qualified_name(existing)} and {_qualified_name(handler)}"
            )
        _handlers[purpose] = handler
        return handler

    return register


def offline_handler_get(*, purpose: str) -> OfflineHandler:
    _discover()
    try:
        return _handlers[purpose]
    except KeyError:
        known = ", ".join(sorted(_handlers)) or "none"
        raise LlmError(
            f"the offline LLM provider has no handler for purpose {purpose!r} (registered: {known}); "
            f"register one with @offline_handler({purpose!r}) in an app's offline.py, or configure ANIMA_LLM_BASE_URL"
        ) from None


def offline_purposes() -> list[str]:
    """Every purpose the offline provider answers."""
    _discover()
    return sorted(_handlers)


def _discover() -> None:
    global _discovered
    with _discovery_lock:
        if not _discovered:
            autodiscover_modules("offline")
            _discovered = True


def _qualified_name(handler: OfflineHandler) -> str:
    return f"{handler.__module__}.{handler.__qualname__}"
