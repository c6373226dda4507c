from __future__ import annotations

from django.contrib import admin

from temporal.models import TemporalSummary


@admin.register(TemporalSummary)
class TemporalSummaryAdmin(admin.ModelAdmin):
    list_display = ("id", "window", "period_start", "short_content", "updated_at")
    search_fields = ("content",)
    fields = ("body", "content", "source_day", "created_at", "updated_at")
    readonly_fields = ("created_at", "updated_at")

    @admin.display(description="window")
    def window(self, obj: TemporalSummary) -> str:
        return obj.body.get("window", "")

    @admin.display(description="period start")
    def period_start(self, obj: TemporalSummary) -> str:
        return obj.body.get("period_start", "")

    @admin.display(description="content")
    def short_content(self, obj: TemporalSummary) -> str:
        return obj.content[:100]
