"""The companion's clock: local days, half-hour buckets and ISO moments, all in ANIMA_TIME_ZONE.

A "day" is the local calendar day of ``ANIMA_TIME_ZONE``; a bucket is a half-hour of that clock;
an ISO timestamp without an offset is local time. One module, so every app reads time the same way.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, tzinfo

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from anima.core.errors import AnimaError

BUCKET = timedelta(minutes=30)
# Every date and timestamp that enters Anima (importers, API, tools, LLM answers, workspaces) lies in
# [DATE_MIN, DATE_END), compared as written (its own wall-clock date). Far-off ones are refused at the
# edges: they overflow in time-zone and day arithmetic, and before year 1 Python cannot read them back.
DATE_MIN = date(1900, 1, 1)
DATE_END = date(2200, 1, 1)
DATE_RANGE_TEXT = f"between {DATE_MIN.isoformat()} and {(DATE_END - timedelta(days=1)).isoformat()}"


class MomentError(AnimaError):
    """A date or datetime that cannot be read, or lies outside the accepted range."""


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


def moment_iso(moment: datetime) -> str:
    """An instant as Anima writes it everywhere (API, recall, tools, stored bodies): ISO 8601 in
    ANIMA_TIME_ZONE with its offset, ``2026-11-26T08:40:00+08:00``, as the API's serializers write it."""
    return timezone.localtime(moment).isoformat()


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


def moment_check(value: date, *, field: str) -> None:
    """Refuse a date or datetime outside [DATE_MIN, DATE_END), naming ``field``."""
    day = value.date() if isinstance(value, datetime) else value
    if not DATE_MIN <= day < DATE_END:
        raise MomentError(f"{field} must be {DATE_RANGE_TEXT}, got {value.isoformat()}", field=field)


def datetime_parse(value: str, *, field: str, tz: tzinfo | None = None) -> datetime:
    """An ISO-8601 datetime within the accepted range, as an aware datetime; a naive one is read in ``tz``
    (default: ANIMA_TIME_ZONE)."""
    try:
        parsed = parse_datetime(value.strip())
    except ValueError:
        parsed = None
    if parsed is None:
        raise MomentError(f"{field} must be an ISO-8601 date-time, got {value!r}", field=field)
    moment_check(parsed, field=field)
    return timezone.make_aware(parsed, tz) if timezone.is_naive(parsed) else parsed


def moment_parse(value: str | None, *, field: str) -> date | datetime | None:
    """An ISO date (a whole local day) or datetime (naive = local time) within the accepted range; None when empty."""
    if value is None or value == "":
        return None
    if "T" in value or " " in value.strip():
        return datetime_parse(value, field=field)
    try:
        parsed = parse_date(value)
    except ValueError:
        parsed = None
    if parsed is None:
        raise MomentError(f"{field} must be an ISO date (YYYY-MM-DD) or datetime, got {value!r}", field=field)
    moment_check(parsed, field=field)
    return parsed
