"""The Habitat admin site: a home page of figures instead of the stock model list, framework apps tucked away."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.template.response import TemplateResponse

from anima.console.selectors import HomeFigures, console_home
from sleep.services import sleep_runs_reap

# Framework apps an operator does not need day to day (scheduler internals, auth plumbing): superusers see
# them in the home page's collapsed "System" section, other staff not at all.
SYSTEM_APPS = frozenset({"auth", "authtoken", "django_celery_beat"})


class HabitatSite(admin.AdminSite):
    site_header = "Anima Habitat"
    site_title = "Habitat"
    index_title = "Home"
    # Anima serves no public site of its own: "View site" opens the API docs.
    site_url = "/api/docs/"

    def get_app_list(self, request: HttpRequest, app_label: str | None = None) -> list[dict[str, Any]]:
        apps = super().get_app_list(request, app_label)
        if not request.user.is_superuser:
            return [app for app in apps if app["app_label"] not in SYSTEM_APPS]
        # Anima's own apps first, the framework's after them (the navigation sidebar lists them in this order).
        return sorted(apps, key=lambda app: app["app_label"] in SYSTEM_APPS)

    def index(self, request: HttpRequest, extra_context: dict | None = None) -> TemplateResponse:
        sleep_runs_reap()  # a run whose process died is shown failed, never "running"
        apps = self.get_app_list(request)
        context = {
            "home": _visible(console_home(), user=request.user),
            "anima_apps": [app for app in apps if app["app_label"] not in SYSTEM_APPS],
            "system_apps": [app for app in apps if app["app_label"] in SYSTEM_APPS],
            **(extra_context or {}),
        }
        return super().index(request, context)


def _visible(home: HomeFigures, *, user) -> HomeFigures:
    """The figures without the rows (memory texts, runs, moods) the user may not view; counts stay."""
    may = user.has_perm
    return replace(
        home,
        last_night=home.last_night if may("sleep.view_pipelinerun") else None,
        failed_steps=home.failed_steps if may("sleep.view_pipelinerun") else [],
        retired=home.retired if may("memory.view_semanticmemory") else [],
        retired_total=home.retired_total if may("memory.view_semanticmemory") else 0,
        moods=home.moods if may("memory.view_emotionaltendency") else [],
    )
