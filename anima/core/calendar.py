"""The companion's clock: local days, half-hour buckets and ISO moments, all in ANIMA_TIME_ZONE.

A "day" is the local calendar day of ``ANIMA_TIME_ZONE``; a bucket is a half-hour of that clock;
an ISO timestamp without an offset is local time. One module, so every app reads time the same way.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from anima.core.errors import AnimaError

BUCKET = timedelta(minutes=30)
# Far-off years are refused at the edges rather than overflowing in date arithmetic further down.
YEAR_RANGE = (1000, 9000)


class MomentError(AnimaError):
    """A date or datetime that cannot be read, or lies outside the accepted years."""


def local_day(moment: datetime) -> date:
    """The companion's calendar day of an instant."""
    return timezone.localtime(moment).date()


def day_start(day: date) -> datetime:
    """Local midnight of ``day`` as an aware datetime."""
    return timezone.make_aware(datetime.combine(day, time.min), timezone.get_current_timezone())


def day_window(day: date) -> tuple[datetime, datetime]:
    """``[local midnight, next local midnight)`` of ``day``."""
    return day_start(day), day_start(day + timedelta(days=1))


def moment_bound(value: date | datetime | None, *, end_of_day: bool = False) -> datetime | None:
    """A filter bound: a datetime as is; a local date as its midnight, or the next one for an inclusive end."""
    if value is None or isinstance(value, datetime):
        return value
    return day_start(value + timedelta(days=1) if end_of_day else value)


def bucket_start(moment: datetime) -> datetime:
    """The local half-hour bucket containing ``moment``."""
    local = timezone.localtime(moment)
    return local.replace(minute=local.minute // 30 * 30, second=0, microsecond=0)


def bucket_label(start: datetime) -> str:
    """A bucket as written in chunks and cache keys: ``2026-07-18T06:00+08:00``."""
    return timezone.localtime(start).isoformat(timespec="minutes")


def closed_buckets(*, day: date, now: datetime) -> list[datetime]:
    """The half-hour buckets of local ``day`` that have ended by ``now``, oldest first."""
    start, end = day_window(day)
    buckets = []
    while start + BUCKET <= min(now, end):
        buckets.append(start)
        start += BUCKET
    return buckets


def moment_from_iso(value: str) -> datetime | None:
    """An ISO-8601 timestamp (naive = local time), or None when ``value`` is not one."""
    try:
        parsed = parse_datetime(value.strip())
    except ValueError:
        return None
    if parsed is not None and timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed)
    return parsed


def years_check(value: date, *, field: str) -> None:
    if not YEAR_RANGE[0] <= value.year <= YEAR_RANGE[1]:
        raise MomentError(f"{field} must be between the years {YEAR_RANGE[0]} and {YEAR_RANGE[1]}", field=field)


def moment_parse(value: str | None, *, field: str) -> date | datetime | None:
    """An ISO date (a whole local day) or datetime (naive = local time); None when empty."""
    if value is None or value == "":
        return None
    try:
        parsed = parse_datetime(value) if "T" in value or " " in value.strip() else parse_date(value)
    except ValueError:
        parsed = None
    if parsed is None:
        raise MomentError(f"{field} must be an ISO date (YYYY-MM-DD) or datetime, got {value!r}", field=field)
    years_check(parsed, field=field)
    if isinstance(parsed, datetime) and timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed)
    return parsed
