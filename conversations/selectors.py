"""Reads over conversations, people and the history timeline."""

from __future__ import annotations

import re
from datetime import date, datetime

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db.models import F, Q, QuerySet

from anima.core.calendar import moment_bound
from anima.core.models import FTS_CONFIG
from anima.core.segmentation import segment_text
from conversations.models import HistoryEntry, Person

HISTORY_MAX_LIMIT = 200
_WORD_RE = re.compile(r"\w+")


def history_search(
    *,
    text: str = "",
    since: date | datetime | None = None,
    until: date | datetime | None = None,
    channel: str | None = None,
    person: Person | None = None,
    global_only: bool = False,
    limit: int | None = None,
) -> QuerySet[HistoryEntry]:
    """Timeline entries filtered by text, time range (inclusive), channel and person.

    Text matches the segmented full-text index (any word, ranked) or, failing that, a
    substring of the entry; without text, entries come oldest first. ``person`` gives that
    person's timeline, ``global_only`` the global one (person-less), neither gives both.
    """
    entries = HistoryEntry.objects.select_related("person")
    if since is not None:
        entries = entries.filter(timestamp__gte=moment_bound(since))
    if isinstance(until, datetime):
        entries = entries.filter(timestamp__lte=until)
    elif until is not None:
        entries = entries.filter(timestamp__lt=moment_bound(until, end_of_day=True))
    if channel:
        entries = entries.filter(channel=channel)
    if person is not None:
        entries = entries.filter(person=person)
    elif global_only:
        entries = entries.filter(person__isnull=True)
    # Only word characters reach websearch syntax, so quotes and "-" in user text are not operators.
    words = _WORD_RE.findall(segment_text(text or "") or "")
    if words:
        # websearch syntax never raises; OR-ing the segmented words matches any of them.
        query = SearchQuery(" or ".join(words), config=FTS_CONFIG, search_type="websearch")
        entries = (
            entries.filter(Q(search_fts=query) | Q(content__icontains=text.strip()))
            .annotate(rank=SearchRank(F("search_fts"), query))
            .order_by("-rank", "-timestamp", "-id")
        )
    else:
        entries = entries.order_by("timestamp", "id")
    if limit is not None:
        entries = entries[: max(1, min(limit, HISTORY_MAX_LIMIT))]
    return entries


def persons_with_identities() -> QuerySet[Person]:
    return Person.objects.prefetch_related("identities").order_by("slug")
