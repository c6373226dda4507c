"""The numbers of emotional tendencies: windows, trends, when a week is notable, and its line."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.tendency import Anchor, day_points, mood_of, tendency_compute, tendency_line

DAY = dt.date(2026, 11, 28)
# Calm, content days vary a little, as real ones do.
CALM = itertools.cycle([(0.6, 0.3), (0.5, 0.35), (0.7, 0.25), (0.6, 0.3), (0.55, 0.3)])
_ids = itertools.count(1)


def anchor(day: dt.date, valence: float, arousal: float, intensity: float = 0.6) -> Anchor:
    return Anchor(id=next(_ids), day=day, valence=valence, arousal=arousal, intensity=intensity)


def days_back(first: int, last: int) -> list[dt.date]:
    """DAY - first … DAY - last, oldest first."""
    return [DAY - dt.timedelta(days=back) for back in range(first, last - 1, -1)]


def calm(days: list[dt.date]) -> list[Anchor]:
    return [anchor(day, *next(CALM)) for day in days]


def test_a_week_of_stressed_days_after_calm_weeks_is_a_stressed_week_since_its_first_day():
    anchors = calm(days_back(29, 7)) + [anchor(day, -0.5, 0.7) for day in days_back(5, 0)]

    tendency = tendency_compute(anchors=anchors, day=DAY)

    assert tendency.mood == "stressed"
    assert tendency.mood_since == DAY - dt.timedelta(days=5)
    assert tendency.valence_shift < -tendency.valence_threshold < 0
    assert tendency.arousal_shift > tendency.arousal_threshold > 0
    assert (tendency.week.anchors, tendency.week.days, tendency.month.days) == (6, 6, 29)
    assert tendency.week.valence == pytest.approx(-0.5)
    assert tendency.month.valence_trend < 0
    stood_out = {shift["day"] for shift in tendency.shifts}
    assert stood_out == {day.isoformat() for day in days_back(5, 0)}


def test_one_bad_day_in_a_calm_week_is_not_a_notable_week():
    anchors = [*calm(days_back(29, 1)), anchor(DAY, -0.8, 0.9)]

    tendency = tendency_compute(anchors=anchors, day=DAY)

    assert tendency.mood == ""
    # It still shows as a day that stood out.
    assert [shift["day"] for shift in tendency.shifts] == [DAY.isoformat()]


def test_calm_days_after_a_sad_week_are_back_to_usual():
    anchors = calm(days_back(40, 15)) + [anchor(day, -0.6, 0.4) for day in days_back(14, 8)] + calm(days_back(7, 0))

    assert tendency_compute(anchors=anchors, day=DAY - dt.timedelta(days=8)).mood == "low"
    assert tendency_compute(anchors=anchors, day=DAY).mood == ""


def test_too_few_days_tell_nothing():
    sad_week = [anchor(day, -0.9, 0.9) for day in days_back(6, 0)]

    assert tendency_compute(anchors=calm(days_back(29, 24)) + sad_week, day=DAY).mood == ""  # 6 usual days
    assert tendency_compute(anchors=calm(days_back(29, 7)) + sad_week[-2:], day=DAY).mood == ""  # 2 days this week
    assert tendency_compute(anchors=[], day=DAY).week.anchors == 0


def test_a_day_is_the_intensity_weighted_mean_of_its_anchors():
    (point,) = day_points([anchor(DAY, 1.0, 1.0, intensity=0.9), anchor(DAY, -1.0, 0.0, intensity=0.3)])

    assert point.valence == pytest.approx(0.5)
    assert point.arousal == pytest.approx(0.75)
    assert point.intensity == pytest.approx(0.6)
    assert len(point.anchor_ids) == 2


def test_the_trend_is_the_slope_per_week_and_needs_two_days():
    rising = [anchor(day, -0.7 + 0.1 * i, 0.5) for i, day in enumerate(days_back(6, 0))]

    tendency = tendency_compute(anchors=rising, day=DAY)

    assert tendency.week.valence_trend == pytest.approx(0.7)
    assert tendency.week.arousal_trend == pytest.approx(0.0)
    assert tendency_compute(anchors=rising[-1:], day=DAY).week.valence_trend is None


def test_anchors_outside_the_30_days_are_ignored():
    old = anchor(DAY - dt.timedelta(days=30), -1.0, 1.0)
    later = anchor(DAY + dt.timedelta(days=1), -1.0, 1.0)

    tendency = tendency_compute(anchors=[old, later, anchor(DAY, 0.5, 0.5)], day=DAY)

    assert (tendency.month.anchors, tendency.month.valence) == (1, 0.5)


@pytest.mark.parametrize(
    ("valence", "arousal", "mood"),
    [(-1, 1, "stressed"), (-1, 0, "low"), (-1, -1, "low"), (1, 0, "upbeat"), (0, 1, "tense"), (0, -1, "subdued")],
)
def test_the_mood_follows_the_directions(valence, arousal, mood):
    assert mood_of(valence=valence, arousal=arousal) == mood
    assert mood_of(valence=0, arousal=0) == ""


def test_the_line_speaks_the_conversations_language():
    assert tendency_line(name="Leo", mood="stressed", chinese=False) == (
        "Leo has seemed more stressed than usual this week."
    )
    assert tendency_line(name="Leo", mood="stressed", chinese=True) == "这一周 Leo 似乎比平时压力更大。"
    assert tendency_line(name="小明", mood="low", chinese=True) == "这一周小明似乎比平时情绪低落。"
    # A conversation in traditional characters: the words in them, the name (here the surname 于) as written.
    assert tendency_line(name="于小明", mood="low", chinese=True, script="我的貓") == "這一週于小明似乎比平時情緒低落。"


_value = st.floats(min_value=-1, max_value=1, allow_nan=False)
_anchors = st.lists(
    st.tuples(st.integers(min_value=0, max_value=35), _value, st.floats(0, 1), st.floats(0.3, 1)), max_size=60
)


@given(_anchors, st.randoms(use_true_random=False))
def test_the_tendency_does_not_depend_on_the_order_anchors_come_in(raw, rng):
    anchors = [anchor(DAY - dt.timedelta(days=back), v, a, i) for back, v, a, i in raw]
    shuffled = list(anchors)
    rng.shuffle(shuffled)

    assert tendency_compute(anchors=shuffled, day=DAY) == tendency_compute(anchors=anchors, day=DAY)


@given(st.lists(st.tuples(_value, st.floats(0, 1)), min_size=7, max_size=23), st.integers(min_value=3, max_value=7))
def test_a_week_like_the_usual_days_is_never_notable(usual, week_days):
    """Whatever the usual days are, a week that repeats their median day is not a shift."""
    baseline = [anchor(DAY - dt.timedelta(days=7 + i), v, a) for i, (v, a) in enumerate(usual)]
    points = day_points(baseline)
    valences = sorted(p.valence for p in points)
    arousals = sorted(p.arousal for p in points)
    middle = (valences[len(valences) // 2], arousals[len(arousals) // 2])
    week = [anchor(DAY - dt.timedelta(days=i), *middle) for i in range(week_days)]

    tendency = tendency_compute(anchors=baseline + week, day=DAY)

    assert abs(tendency.valence_shift) <= tendency.valence_threshold
    assert tendency.mood == ""
