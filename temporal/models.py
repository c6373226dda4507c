"""Global day / month / year digests, stored as citable ``temporal_summary`` entities."""

from __future__ import annotations

from django.db import models

from anima.core.models import Component, ComponentKind, ComponentManager, Entity


class Window(models.TextChoices):
    DAY = "day", "Day"
    MONTH = "month", "Month"
    YEAR = "year", "Year"


class TemporalSummary(ComponentKind, Entity):
    """Body is ``{window: day|month|year, period_start: YYYY-MM-DD}``; unique per (window, period_start)."""

    component = Component.TEMPORAL_SUMMARY
    objects = ComponentManager(Component.TEMPORAL_SUMMARY)

    class Meta:
        proxy = True
        verbose_name_plural = "temporal summaries"


class TickMark(models.Model):
    """The newest half-hour bucket a finished temporal tick has summarised (a single row).

    Turn assembly freezes a bucket's peer block only once a tick has written that bucket's
    chunks: a turn between the bucket's close and the tick would otherwise freeze it empty.
    """

    bucket = models.DateTimeField()
    finished_at = models.DateTimeField()

    class Meta:
        db_table = "temporal_tick_mark"

    def __str__(self) -> str:
        return f"ticked through {self.bucket:%Y-%m-%d %H:%M}"
