"""Anchors as light sleep writes them, on the days before one night, for the imprint tests."""

from __future__ import annotations

import datetime as dt

from tests.factories import LimbicAnchorFactory

DAY = dt.date(2026, 11, 20)


def anchor(person, day: dt.date, segment: str, *, valence: float = -0.6, intensity: float = 0.6, facts=()):
    """An anchor as light sleep writes it: first person, about a passage of the dialogue."""
    name = person.display_name if person else "them"
    chinese = segment[:1] >= "\u4e00"
    content = f"我感到担心：{name}说「{segment}」" if chinese else f'I feel worried for {name}: they said "{segment}"'
    return LimbicAnchorFactory(
        person=person,
        day=day,
        content=content,
        body={
            "valence": valence,
            "arousal": 0.6,
            "intensity": intensity,
            "kind": "conversation_mood",
            "source_segment": segment,
            "semantic_memory_ids": list(facts),
        },
    )


def days_before(count: int, *, step: int = 3) -> list[dt.date]:
    return [DAY - dt.timedelta(days=step * (count - 1 - i)) for i in range(count)]
