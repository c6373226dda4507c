"""The emotional-tendency step: stored per person and overall, idempotent, each person's own."""

from __future__ import annotations

import datetime as dt
import itertools

from django.utils import timezone

from anima.core.llm.testing import scripted
from conversations.models import Person, Platform, Role
from memory.models import EmotionalTendency
from sleep.context import StepContext
from sleep.services import sleep_cycle_run
from sleep.steps import emotional_tendency, light_sleep
from tests.factories import ConversationFactory, LimbicAnchorFactory, MessageFactory, PersonFactory

DAY = dt.date(2026, 11, 20)
CALM = [(0.6, 0.3), (0.5, 0.35), (0.7, 0.25), (0.6, 0.3), (0.55, 0.3)]


def _ctx(day: dt.date) -> StepContext:
    return StepContext(run_id=0, day=day, mode="full", force=False, run_key="test", token_budget=None)


def calm_days(person: Person | None, first: dt.date, count: int) -> None:
    for i, (valence, arousal) in zip(range(count), itertools.cycle(CALM), strict=False):
        LimbicAnchorFactory(person=person, day=first + dt.timedelta(days=i), valence=valence, arousal=arousal)


def stressed_days(person: Person | None, first: dt.date, count: int) -> None:
    for i in range(count):
        LimbicAnchorFactory(person=person, day=first + dt.timedelta(days=i), valence=-0.5, arousal=0.7)


def rows() -> list[dict]:
    return list(EmotionalTendency.objects.order_by("day", "person_id").values())


def test_the_step_stores_each_persons_tendency_and_the_overall_one():
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    calm_days(leo, DAY - dt.timedelta(days=29), 23)
    stressed_days(leo, DAY - dt.timedelta(days=5), 6)
    calm_days(maya, DAY - dt.timedelta(days=29), 30)

    output = emotional_tendency(_ctx(DAY))

    assert output == {
        "day": DAY.isoformat(),
        "anchors": 59,
        "persons": 2,
        "dropped": 0,
        "notable": {str(leo.pk): "stressed"},
        "overall_mood": "stressed",  # the companion's week as a whole, Maya's calm days included
    }
    leo_row = EmotionalTendency.objects.get(person=leo, day=DAY)
    assert (leo_row.mood, leo_row.mood_since, leo_row.week_days) == ("stressed", DAY - dt.timedelta(days=5), 6)
    assert leo_row.week_valence == -0.5
    assert [shift["day"] for shift in leo_row.shifts][:1] == [(DAY - dt.timedelta(days=5)).isoformat()]
    # Maya's row is hers alone: Leo's stressed week does not move it.
    maya_row = EmotionalTendency.objects.get(person=maya, day=DAY)
    assert (maya_row.mood, maya_row.month_anchors, maya_row.shifts) == ("", 30, [])
    assert maya_row.week_valence > 0.5
    overall = EmotionalTendency.objects.get(person=None, day=DAY)
    assert overall.month_anchors == 59


def test_rerunning_a_day_changes_nothing_and_asks_no_model():
    leo = PersonFactory(slug="leo")
    calm_days(leo, DAY - dt.timedelta(days=29), 24)
    stressed_days(leo, DAY - dt.timedelta(days=5), 6)
    emotional_tendency(_ctx(DAY))
    before = rows()

    # A model configured or not, the step is numbers only: a provider with no answers is never asked.
    with scripted({}) as provider:
        emotional_tendency(_ctx(DAY))

    assert provider.calls == []

    assert rows() == before
    assert len(before) == 2


def test_a_person_without_anchors_in_the_window_loses_the_days_row():
    leo = PersonFactory(slug="leo")
    LimbicAnchorFactory(person=leo, day=DAY, valence=-0.5)
    later = DAY + dt.timedelta(days=31)
    # A row for a day whose window no longer holds any anchor of Leo's (as after redacting them).
    EmotionalTendency.objects.create(person=leo, day=later, mood="low")

    output = emotional_tendency(_ctx(later))

    assert output["dropped"] == 1
    assert list(EmotionalTendency.objects.filter(day=later).values_list("person", flat=True)) == [None]


def test_the_nightly_cycle_runs_the_step_after_light_sleep():
    leo = PersonFactory(slug="leo")
    LimbicAnchorFactory(person=leo, day=DAY, valence=0.4)

    run = sleep_cycle_run(day=DAY)

    step = run.steps.get(step="emotional-tendency")
    assert step.status == "succeeded", step.error
    assert step.output["persons"] == 1
    assert EmotionalTendency.objects.filter(day=DAY).count() == 2


def test_with_the_offline_provider_anchors_of_worried_days_make_a_notable_week():
    """Light sleep (offline, no model) writes the anchors; the step turns them into a tendency."""
    leo = PersonFactory(slug="leo", display_name="Leo")
    conversation = ConversationFactory(person=leo, platform=Platform.WEB)
    relieved = "I am so relieved that the exam is over, a quiet evening at home."
    worried = "I am really anxious about the launch tomorrow, I can't sleep."
    first = DAY - dt.timedelta(days=16)
    for offset in range(17):
        day = first + dt.timedelta(days=offset)
        noon = timezone.make_aware(dt.datetime.combine(day, dt.time(12)))
        text = worried if day > DAY - dt.timedelta(days=4) else relieved
        MessageFactory(conversation=conversation, role=Role.USER, content=text, created_at=noon)
        light_sleep(_ctx(day))

    output = emotional_tendency(_ctx(DAY))

    assert output["notable"] == {str(leo.pk): "stressed"}
    row = EmotionalTendency.objects.get(person=leo, day=DAY)
    assert (row.mood_since, row.week_days, row.month_days) == (DAY - dt.timedelta(days=3), 7, 17)
    assert row.week_valence < 0 < row.month_valence
