"""Global day / month / year digests, stored as citable ``temporal_summary`` entities."""

from __future__ import annotations

from django.db import models

from anima.models import Component
from memory.models import ComponentManager, ComponentProxy


class Window(models.TextChoices):
    DAY = "day", "Day"
    MONTH = "month", "Month"
    YEAR = "year", "Year"


class TemporalSummary(ComponentProxy):
    """Body is ``{window: day|month|year, period_start: YYYY-MM-DD}``; unique per (window, period_start)."""

    component = Component.TEMPORAL_SUMMARY
    objects = ComponentManager(Component.TEMPORAL_SUMMARY)

    class Meta:
        proxy = True
        verbose_name_plural = "temporal summaries"
