from __future__ import annotations

from django.contrib import admin
from django.urls import URLPattern, URLResolver, path
from django.utils.safestring import SafeString

from anima.core.admin import ReadOnlyInlineMixin
from sleep.admin_views import sleep_dashboard, step_output_render
from sleep.models import PipelineRun, PipelineStepRun


class PipelineStepRunInline(ReadOnlyInlineMixin, admin.TabularInline):
    model = PipelineStepRun
    fields = ("step", "status", "attempt", "started_at", "duration", "rendered_output", "error")
    readonly_fields = fields

    @admin.display(description="duration (s)")
    def duration(self, obj: PipelineStepRun) -> str:
        seconds = obj.duration_seconds
        return "—" if seconds is None else f"{seconds:.2f}"

    @admin.display(description="output")
    def rendered_output(self, obj: PipelineStepRun) -> SafeString:
        return step_output_render(step=obj)


@admin.register(PipelineRun)
class PipelineRunAdmin(admin.ModelAdmin):
    list_display = ("id", "day", "trigger", "mode", "status", "started_at", "finished_at")
    list_filter = ("status", "trigger", "mode")
    date_hierarchy = "day"
    readonly_fields = ("pipeline", "day", "trigger", "mode", "status", "options", "error", "started_at", "finished_at")
    inlines = [PipelineStepRunInline]

    def has_add_permission(self, request) -> bool:
        return False  # runs are started from the Sleep page

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(PipelineStepRun)
class PipelineStepRunAdmin(admin.ModelAdmin):
    list_display = ("id", "run", "step", "status", "attempt", "started_at", "finished_at")
    list_filter = ("step", "status")
    fields = ("run", "step", "status", "attempt", "rendered_output", "error", "started_at", "finished_at")
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="output")
    def rendered_output(self, obj: PipelineStepRun) -> SafeString:
        return step_output_render(step=obj)


# The Sleep page lives at /admin/sleep/dashboard/ on the default admin site: its URL is put in
# front of the site's own patterns.
_site_get_urls = admin.site.get_urls


def _get_urls_with_sleep_dashboard() -> list[URLPattern | URLResolver]:
    return [
        path("sleep/dashboard/", admin.site.admin_view(sleep_dashboard), name="sleep_dashboard"),
        *_site_get_urls(),
    ]


admin.site.get_urls = _get_urls_with_sleep_dashboard
