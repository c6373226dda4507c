"""Emotional tendencies: how the limbic anchors of the last 7 and 30 days lean (numbers only, no I/O).

The unit is the day: a conversation's anchors are not independent of each other, so each day
with anchors becomes one point, the intensity-weighted mean of its anchors' valence and arousal.

A week is *notable* when its typical day differs from the typical day of the weeks before it by
more than chance would explain:

- the week is the 7 days up to the slept day, the baseline the 23 days before them;
- both need enough days to have a typical value at all: 3 in the week (a median of fewer is one
  bad day), 7 in the baseline (a week's worth of usual);
- shift = median(week) − median(baseline); medians, so one outlying day moves neither side, and a
  run of bad days that is already over stays out of what counts as usual;
- spread σ = 1.4826 · MAD of the baseline days (the robust estimate of a standard deviation),
  never below one step of the scale anchors are judged on (0.1), since a flat baseline says
  nothing about the size of a difference smaller than its resolution;
- notable when |shift| > z₀.₉₇₅ · √(π/2) · σ · √(1/n_week + 1/n_baseline): the usual two-sided 95 %
  level for a difference of two medians (√(π/2) is the standard error of a median relative to a
  mean's).

Nothing here was tuned on examples: the constants are statistical conventions and the scale's step.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta

from anima.core.segmentation import text_in_script_of
from anima.core.text import is_chinese
from memory.models import Mood

WEEK_DAYS = 7
MONTH_DAYS = 30
MIN_WEEK_DAYS = 3
MIN_BASELINE_DAYS = 7
# Two-sided 95 % normal quantile, the MAD → σ factor for normal data, a median's standard error factor.
Z_95 = 1.959964
MAD_TO_SIGMA = 1.4826
MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2)
# Anchors are judged on a one-decimal scale (the light-sleep prompt's ranges, the offline lexicon).
SCALE_STEP = 0.1
DIMENSIONS = ("valence", "arousal")


@dataclass(frozen=True)
class Anchor:
    id: int
    day: date
    valence: float
    arousal: float
    intensity: float
    person_id: int | None = None


@dataclass(frozen=True)
class DayPoint:
    """One day with anchors: intensity-weighted means and the anchors behind them."""

    day: date
    valence: float
    arousal: float
    intensity: float
    anchor_ids: tuple[int, ...]


@dataclass(frozen=True)
class Window:
    anchors: int = 0
    days: int = 0
    valence: float | None = None
    arousal: float | None = None
    intensity: float | None = None
    valence_trend: float | None = None  # per week
    arousal_trend: float | None = None


@dataclass(frozen=True)
class Tendency:
    day: date
    week: Window
    month: Window
    valence_shift: float | None = None
    arousal_shift: float | None = None
    valence_threshold: float | None = None
    arousal_threshold: float | None = None
    mood: str = ""
    mood_since: date | None = None
    shifts: list[dict] = field(default_factory=list)


def weighted_mean(values: Sequence[float], weights: Sequence[float]) -> float:
    total = sum(weights)
    if total <= 0:
        return sum(values) / len(values)
    return sum(v * w for v, w in zip(values, weights, strict=True)) / total


def day_points(anchors: Iterable[Anchor]) -> list[DayPoint]:
    """One point per day with anchors, oldest first."""
    by_day: dict[date, list[Anchor]] = defaultdict(list)
    for anchor in anchors:
        by_day[anchor.day].append(anchor)
    points = []
    for day in sorted(by_day):
        group = sorted(by_day[day], key=lambda a: a.id)
        weights = [a.intensity for a in group]
        points.append(
            DayPoint(
                day=day,
                valence=weighted_mean([a.valence for a in group], weights),
                arousal=weighted_mean([a.arousal for a in group], weights),
                intensity=sum(weights) / len(weights),
                anchor_ids=tuple(a.id for a in group),
            )
        )
    return points


def _slope_per_week(points: Sequence[DayPoint], dimension: str) -> float | None:
    """Least-squares slope of the daily values against the day, per week; None under two days."""
    if len(points) < 2:
        return None
    xs = [p.day.toordinal() for p in points]
    ys = [getattr(p, dimension) for p in points]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    variance = sum((x - mean_x) ** 2 for x in xs)
    covariance = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    return covariance / variance * WEEK_DAYS


def _window(anchors: Sequence[Anchor], points: Sequence[DayPoint]) -> Window:
    if not anchors:
        return Window()
    weights = [a.intensity for a in anchors]
    return Window(
        anchors=len(anchors),
        days=len(points),
        valence=weighted_mean([a.valence for a in anchors], weights),
        arousal=weighted_mean([a.arousal for a in anchors], weights),
        intensity=sum(weights) / len(weights),
        valence_trend=_slope_per_week(points, "valence"),
        arousal_trend=_slope_per_week(points, "arousal"),
    )


def spread(values: Sequence[float]) -> float:
    """Robust standard deviation (1.4826 · MAD), at least one step of the scale."""
    center = statistics.median(values)
    mad = statistics.median(abs(v - center) for v in values)
    return max(MAD_TO_SIGMA * mad, SCALE_STEP)


def _direction(shift: float, threshold: float) -> int:
    return (shift > 0) - (shift < 0) if abs(shift) > threshold else 0


def mood_of(*, valence: int, arousal: int) -> str:
    """The mood of a notable week from the directions (−1, 0, 1) of its valence and arousal shifts."""
    if valence < 0:
        return Mood.STRESSED.value if arousal > 0 else Mood.LOW.value
    if valence > 0:
        return Mood.UPBEAT.value
    if arousal:
        return Mood.TENSE.value if arousal > 0 else Mood.SUBDUED.value
    return ""


def _since(week: Sequence[DayPoint], *, center: float, sign: int, dimension: str) -> date | None:
    """The first day of the week's closing run on the notable side (else its first day on that side)."""
    side = [(getattr(p, dimension) - center) * sign > 0 for p in week]
    run_start = None
    for point, on_side in zip(reversed(week), reversed(side), strict=True):
        if not on_side:
            break
        run_start = point.day
    if run_start is not None:
        return run_start
    return next((p.day for p, on_side in zip(week, side, strict=True) if on_side), None)


