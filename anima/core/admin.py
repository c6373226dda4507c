from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count, Q, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from anima.core.config import SCHEMA, Field, config_get, config_update, config_validate
from anima.core.models import AutoLlmRun, ForgetTombstone, RuntimeConfig, RuntimeConfigChange

AUDIT_DAYS_SHOWN = 31


def json_block(value: Any) -> SafeString:
    """JSON pretty-printed for reading (CJK kept as characters, not escapes)."""
    return format_html(
        "<pre class='anima-json'>{}</pre>", json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)
    )


# A list longer than this is shown by its first items and how many more there are.
LIST_ITEMS_SHOWN = 12


def readable_block(value: Any) -> SafeString:
    """Stored JSON (an entity's body, a step's details) for reading: keys as labels, lists inline, nesting indented."""
    return format_html("<div class='anima-body'>{}</div>", _readable(value))


def _readable(value: Any) -> SafeString | str:
    if isinstance(value, dict):
        if not value:
            return "—"
        return format_html(
            "<dl>{}</dl>",
            format_html_join("", "<dt>{}</dt><dd>{}</dd>", ((key, _readable(value[key])) for key in value)),
        )
    if isinstance(value, list):
        if not value:
            return "—"
        if all(not isinstance(item, dict | list) for item in value):
            shown = ", ".join(_scalar(item) for item in value[:LIST_ITEMS_SHOWN])
            more = len(value) - LIST_ITEMS_SHOWN
            return f"{shown} … and {more} more" if more > 0 else shown
        return format_html("<ol>{}</ol>", format_html_join("", "<li>{}</li>", ((_readable(item),) for item in value)))
    return _scalar(value)


def _scalar(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


class StoredDetailsMixin:
    """Read-only views of what code writes: an entity's JSON body and the text segmented for keyword search."""

    @admin.display(description="body")
    def rendered_body(self, obj: Any) -> SafeString:
        return readable_block(obj.body)

    @admin.display(description="search words")
    def search_words(self, obj: Any) -> str:
        # What keyword search matches: the text cut into words (Chinese has no spaces), written on every save.
        return obj.fts_segmented or "—"


class ReadOnlyAdmin(admin.ModelAdmin):
    """Audit rows: browsable, never edited or deleted by hand."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class ReadOnlyInlineMixin:
    """An inline shown for reading: rows are written elsewhere (services, sleep), never here."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


_TOKEN_SUMS = {
    "calls": Count("id"),
    "errors": Count("id", filter=~Q(error="")),
    "prompt_tokens": Sum("prompt_tokens"),
    "completion_tokens": Sum("completion_tokens"),
    "total_tokens": Sum("total_tokens"),
}


def llm_token_totals(*, runs: QuerySet[AutoLlmRun]) -> dict[str, list[dict[str, Any]]]:
    """Token totals of ``runs`` per local day (newest first) and per purpose (most tokens first)."""
    per_day = (
        runs.order_by()
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(**_TOKEN_SUMS)
        .order_by("-day")[:AUDIT_DAYS_SHOWN]
    )
    per_purpose = runs.order_by().values("purpose").annotate(**_TOKEN_SUMS).order_by("-total_tokens", "purpose")
    return {"per_day": list(per_day), "per_purpose": list(per_purpose)}


@admin.register(AutoLlmRun)
class AutoLlmRunAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at",
        "purpose",
        "provider",
        "model",
        "dialect",
        "attempt",
        "total_tokens",
        "latency_ms",
        "has_error",
        "run_key",
    )
    list_filter = ("purpose", "provider", "model", "dialect", "attempt", "created_at")
    search_fields = ("purpose", "run_key", "response", "error")
    date_hierarchy = "created_at"
    fields = (
        "created_at",
        "purpose",
        "provider",
        "model",
        ("dialect", "attempt"),
        "run_key",
        ("prompt_tokens", "completion_tokens", "total_tokens"),
        "latency_ms",
        "error",
        "rendered_prompt",
        "rendered_response",
    )
    readonly_fields = ("rendered_prompt", "rendered_response")

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        response = super().changelist_view(request, extra_context)
        context = getattr(response, "context_data", None)
        if context and "cl" in context:  # a redirect or an error page carries no changelist
            # Totals follow the operator's current filters, search and date drill-down.
            context["token_totals"] = llm_token_totals(runs=context["cl"].queryset)
        return response

    @admin.display(boolean=True, description="error")
    def has_error(self, obj: AutoLlmRun) -> bool:
        return bool(obj.error)

    @admin.display(description="prompt")
    def rendered_prompt(self, obj: AutoLlmRun) -> SafeString:
        messages = obj.prompt if isinstance(obj.prompt, list) else []
        if not all(isinstance(message, dict) for message in messages):
            return json_block(obj.prompt)
        # One block per chat message, its text wrapped (a JSON payload pretty-printed), not one long JSON line.
        return format_html_join(
            "",
            "<div class='anima-message'><strong>{}</strong>{}</div>",
            ((message.get("role", "?"), _text_block(message.get("content", ""))) for message in messages),
        )

    @admin.display(description="response")
    def rendered_response(self, obj: AutoLlmRun) -> SafeString:
        return _text_block(obj.response)


