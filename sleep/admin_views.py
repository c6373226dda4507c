"""The Sleep page of the Habitat console: diagnostic runs and the pipeline history."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from anima.core.admin import json_block
from anima.core.db import row_id_parse
from anima.core.errors import Unavailable
from anima.core.forms import RangeDateField
from anima.core.llm.minds import mind_configured, minds_of_runs
from sleep.cycle import SLEEP_CYCLE, sleep_cycle_default_day
from sleep.models import DeepSleepMode, PipelineRun, PipelineStepRun, StepStatus
from sleep.pipeline import PipelineError
from sleep.selectors import sleep_run_failures
from sleep.services import deep_sleep_changes, deep_sleep_night_restore, sleep_cycle_request, sleep_runs_reap
from sleep.tasks import sleep_run_dispatch

RUNS_PER_PAGE = 15
FULL_CYCLE = ""
# A partial step is retried like a failed one: what it did is kept, what failed is tried again.
RETRYABLE = (StepStatus.FAILED, StepStatus.PARTIAL)


class SleepRunForm(forms.Form):
    day = RangeDateField(widget=forms.DateInput(attrs={"type": "date"}), help_text="local calendar day to sleep")
    step = forms.ChoiceField(
        choices=[(FULL_CYCLE, "full cycle"), *((name, name) for name in SLEEP_CYCLE.step_names)],
        required=False,
    )
    force = forms.BooleanField(required=False, help_text="skip the dependency check of a single step")
    mode = forms.ChoiceField(choices=DeepSleepMode.choices, initial=DeepSleepMode.FULL, help_text="deep-sleep mode")


def sleep_dashboard(request: HttpRequest) -> HttpResponse:
    """GET: the run form and the pipeline history; POST: run (or retry) and redirect back."""
    if not request.user.has_perm("sleep.view_pipelinerun"):
        raise PermissionDenied
    if request.method == "POST":
        if not request.user.has_perm("sleep.add_pipelinerun"):
            raise PermissionDenied
        if "retry" in request.POST:
            return _retry(request)
        if "restore_night" in request.POST:
            return _restore_night(request)
        form = SleepRunForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            _start(request, day=data["day"], step=data["step"] or None, force=data["force"], mode=data["mode"])
            return HttpResponseRedirect(reverse("admin:sleep_dashboard"))
    else:
        form = SleepRunForm(initial={"day": sleep_cycle_default_day(), "mode": DeepSleepMode.FULL})
    sleep_runs_reap()  # a run whose process died is shown failed, never "running"
    page = Paginator(PipelineRun.objects.prefetch_related("steps"), RUNS_PER_PAGE).get_page(request.GET.get("page"))
    minds = minds_of_runs(run_keys=[f"{SLEEP_CYCLE.run_key_prefix}:{run.pk}" for run in page])
    for run in page:
        run.minds = minds.get(f"{SLEEP_CYCLE.run_key_prefix}:{run.pk}", [])
        run.step_rows = list(run.steps.all())
        run.failures = sleep_run_failures(run=run)
        for step in run.step_rows:
            step.rendered_output = step_output_render(step=step)
            step.restorable = bool(deep_sleep_changes(step_run=step)) and not step.output.get("restored")
    context = {
        **admin.site.each_context(request),
        "title": "Sleep",
        "form": form,
        "page": page,
        "opts": PipelineRun._meta,
        "through_celery": bool(settings.CELERY_BROKER_URL),
        "can_run": request.user.has_perm("sleep.add_pipelinerun"),
        "mind": mind_configured(),
        "can_restore": request.user.has_perm("memory.change_semanticmemory"),
    }
    return TemplateResponse(request, "admin/sleep/dashboard.html", context)


def _retry(request: HttpRequest) -> HttpResponse:
    row_id = row_id_parse(request.POST.get("retry", ""))
    if row_id is None:
        raise Http404("no such step run")
    failed = get_object_or_404(PipelineStepRun.objects.select_related("run"), pk=row_id)
    if failed.status not in RETRYABLE:
        messages.error(request, f"{failed.step} #{failed.attempt} did not fail; nothing to retry.")
    else:
        _start(
            request,
            day=failed.run.day,
            step=failed.step,
            force=bool(failed.run.options.get("force")),
            mode=failed.run.mode,
        )
    return HttpResponseRedirect(reverse("admin:sleep_dashboard"))


def _restore_night(request: HttpRequest) -> HttpResponse:
    """Undo every memory change of one night's deep sleep (the button beside its changes)."""
    if not request.user.has_perm("memory.change_semanticmemory"):
        raise PermissionDenied
    row_id = row_id_parse(request.POST.get("restore_night", ""))
    if row_id is None:
        raise Http404("no such step run")
    step_run = get_object_or_404(PipelineStepRun, pk=row_id)
    try:
        outcome = deep_sleep_night_restore(step_run=step_run, by=f"console:{request.user.get_username()}")
    except PipelineError as exc:
        messages.error(request, f"Not restored: {exc}")
    else:
        skipped = f", {len(outcome['skipped'])} left as they are (changed since)" if outcome["skipped"] else ""
        messages.success(
            request,
            f"Restored the night of run {step_run.run_id}: {len(outcome['restored'])} memories back, "
            f"{len(outcome['retired'])} the night made retired, {len(outcome['pins'])} pins reversed{skipped}.",
        )
    return HttpResponseRedirect(reverse("admin:sleep_dashboard"))