def _stood_out(points: Sequence[DayPoint]) -> list[dict]:
    """Days of the window outside its usual 95 % range (median ± z·σ) in valence or arousal."""
    # As for the baseline: under a week's worth of days there is no "usual" to stand out from.
    if len(points) < MIN_BASELINE_DAYS:
        return []
    bands = {}
    for dimension in DIMENSIONS:
        values = [getattr(p, dimension) for p in points]
        bands[dimension] = (statistics.median(values), Z_95 * spread(values))
    shifts = []
    for point in points:
        directions = {
            dimension: _direction(getattr(point, dimension) - center, width)
            for dimension, (center, width) in bands.items()
        }
        if any(directions.values()):
            shifts.append(
                {
                    "day": point.day.isoformat(),
                    "valence": round(point.valence, 4),
                    "arousal": round(point.arousal, 4),
                    "anchors": list(point.anchor_ids),
                    "valence_direction": directions["valence"],
                    "arousal_direction": directions["arousal"],
                }
            )
    return shifts


def tendency_compute(*, anchors: Iterable[Anchor], day: date) -> Tendency:
    """The tendency of the 30 days up to ``day`` (anchors outside them are ignored)."""
    month_start = day - timedelta(days=MONTH_DAYS - 1)
    week_start = day - timedelta(days=WEEK_DAYS - 1)
    month_anchors = sorted((a for a in anchors if month_start <= a.day <= day), key=lambda a: (a.day, a.id))
    week_anchors = [a for a in month_anchors if a.day >= week_start]
    points = day_points(month_anchors)
    week = [p for p in points if p.day >= week_start]
    baseline = [p for p in points if p.day < week_start]
    result = {
        "day": day,
        "week": _window(week_anchors, week),
        "month": _window(month_anchors, points),
        "shifts": _stood_out(points),
    }
    if len(week) < MIN_WEEK_DAYS or len(baseline) < MIN_BASELINE_DAYS:
        return Tendency(**result)
    directions = {}
    centers = {}
    for dimension in DIMENSIONS:
        base_values = [getattr(p, dimension) for p in baseline]
        centers[dimension] = statistics.median(base_values)
        shift = statistics.median(getattr(p, dimension) for p in week) - centers[dimension]
        threshold = Z_95 * MEDIAN_SE_FACTOR * spread(base_values) * math.sqrt(1 / len(week) + 1 / len(baseline))
        result[f"{dimension}_shift"] = shift
        result[f"{dimension}_threshold"] = threshold
        directions[dimension] = _direction(shift, threshold)
    mood = mood_of(valence=directions["valence"], arousal=directions["arousal"])
    if mood:
        # The day it began: by valence when valence moved, else by arousal.
        dimension = "valence" if directions["valence"] else "arousal"
        result["mood"] = mood
        result["mood_since"] = _since(week, center=centers[dimension], sign=directions[dimension], dimension=dimension)
    return Tendency(**result)


# The English phrase is the mood's label ("More stressed than usual"), lower-cased.
_CHINESE_PHRASES = {
    Mood.STRESSED: "比平时压力更大",
    Mood.LOW: "比平时情绪低落",
    Mood.UPBEAT: "比平时心情更好",
    Mood.TENSE: "比平时更紧绷",
    Mood.SUBDUED: "比平时更沉静",
}


def tendency_line(*, name: str, mood: str, chinese: bool, script: str = "") -> str:
    """The one line a prompt carries about a notable week ("Leo has seemed more stressed than usual this week."),
    its Chinese words in ``script``'s characters (「這一週…壓力更大」) and the name as written."""
    if not chinese:
        return f"{name} has seemed {Mood(mood).label.lower()} this week."
    # A Latin name stands apart from the Chinese around it ("这一周 Leo 似乎…"), a Chinese one does not.
    spaced = f"{name}" if is_chinese(name) else f" {name} "
    return text_in_script_of(f"这一周{spaced}似乎{_CHINESE_PHRASES[mood]}。", like=script, name=name)
