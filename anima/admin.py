from __future__ import annotations

from django.contrib import admin

from anima.models import AutoLlmRun, RuntimeConfig, RuntimeConfigChange

admin.site.site_header = "Anima Habitat"
admin.site.site_title = "Habitat"
admin.site.index_title = "Memory console"


class ReadOnlyAdmin(admin.ModelAdmin):
    """Audit rows: browsable, never edited by hand."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(AutoLlmRun)
class AutoLlmRunAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "purpose", "provider", "model", "total_tokens", "latency_ms", "has_error", "run_key")
    list_filter = ("purpose", "provider", "model", "created_at")
    search_fields = ("purpose", "run_key", "response", "error")
    date_hierarchy = "created_at"

    @admin.display(boolean=True, description="error")
    def has_error(self, obj: AutoLlmRun) -> bool:
        return bool(obj.error)


@admin.register(RuntimeConfig)
class RuntimeConfigAdmin(admin.ModelAdmin):
    list_display = ("section", "updated_at")
    search_fields = ("section",)


@admin.register(RuntimeConfigChange)
class RuntimeConfigChangeAdmin(ReadOnlyAdmin):
    list_display = ("changed_at", "section", "changed_by")
    list_filter = ("section",)
