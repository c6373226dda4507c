from __future__ import annotations

from django.contrib import admin

from sleep.models import PipelineRun, PipelineStepRun


class PipelineStepRunInline(admin.TabularInline):
    model = PipelineStepRun
    extra = 0
    can_delete = False
    fields = ("step", "status", "attempt", "started_at", "finished_at", "output", "error")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(PipelineRun)
class PipelineRunAdmin(admin.ModelAdmin):
    list_display = ("id", "day", "trigger", "mode", "status", "started_at", "finished_at")
    list_filter = ("status", "trigger", "mode")
    date_hierarchy = "day"
    readonly_fields = ("pipeline", "day", "trigger", "mode", "status", "options", "error", "started_at", "finished_at")
    inlines = [PipelineStepRunInline]


@admin.register(PipelineStepRun)
class PipelineStepRunAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "step", "status", "attempt", "started_at", "finished_at")
    list_filter = ("step", "status")
    readonly_fields = ("run", "step", "status", "attempt", "output", "error", "started_at", "finished_at")
