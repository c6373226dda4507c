"""Reads by local calendar day: the day's dialogue, and the temporal summaries as a reader may see them."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cached_property

from django.db.models import QuerySet
from django.db.models.functions import Length
from django.utils import timezone

from anima.core.calendar import day_window
from anima.core.segmentation import text_in_script_of
from anima.core.text import clip
from conversations.models import Conversation, Message, Person, Platform, Role
from conversations.selectors import conversation_person
from temporal.models import TemporalSummary, Window
from temporal.privacy import cross_person_mode, sections_render, summary_sections

# Conversations that never enter light sleep, dream or the day digest.
EXCLUDED_PLATFORMS = (Platform.CRON, Platform.DEBUG)
DIALOGUE_ROLES = (Role.USER, Role.ASSISTANT)


def dialogue_messages() -> QuerySet[Message]:
    """User + assistant messages of user-facing conversations (tools and system stripped), in dialogue order."""
    return (
        Message.objects.filter(role__in=DIALOGUE_ROLES)
        .exclude(conversation__platform__in=EXCLUDED_PLATFORMS)
        .select_related("conversation", "conversation__person")
        .order_by("conversation_id", "created_at", "id")
    )


def day_messages(*, day: date, conversation_id: int | None = None) -> QuerySet[Message]:
    """That local day's dialogue messages (``dialogue_messages``); of one conversation only when ``conversation_id``
    is given."""
    start, end = day_window(day)
    messages = dialogue_messages().filter(created_at__gte=start, created_at__lt=end)
    return messages if conversation_id is None else messages.filter(conversation=conversation_id)


def person_label(person: Person | None) -> str:
    """How a summary names a person ("" for nobody)."""
    if person is None:
        return ""
    # An imported person often has its slug as display name; a slug reads better capitalised.
    if person.display_name and person.display_name != person.slug:
        return person.display_name
    return person.slug.replace("-", " ").title()


def person_names(*, person: Person) -> tuple[str, ...]:
    """What a person is called in text, longest first: their label (as summaries and facts name them), display
    name and slug read as a name."""
    names = {n for n in (person_label(person), person.display_name, person.slug.replace("-", " ").title()) if n}
    return tuple(sorted(names, key=lambda name: (-len(name), name)))


def _name_pattern(person: Person) -> re.Pattern:
    """A person's names (``person_names``) as whole words, capitalised as prose writes a name (so the name "Will" is
    not the word "will"); a Chinese name wherever it stands."""
    return _names_pattern(person_names(person=person))


# A night checks every fact and summary section against everyone's names: each set is compiled once.
@functools.lru_cache(maxsize=4096)
def _names_pattern(names: tuple[str, ...]) -> re.Pattern:
    spelled = [rf"(?<![A-Za-z0-9]){re.escape(n)}(?![A-Za-z0-9])" if n.isascii() else re.escape(n) for n in names]
    return re.compile("|".join(spelled))


def persons_named(text: str, *, persons: Iterable[Person]) -> list[Person]:
    """Those of ``persons`` whom ``text`` names."""
    return [person for person in persons if _name_pattern(person).search(text)]


@dataclass
class DayConversation:
    conversation: Conversation
    messages: list[Message]
    truncated: bool = False

    @cached_property
    def person(self) -> Person | None:
        """Who the conversation is with: its person, else the one its channel account is mapped to."""
        return conversation_person(conversation=self.conversation)

    @property
    def person_name(self) -> str:
        return person_label(self.person)

    def meta(self) -> dict:
        return {
            "title": self.conversation.title,
            "channel": self.conversation.channel_name,
            "person": self.person_name,
        }

    def dialogue(self) -> list[dict]:
        return [
            {"role": m.role, "at": timezone.localtime(m.created_at).strftime("%H:%M"), "content": m.content}
            for m in self.messages
        ]


def day_conversations(
    *, day: date, max_chars: int | None = None, conversation_id: int | None = None
) -> list[DayConversation]:
    """Conversations with dialogue on ``day`` (or only ``conversation_id``), each with only that day's messages,
    capped at ``max_chars``."""
    grouped: dict[int, DayConversation] = {}
    used: dict[int, int] = {}
    for message in day_messages(day=day, conversation_id=conversation_id):
        item = grouped.setdefault(message.conversation_id, DayConversation(message.conversation, []))
        size = used.get(message.conversation_id, 0) + len(message.content)
        if max_chars is not None and size > max_chars:
            item.truncated = True
            continue
        used[message.conversation_id] = size
        item.messages.append(message)
    return [item for item in grouped.values() if item.messages]


def day_conversation_ids(*, day: date, max_chars: int | None = None) -> list[int]:
    """Ids of ``day_conversations`` (same filter, same order) without loading their messages."""
    messages = day_messages(day=day)
    if max_chars is not None:
        # A conversation keeps a message when one alone fits max_chars (see day_conversations).
        messages = messages.annotate(chars=Length("content")).filter(chars__lte=max_chars)
    return list(messages.order_by("conversation_id").values_list("conversation_id", flat=True).distinct())


def temporal_summaries(*, window: Window | str, start: date, end: date) -> QuerySet[TemporalSummary]:
    """Summaries of ``window`` whose period starts in [start, end), oldest first."""
    return TemporalSummary.objects.filter(body__window=str(window), source_day__gte=start, source_day__lt=end).order_by(
        "source_day"
    )


def temporal_summary_get(*, window: Window | str, period_start: date) -> TemporalSummary | None:
    return TemporalSummary.objects.filter(body__window=str(window), body__period_start=period_start.isoformat()).first()


def _period_lines(
    *,
    window: Window,
    start: date,
    end: date,
    label_chars: int,
    viewer_ids: frozenset[int] | None,
    mode: str,
    chinese: bool,
    script: str,
) -> list[str]:
    """Newest first: the system prompt reads from yesterday backwards; one sub-line per section shown."""
    lines = []
    for row in reversed(list(temporal_summaries(window=window, start=start, end=end))):
        sections = summary_sections(body=row.body, content=row.content)
        shown = sections_render(sections, viewer_ids=viewer_ids, mode=mode, chinese=chinese, script=script)
        if shown:
            items = "".join("\n  - " + text.strip().replace("\n", "\n    ") for text in shown)
            lines.append(f"- {row.source_day.isoformat()[:label_chars]}:{items}")
    return lines


# The section's heading and its periods' (yesterday … earlier), in the language the prompt is framed in.
TEMPORAL_HEADINGS = {
    "zh": ("时间摘要", ("昨天", "近 7 天", "近 30 天", "近 90 天", "近一年", "更早")),
    "en": (
        "Time summaries",
        ("Yesterday", "Last 7 days", "Last 30 days", "Last 90 days", "Last year", "Earlier"),
    ),
}


def temporal_prompt_section(
    *, today: date, max_chars: int, viewer_ids: frozenset[int] | None, chinese: bool, script: str = ""
) -> str:
    """The system prompt's time summaries (yesterday and earlier, rolling), cut at ``max_chars``; "" when empty.

    昨天 = day −1; 近 7 天 = days −7…−2; 近 30 天 = days −30…−8; 近 90 天 and 近一年 = month
    summaries starting in [−90, −30) and [−365, −90); 更早 = years before the one a year ago.
    ``viewer_ids`` are the persons whose sections the reader sees in full (None: everyone's); the
    others' follow ``memory.temporal_summary.cross_person``. Headings and topic lines are in the reader's
    language (``chinese``: 「## 时间摘要」, else "## Time summaries"), their Chinese in ``script``'s characters
    (``conversation_script``: 「## 時間摘要」, 「Maya: 學習」); the summaries' own text as written.
    """

    def ago(days: int) -> date:
        return today - timedelta(days=days)

    mode = cross_person_mode()

    def lines(window: Window, start: date, end: date, label_chars: int) -> list[str]:
        return _period_lines(
            window=window,
            start=start,
            end=end,
            label_chars=label_chars,
            viewer_ids=viewer_ids,
            mode=mode,
            chinese=chinese,
            script=script,
        )

    year_ago = ago(365)
    heading, titles = TEMPORAL_HEADINGS["zh" if chinese else "en"]
    heading = text_in_script_of(heading, like=script)
    titles = [text_in_script_of(title, like=script) for title in titles]
    found = [
        lines(Window.DAY, ago(1), today, 10),
        lines(Window.DAY, ago(7), ago(1), 10),
        lines(Window.DAY, ago(30), ago(7), 10),
        lines(Window.MONTH, ago(90), ago(30), 7),
        lines(Window.MONTH, year_ago, ago(90), 7),
        lines(Window.YEAR, date(1, 1, 1), date(year_ago.year, 1, 1), 4),
    ]
    body = "\n\n".join(
        f"### {title}\n" + "\n".join(period) for title, period in zip(titles, found, strict=True) if period
    )
    if not body:
        return ""
    return clip(f"## {heading}\n\n{body}", max_chars)
