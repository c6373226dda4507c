"""The console's mood chart: valence and arousal per day as a server-rendered SVG (no front-end build).

Two panels share the day axis: valence (−1..1) above, arousal (0..1) below. Each day with
anchors is a dot linking to those anchors; a dashed line follows the stored 7-day means.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import date, timedelta

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from memory.tendency import DayPoint

WIDTH = 760
# Room on the right for half of the last day label, which is centred on its tick.
LEFT, RIGHT = 56, 36
PANEL_HEIGHT = {"valence": 170, "arousal": 110}
PANEL_RANGE = {"valence": (-1.0, 1.0), "arousal": (0.0, 1.0)}
PANEL_TICKS = {"valence": (-1.0, -0.5, 0.0, 0.5, 1.0), "arousal": (0.0, 0.5, 1.0)}
PANEL_COLOR = {"valence": "#2b6cb0", "arousal": "#c05621"}
TOP, GAP, BOTTOM = 24, 34, 30
HEIGHT = TOP + PANEL_HEIGHT["valence"] + GAP + PANEL_HEIGHT["arousal"] + BOTTOM


# The x axis covers the days with data, a day of margin each side, and at least a week: three days of
# data in a 90-day window are drawn across the chart, not squeezed against its edge.
SPAN_MARGIN = timedelta(days=1)
SPAN_MIN_DAYS = 6


def mood_chart_span(*, since: date, until: date, days: Iterable[date]) -> tuple[date, date]:
    """The first and last day the chart draws: the data's span (padded, at least a week) within since..until."""
    shown = sorted(day for day in days if since <= day <= until)
    if not shown:
        return since, until
    start, end = max(since, shown[0] - SPAN_MARGIN), min(until, shown[-1] + SPAN_MARGIN)
    while (end - start).days < SPAN_MIN_DAYS and (start > since or end < until):
        if end < until:
            end += timedelta(days=1)
        if (end - start).days < SPAN_MIN_DAYS and start > since:
            start -= timedelta(days=1)
    return start, end


def _x(day: date, since: date, until: date) -> float:
    span = max((until - since).days, 1)
    return LEFT + (day - since).days / span * (WIDTH - LEFT - RIGHT)


def _panel_top(dimension: str) -> float:
    return TOP if dimension == "valence" else TOP + PANEL_HEIGHT["valence"] + GAP


def _y(dimension: str, value: float) -> float:
    low, high = PANEL_RANGE[dimension]
    clamped = min(max(value, low), high)
    return _panel_top(dimension) + (high - clamped) / (high - low) * PANEL_HEIGHT[dimension]


def _points_attr(coordinates: Sequence[tuple[float, float]]) -> str:
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in coordinates)


def _panel(dimension: str) -> SafeString:
    top = _panel_top(dimension)
    grid = format_html_join(
        "",
        '<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}" stroke-width="1"/>'
        '<text x="{}" y="{}" font-size="10" text-anchor="end" fill="#666">{}</text>',
        (
            (
                LEFT,
                WIDTH - RIGHT,
                f"{_y(dimension, tick):.1f}",
                f"{_y(dimension, tick):.1f}",
                "#999" if tick == 0 and dimension == "valence" else "#e2e2e2",
                LEFT - 6,
                f"{_y(dimension, tick) + 3:.1f}",
                f"{tick:g}",
            )
            for tick in PANEL_TICKS[dimension]
        ),
    )
    return format_html(
        '<text x="{}" y="{}" font-size="11" font-weight="bold" fill="{}">{}</text>{}',
        LEFT,
        f"{top - 5:.1f}",
        PANEL_COLOR[dimension],
        dimension,
        grid,
    )


def _day_axis(*, since: date, until: date) -> SafeString:
    span = (until - since).days
    step = max(span // 6, 1)
    ticks = [since.fromordinal(since.toordinal() + offset) for offset in range(0, span + 1, step)]
    y = HEIGHT - BOTTOM + 16
    return format_html_join(
        "",
        '<text x="{}" y="{}" font-size="10" text-anchor="middle" fill="#666">{}</text>',
        ((f"{_x(day, since, until):.1f}", y, day.isoformat()) for day in ticks),
    )


def mood_chart_svg(
    *,
    points: Sequence[DayPoint],
    since: date,
    until: date,
    href: Callable[[DayPoint], str],
    week_means: Sequence[tuple[date, float | None, float | None]] = (),
    notable: Sequence[tuple[date, str]] = (),
) -> SafeString:
    """The chart of ``points`` between ``since`` and ``until``; ``href`` gives each dot's link to its anchors.

    ``week_means`` are the stored tendencies (day, 7-day valence, 7-day arousal), drawn dashed;
    ``notable`` the days whose week was notable (day, mood), shaded behind both panels.
    """
    shown = [p for p in points if since <= p.day <= until]
    column = (WIDTH - LEFT - RIGHT) / max((until - since).days, 1)
    layers = [
        format_html_join(
            "",
            '<rect class="notable" x="{}" y="{}" width="{}" height="{}" fill="#f6e05e" opacity="0.25">'
            "<title>{}: the week up to this day was {}</title></rect>",
            (
                (
                    f"{_x(day, since, until) - column / 2:.1f}",
                    TOP,
                    f"{column:.1f}",
                    HEIGHT - TOP - BOTTOM,
                    day.isoformat(),
                    mood,
                )
                for day, mood in notable
                if since <= day <= until
            ),
        ),
        _panel("valence"),
        _panel("arousal"),
    ]
    for dimension in ("valence", "arousal"):
        color = PANEL_COLOR[dimension]
        index = 1 if dimension == "valence" else 2
        means = [
            (_x(row[0], since, until), _y(dimension, row[index]))
            for row in week_means
            if row[index] is not None and since <= row[0] <= until
        ]
        if len(means) > 1:
            layers.append(
                format_html(
                    '<polyline class="week-mean" points="{}" fill="none" stroke="{}" stroke-width="1.5"'
                    ' stroke-dasharray="5 4" opacity="0.7"/>',
                    _points_attr(means),
                    color,
                )
            )
        line = [(_x(p.day, since, until), _y(dimension, getattr(p, dimension))) for p in shown]
        if len(line) > 1:
            layers.append(
                format_html(
                    '<polyline points="{}" fill="none" stroke="{}" stroke-width="1" opacity="0.5"/>',
                    _points_attr(line),
                    color,
                )
            )
        layers.append(
            format_html_join(
                "",
                '<a class="mood-point" data-day="{}" data-dimension="{}" href="{}"><title>{}</title>'
                '<circle cx="{}" cy="{}" r="{}" fill="{}"/></a>',
                (
                    (
                        point.day.isoformat(),
                        dimension,
                        href(point),
                        f"{point.day.isoformat()}: {dimension} {getattr(point, dimension):+.2f}, "
                        f"{len(point.anchor_ids)} anchor{'s' if len(point.anchor_ids) != 1 else ''}",
                        f"{x:.1f}",
                        f"{y:.1f}",
                        # Stronger days draw bigger dots.
                        f"{3 + 3 * point.intensity:.1f}",
                        color,
                    )
                    for point, (x, y) in zip(shown, line, strict=True)
                ),
            )
        )
    layers.append(_day_axis(since=since, until=until))
    return format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" class="mood-chart" width="{}" height="{}" viewBox="0 0 {} {}"'
        ' role="img" aria-label="valence and arousal per day">{}</svg>',
        WIDTH,
        HEIGHT,
        WIDTH,
        HEIGHT,
        format_html_join("", "{}", ((layer,) for layer in layers)),
    )
