from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from anima.core.admin import StoredDetailsMixin
from temporal.models import TemporalSummary, Window


class WindowFilter(admin.SimpleListFilter):
    title = "window"
    parameter_name = "window"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return list(Window.choices)

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(body__window=self.value()) if self.value() else queryset


@admin.register(TemporalSummary)
class TemporalSummaryAdmin(StoredDetailsMixin, admin.ModelAdmin):
    list_display = ("id", "window", "period_start", "short_content", "updated_at")
    list_filter = (WindowFilter,)
    search_fields = ("content",)
    ordering = ("-source_day", "-id")
    # The body (window, period, per-conversation sections) is written by the summary step: read here, not edited.
    fields = ("content", "rendered_body", "source_day", "created_at", "updated_at")
    readonly_fields = ("rendered_body", "created_at", "updated_at")

    @admin.display(description="window")
    def window(self, obj: TemporalSummary) -> str:
        return obj.body.get("window", "")

    @admin.display(description="period start")
    def period_start(self, obj: TemporalSummary) -> str:
        return obj.body.get("period_start", "")

    @admin.display(description="content")
    def short_content(self, obj: TemporalSummary) -> str:
        return obj.content[:100]
