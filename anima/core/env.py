"""Typed readers for settings that come from the environment.

Each helper raises ``ImproperlyConfigured`` naming the variable, so a typo in a
deployment fails at start-up instead of somewhere deep in a request.
"""

from __future__ import annotations

import ipaddress
import os
import re
import zoneinfo

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false, yes/no, on/off), got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from exc
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name} must be <= {maximum}, got {value}")
    return value


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw.strip())
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from exc
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {value}")
    return value


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default or [])
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_int_map(name: str, *, minimum: int, maximum: int) -> dict[str, int]:
    """``key=N,key=N`` as a mapping; each N within [minimum, maximum]."""
    mapping: dict[str, int] = {}
    for item in env_list(name):
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ImproperlyConfigured(f"{name} must be key=integer pairs separated by commas, got {item!r}")
        try:
            value = int(raw.strip())
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {key.strip()} must be an integer, got {raw.strip()!r}") from exc
        if not minimum <= value <= maximum:
            raise ImproperlyConfigured(f"{name}: {key.strip()} must be within {minimum}..{maximum}, got {value}")
        mapping[key.strip()] = value
    return mapping


def env_url(name: str, *, schemes: tuple[str, ...]) -> str:
    """An optional URL; empty string when unset, error when the scheme is unexpected."""
    raw = env_str(name)
    if not raw:
        return ""
    scheme = raw.split("://", 1)[0].lower() if "://" in raw else ""
    if scheme not in schemes:
        raise ImproperlyConfigured(f"{name} must be a URL starting with one of {', '.join(s + '://' for s in schemes)}")
    return raw


def env_choice(name: str, default: str, *, choices: tuple[str, ...]) -> str:
    value = env_str(name, default) or default
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


_RATE = re.compile(r"^[1-9]\d{0,8}/(s|sec|second|m|min|minute|h|hour|d|day)$")


def env_rate(name: str, default: str) -> str | None:
    """A request rate such as ``600/min`` (per s, min, hour or day), None when ``off``."""
    value = (env_str(name, default) or default).lower()
    if value in ("off", "0", "none"):
        return None
    if not _RATE.match(value):
        raise ImproperlyConfigured(
            f"{name} must be a rate such as 600/min (per s, min, hour, day) or off, got {value!r}"
        )
    return value


def env_time_zone(name: str, default: str) -> str:
    value = env_str(name, default) or default
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ImproperlyConfigured(f"{name} must be an IANA time zone such as Asia/Shanghai, got {value!r}") from exc
    return value


IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def env_networks(name: str, default: list[str]) -> tuple[IpNetwork, ...]:
    """Comma-separated IP addresses or networks (``10.0.0.0/8``); ``none`` for an empty list."""
    items = env_list(name, default)
    if [item.lower() for item in items] == ["none"]:
        return ()
    try:
        return tuple(ipaddress.ip_network(item, strict=False) for item in items)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must list IP addresses or networks such as 10.0.0.0/8: {exc}") from exc