def _text_block(text: Any) -> SafeString:
    """Text as written, wrapped; a JSON document pretty-printed."""
    if isinstance(text, str):
        try:
            text = json.loads(text)
        except ValueError:
            return format_html("<pre class='anima-json'>{}</pre>", text)
    return json_block(text)


@dataclass
class ConfigRow:
    name: str
    field: Field
    value: Any
    overridden: bool
    error: str = ""

    @property
    def kind(self) -> str:
        return self.field.kind.__name__


def config_form_values(*, section: str, data: dict[str, str]) -> dict[str, Any]:
    """Typed values from a posted config form; unparsable text is passed on for the validator to name."""
    values: dict[str, Any] = {}
    for name, field in SCHEMA[section].items():
        if field.kind is bool:
            values[name] = name in data
            continue
        raw = data.get(name, "").strip()
        try:
            value = field.kind(raw) if field.kind in (int, float) else raw
        except ValueError:
            value = raw
        # NaN passes every range check and cannot be stored as JSON: leave it as text to be refused.
        values[name] = raw if isinstance(value, float) and not math.isfinite(value) else value
    return values


def config_changed_values(*, section: str, values: dict[str, Any]) -> dict[str, Any]:
    """The posted values that differ from the effective ones (so untouched defaults stay defaults)."""
    current = config_get(section=section)
    return {name: value for name, value in values.items() if current.get(name) != value}


@admin.register(RuntimeConfig)
class RuntimeConfigAdmin(admin.ModelAdmin):
    """The runtime-config page (M11): every section with its defaults; edits go through ``anima.core.config``.

    The raw JSON rows are never edited here, so nothing bypasses validation.
    """

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        # The changelist is the config page; a row's own form would bypass validation.
        return obj is None and super().has_change_permission(request)

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        posted: dict[str, dict[str, Any]] = {}
        errors: dict[str, dict[str, str]] = {}
        if request.method == "POST":
            if not self.has_change_permission(request):
                raise PermissionDenied
            section = request.POST.get("section", "")
            if section not in SCHEMA:
                self.message_user(request, f"Unknown config section {section!r}.", messages.ERROR)
                return HttpResponseRedirect(request.path)
            values = config_form_values(section=section, data=request.POST)
            try:
                config_validate(section=section, values=values)
                changed = config_changed_values(section=section, values=values)
                if changed:
                    config_update(section=section, values=changed, changed_by=request.user.get_username())
            except ValidationError as exc:
                posted[section] = values
                errors[section] = {name: " ".join(texts) for name, texts in exc.message_dict.items()}
                self.message_user(
                    request,
                    f"Not saved {section} (nothing was changed): "
                    + "; ".join(f"{name}: {text}" for name, text in errors[section].items()),
                    messages.ERROR,
                )
            else:
                if changed:
                    self.message_user(request, f"Saved {section}: {', '.join(sorted(changed))}.", messages.SUCCESS)
                else:
                    self.message_user(request, f"Nothing changed in {section}.", messages.INFO)
                return HttpResponseRedirect(request.path)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Runtime config",
            "sections": [
                {
                    "name": section,
                    "rows": self._rows(section, posted.get(section), errors.get(section, {})),
                    "changes": RuntimeConfigChange.objects.filter(section=section)[:10],
                }
                for section in SCHEMA
            ],
            "can_change": self.has_change_permission(request),
            **(extra_context or {}),
        }
        return TemplateResponse(
            request, "admin/anima/runtimeconfig/config.html", context, status=400 if errors else 200
        )

    def _rows(self, section: str, posted: dict[str, Any] | None, errors: dict[str, str]) -> list[ConfigRow]:
        stored = RuntimeConfig.objects.filter(section=section).values_list("values", flat=True).first() or {}
        effective = config_get(section=section)
        values = posted if posted is not None else effective
        return [
            ConfigRow(name=name, field=field, value=values[name], overridden=name in stored, error=errors.get(name, ""))
            for name, field in SCHEMA[section].items()
        ]


@admin.register(RuntimeConfigChange)
class RuntimeConfigChangeAdmin(ReadOnlyAdmin):
    list_display = ("changed_at", "section", "changed_by", "diff")
    list_filter = ("section", "changed_by")
    fields = ("changed_at", "section", "changed_by", "diff", "before", "after")
    readonly_fields = fields

    @admin.display(description="changed")
    def diff(self, obj: RuntimeConfigChange) -> str:
        keys = sorted(set(obj.before) | set(obj.after))
        changed = [key for key in keys if obj.before.get(key) != obj.after.get(key)]
        before, after = obj.before, obj.after
        return ", ".join(f"{key}: {before.get(key, 'default')} → {after.get(key, 'default')}" for key in changed)


@admin.register(ForgetTombstone)
class ForgetTombstoneAdmin(ReadOnlyAdmin):
    """What was forgotten, when, by whom and why: ids and counts, never the content."""

    list_display = ("created_at", "kind", "target_id", "reason", "requested_by", "with_messages", "finished_at")
    list_filter = ("kind", "reason")
    fields = (*list_display, "entity_ids", "counts")
    readonly_fields = fields
