"""Reads over feelings: the limbic anchors of a span of days, the mood chart's points, emotional tendencies."""

from __future__ import annotations

from datetime import date, timedelta

from conversations.models import Conversation, Language, Person
from conversations.selectors import conversation_person
from memory.models import EmotionalTendency, LimbicBlock
from memory.tendency import WEEK_DAYS, Anchor, DayPoint, day_points, tendency_line


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def anchor_figures(body: object) -> tuple[float, float, float] | None:
    """An anchor's (valence, arousal, intensity) from its body; None when one is missing or not a number."""
    body = body if isinstance(body, dict) else {}
    values = [_number(body.get(key)) for key in ("valence", "arousal", "intensity")]
    return None if None in values else (values[0], values[1], values[2])


def limbic_anchors(*, since: date, until: date, person: Person | None = None) -> list[Anchor]:
    """The limbic anchors about the days ``since``..``until``: ``person``'s, or everyone's without one.

    An anchor whose body lacks a numeric valence, arousal or intensity is left out.
    """
    rows = LimbicBlock.anchors.filter(source_day__gte=since, source_day__lte=until)
    if person is not None:
        rows = rows.filter(person=person)
    anchors = []
    for pk, day, person_id, body in rows.order_by("source_day", "id").values_list(
        "pk", "source_day", "person_id", "body"
    ):
        figures = anchor_figures(body)
        if day is not None and figures is not None:
            valence, arousal, intensity = figures
            anchors.append(
                Anchor(id=pk, day=day, valence=valence, arousal=arousal, intensity=intensity, person_id=person_id)
            )
    return anchors


def mood_points(*, since: date, until: date, person: Person | None = None) -> list[DayPoint]:
    """One point per day with anchors (see ``memory.tendency``): what the console's mood chart draws."""
    return day_points(limbic_anchors(since=since, until=until, person=person))


def emotional_tendency_current(*, person: Person, today: date) -> EmotionalTendency | None:
    """``person``'s latest tendency, if it describes a week that overlaps the one up to ``today``."""
    return (
        EmotionalTendency.objects.filter(person=person, day__gte=today - timedelta(days=WEEK_DAYS), day__lte=today)
        .order_by("-day")
        .first()
    )


def emotional_tendency_line(*, conversation: Conversation, today: date, language: str, script: str) -> str:
    """One line about the conversation's own person when their week is notable, else empty; in the prompt's
    ``language`` (its Chinese in ``script``'s characters, ``conversation_script``).

    Only the person the conversation resolves to: never another person's tendency, never the overall one.
    """
    person = conversation_person(conversation=conversation)
    if person is None:
        return ""
    tendency = emotional_tendency_current(person=person, today=today)
    if tendency is None or not tendency.mood:
        return ""
    return tendency_line(
        name=person.display_name or person.slug,
        mood=tendency.mood,
        chinese=language == Language.ZH,
        script=script,
    )