def _start(request: HttpRequest, *, day: dt.date, step: str | None, force: bool, mode: str) -> None:
    """Queue the run (a worker with a broker, else a background thread); the outcome becomes a message."""
    what = f"{step or 'full cycle'} for {day}" + (" (force)" if force else "") + f", mode {mode}"
    try:
        run = sleep_cycle_request(day=day, step=step, force=force, mode=mode)
    except PipelineError as exc:
        messages.error(request, f"Not run: {exc}")
        return
    try:
        sleep_run_dispatch(run)
    except Unavailable as exc:
        messages.error(request, f"Not run: {exc}")
        return
    where = "on the Celery worker" if settings.CELERY_BROKER_URL else "in the background"
    messages.info(request, f"Started {what} (run {run.pk}) {where}; refresh to follow it in the history.")


def step_output_render(*, step: PipelineStepRun) -> SafeString:
    """A step's output for reading: deep sleep as per-round summaries with their change logs and what was
    refused (and why), else JSON."""
    rounds = step.output.get("rounds") if isinstance(step.output, dict) else None
    if not isinstance(rounds, list):
        return json_block(step.output) if step.output else format_html("{}", "—")
    rest = {key: value for key, value in step.output.items() if key not in {"rounds", "restored"}}
    restored = step.output.get("restored")
    return format_html(
        "{}{}<ol class='anima-rounds'>{}</ol>",
        format_html("<div>{}</div>", ", ".join(f"{key}: {value}" for key, value in rest.items())) if rest else "",
        format_html(
            "<div class='anima-restored'>Restored {} by {}: {}</div>",
            restored.get("at", ""),
            restored.get("by", ""),
            json_block({k: v for k, v in restored.items() if k not in {"at", "by"}}),
        )
        if isinstance(restored, dict)
        else "",
        format_html_join("", "<li><strong>{}</strong>: {}{}{}</li>", (_round_parts(r) for r in rounds)),
    )


def _ids_html(ids: list[int]) -> SafeString:
    return format_html_join(
        ", ", "<a href='{}'>#{}</a>", ((reverse("admin:memory_semanticmemory_change", args=[i]), i) for i in ids)
    )


def _round_parts(entry: dict[str, Any]) -> tuple[str, str, SafeString, SafeString]:
    changes = entry.get("changes") or []
    refused = entry.get("refused") or []
    table = SafeString("")
    if changes:
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    change.get("action", ""),
                    _ids_html(change.get("ids", [])),
                    json_block(change.get("before")),
                    json_block(change.get("after")),
                )
                for change in changes
            ),
        )
        table = format_html(
            "<table class='anima-changes'><thead><tr><th>action</th><th>ids</th><th>before</th><th>after</th></tr>"
            "</thead><tbody>{}</tbody></table>",
            rows,
        )
    refusals = SafeString("")
    if refused:
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            ((r.get("action", ""), _ids_html(r.get("ids", [])), r.get("reason", "")) for r in refused),
        )
        refusals = format_html(
            "<table class='anima-refused'><thead><tr><th>refused</th><th>ids</th><th>why</th></tr></thead>"
            "<tbody>{}</tbody></table>",
            rows,
        )
    return entry.get("round", "?"), entry.get("summary", ""), table, refusals
