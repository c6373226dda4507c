from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.contrib import admin, messages
from django.contrib.admin.views.main import ORDER_VAR
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from anima.core.admin import ReadOnlyAdmin, StoredDetailsMixin, readable_block
from anima.core.models import BlockTag, ForgetReason, MemoryType
from conversations.models import Conversation, Person
from memory import services as memory_services
from memory.forgetting import ForgetPlan, memory_forget, memory_forget_plan
from memory.forgetting_person import person_forget, person_forget_plan
from memory.models import (
    ContentBlock,
    DiaryEntry,
    DreamBlock,
    EmotionalTendency,
    MemoryReference,
    NarrativeBlock,
    SelfLayerBlock,
    SemanticMemory,
    WorkspaceText,
    diary_reading_order,
)
from memory.mood import mood_points
from memory.mood_chart import mood_chart_span, mood_chart_svg
from memory.search import QuerySyntaxError, SearchTimeout
from memory.selectors import (
    RECALL_LIMIT,
    SEARCH_RANK,
    memory_versions,
    ranked_by_ids,
    semantic_memory_search_ids,
)
from memory.subjects import admin as subjects_admin  # noqa: F401  (registers the subjects' pages)
from memory.tendency import DayPoint

# "#123" or "123": the id of a cited memory ([[anima:123]]), ASCII digits only.
CITED_ID_RE = re.compile(r"#?([0-9]{1,18})")
CITING_MESSAGES_SHOWN = 50
# A change of these in the change form makes the memory the operator's: sleep leaves it alone afterwards.
HAND_EDITED_FIELDS = frozenset({"content", "memory_type", "person", "status"})


def _memory_action(
    service: Callable[..., SemanticMemory], verb: str, description: str, *, by_operator: bool = False
) -> Callable[[admin.ModelAdmin, HttpRequest, QuerySet], None]:
    """An action calling ``service`` on each selected memory (with ``by``, the operator, when ``by_operator``)."""

    def action(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet) -> None:
        count = 0
        for memory in queryset:
            service(memory=memory, **({"by": _requester(request)} if by_operator else {}))
            count += 1
        modeladmin.message_user(request, f"{verb} {count} memor{'y' if count == 1 else 'ies'}.", messages.SUCCESS)

    action.__name__ = service.__name__
    return admin.action(description=description, permissions=["change"])(action)


FORGET_TEMPLATE = "admin/memory/forget_confirmation.html"


def _forget_page(request: HttpRequest, *, title: str, plans: list[ForgetPlan], **context) -> TemplateResponse:
    """The confirmation page: everything each forget will take, then one button."""
    context = {
        **admin.site.each_context(request),
        "title": title,
        "plans": plans,
        "opts": SemanticMemory._meta,
        "messages_checked": bool(request.POST.get("messages")),
        **context,
    }
    return TemplateResponse(request, FORGET_TEMPLATE, context)


def _requester(request: HttpRequest) -> str:
    return f"console:{request.user.get_username()}"


@admin.action(description="Forget selected memories everywhere…", permissions=["delete"])
def forget_memories(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet) -> TemplateResponse | None:
    messages_too = bool(request.POST.get("messages"))
    if request.POST.get("confirm") != "yes":
        plans = [memory_forget_plan(memory=memory, messages=messages_too) for memory in queryset]
        selected = [memory.pk for memory in queryset]
        return _forget_page(request, title="Forget memories", plans=plans, selected=selected, action="forget_memories")
    forgotten = 0
    for pk in queryset.values_list("pk", flat=True):
        # An earlier forget of this batch may have taken it already (one version of another).
        memory = SemanticMemory.objects.filter(pk=pk).first()
        if memory is not None:
            memory_forget(memory=memory, messages=messages_too, requested_by=_requester(request))
            forgotten += 1
    modeladmin.message_user(request, f"Forgot {forgotten} memor{'y' if forgotten == 1 else 'ies'}.", messages.SUCCESS)
    return None


@admin.register(SemanticMemory)
class SemanticMemoryAdmin(StoredDetailsMixin, admin.ModelAdmin):
    list_display = ("id", "short_content", "memory_type", "status", "pinned", "cited", "person", "source_day")
    list_filter = ("memory_type", "status", "pinned", "person", ("source_day", admin.DateFieldListFilter))
    date_hierarchy = "source_day"
    search_fields = ("content",)  # the box is answered by hybrid retrieval, see get_search_results
    search_help_text = (
        f"Hybrid search, Chinese or English: every memory a word finds, and the {RECALL_LIMIT} nearest in meaning;"
        " AND / OR / NOT and quotes work."
    )
    list_select_related = ("person",)
    readonly_fields = (
        "reference_count",
        "rendered_body",
        "search_words",
        "created_at",
        "updated_at",
        "valid_from",
        "valid_to",
        "belief_timeline",
        "citing_messages",
        "also_said_in",
    )
    raw_id_fields = ("superseded_by", "source_conversation")
    actions = [
        _memory_action(memory_services.memory_pin, "Pinned", "Pin selected memories"),
        _memory_action(memory_services.memory_unpin, "Unpinned", "Unpin selected memories"),
        _memory_action(memory_services.memory_deprecate, "Deprecated", "Deprecate selected memories"),
        _memory_action(
            memory_services.memory_restore, "Restored", "Restore selected memories to active", by_operator=True
        ),
        forget_memories,
    ]
    fieldsets = (
        (None, {"fields": ("content", "memory_type", "status", "pinned", "person")}),
        (
            "Belief history",
            {"fields": ("valid_from", "valid_to", "expired_reason", "superseded_by", "belief_timeline")},
        ),
        (
            "Source",
            {"fields": ("source_conversation", "also_said_in", "source_channel", "source_day", "external_id")},
        ),
        ("Citations", {"fields": ("reference_count", "citing_messages")}),
        # Written by the services (observed_at, tags, provenance): read here, never hand-edited as JSON.
        (
            "Details",
            {"classes": ("collapse",), "fields": ("rendered_body", "search_words", "created_at", "updated_at")},
        ),
    )

    def get_actions(self, request: HttpRequest) -> dict:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # a delete is a forget: the forget action lists what goes
        return actions

    def save_model(self, request: HttpRequest, obj: SemanticMemory, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if change and set(form.changed_data) & HAND_EDITED_FIELDS:
            memory_services.memory_edit_record(memory=obj, by=_requester(request))

    def delete_model(self, request: HttpRequest, obj: SemanticMemory) -> None:
        memory_forget(memory=obj, requested_by=_requester(request), reason=ForgetReason.OPERATOR)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for pk in queryset.values_list("pk", flat=True):
            memory = SemanticMemory.objects.filter(pk=pk).first()
            if memory is not None:
                memory_forget(memory=memory, requested_by=_requester(request), reason=ForgetReason.OPERATOR)

    def get_urls(self) -> list:
        forget = self.admin_site.admin_view(self.forget_person_view)
        return [
            path("forget-person/<slug:slug>/", forget, name="memory_forget_person"),
            *super().get_urls(),
        ]

    def forget_person_view(self, request: HttpRequest, slug: str) -> HttpResponse:
        """GET: everything about the person that forgetting takes; POST (confirmed): forget it."""
        if not self.has_delete_permission(request):
            raise PermissionDenied
        person = get_object_or_404(Person, slug=slug)
        messages_too = bool(request.POST.get("messages"))
        if request.method == "POST" and request.POST.get("confirm") == "yes":
            tombstone = person_forget(person=person, messages=messages_too, requested_by=_requester(request))
            self.message_user(request, f"Forgot everything about person #{tombstone.target_id}.", messages.SUCCESS)
            return HttpResponseRedirect(reverse("admin:memory_semanticmemory_changelist"))
        plan = person_forget_plan(person=person, messages=messages_too)
        return _forget_page(request, title=f"Forget {person.slug}", plans=[plan], selected=[], person_scope=True)

    def get_search_results(self, request: HttpRequest, queryset: QuerySet, search_term: str) -> tuple[QuerySet, bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            ids = semantic_memory_search_ids(text=term)
        except (QuerySyntaxError, SearchTimeout) as exc:
            self.message_user(request, f"Search not run: {exc}", messages.ERROR)
            return queryset.none(), False
        if cited := CITED_ID_RE.fullmatch(term):  # an operator pasting a cited id
            ids = [int(cited[1]), *ids]
        ranked = ranked_by_ids(queryset, ids=ids)
        # The changelist orders before it searches: the ranking holds unless the operator sorts by a column.
        return (ranked if ORDER_VAR in request.GET else ranked.order_by(SEARCH_RANK, "-pk")), False

    @admin.display(description="content")
    def short_content(self, obj: SemanticMemory) -> str:
        return obj.content[:100]

    @admin.display(description="cited", ordering="reference_count")
    def cited(self, obj: SemanticMemory) -> int:
        return obj.reference_count

    @admin.display(description="timeline (old → new)")
    def belief_timeline(self, obj: SemanticMemory) -> SafeString | str:
        """This belief's versions: when each was held, why it ended and the conversation that changed it."""
        versions = memory_versions(memory=obj) if obj.pk else []
        if len(versions) < 2 and not (obj.body or {}).get("restored"):
            return "—"
        return format_html(
            "<ol class='anima-timeline'>{}</ol>",
            format_html_join(
                "", "<li>{}</li>", ((_version_html(memory, current=memory.pk == obj.pk),) for memory in versions)
            ),
        )

    @admin.display(description="also said in")
    def also_said_in(self, obj: SemanticMemory) -> SafeString | str:
        """The other conversations it was said in: a merge's sources' and a restatement's retired into it."""
        said = (obj.body or {}).get("source_conversations", [])
        ids = [pk for pk in said if isinstance(pk, int) and pk != obj.source_conversation_id]
        conversations = Conversation.objects.filter(pk__in=ids).order_by("pk") if ids else []
        if not conversations:
            return "—"
        return format_html_join(
            ", ",
            "<a href='{}'>{}</a>",
            ((reverse("admin:conversations_conversation_change", args=[c.pk]), c) for c in conversations),
        )

    @admin.display(description="citing messages")
    def citing_messages(self, obj: SemanticMemory) -> SafeString | str:
        if not obj.pk:
            return "—"
        references = (
            MemoryReference.objects.filter(entity=obj)
            .select_related("message__conversation")
            .order_by("-message__created_at")[:CITING_MESSAGES_SHOWN]
        )
        if not references:
            return "not cited yet"
        return format_html(
            "<ul>{}</ul>",
            format_html_join(
                "",
                "<li>{} · <a href='{}'>{} message #{}</a> in {} (weight {}): {}</li>",
                (
                    (
                        _held_text(ref.message.created_at),
                        reverse("admin:conversations_message_change", args=[ref.message_id]),
                        ref.message.role,
                        ref.message_id,
                        ref.message.conversation,
                        ref.weight,
                        ref.message.content[:160],
                    )
                    for ref in references
                ),
            ),
        )


def _held_text(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M") if moment else "?"


def _version_html(memory: SemanticMemory, *, current: bool) -> SafeString:
    """One version: held from → to, the memory, why it ended and where (the successor's conversation)."""
    held_from = _held_text(memory.valid_from or memory.created_at)
    held_to = _held_text(memory.valid_to) if memory.valid_to else "now"
    successor = memory.superseded_by
    ended: SafeString | str = ""
    if successor is not None and successor.source_conversation is not None:
        conversation = successor.source_conversation
        url = reverse("admin:conversations_conversation_change", args=[conversation.pk])
        # "changed, in <the conversation that said so>": the reason once, then where it was said.
        ended = format_html(" — {}, in <a href='{}'>{}</a>", memory.expired_reason or "superseded", url, conversation)
    elif memory.expired_reason:
        ended = f" — {memory.expired_reason}"
    # Retirements an operator undid (a restored night): the memory was not held meanwhile in its own record.
    undone = format_html_join(
        "",
        " · retired ({}{}) and restored {} by {}",
        (
            (
                entry.get("reason") or entry.get("status", ""),
                f", superseded by #{entry['superseded_by']}" if entry.get("superseded_by") else "",
                _held_text(datetime.fromisoformat(entry["at"])) if entry.get("at") else "?",
                entry.get("by", ""),
            )
            for entry in (memory.body or {}).get("restored", [])
        ),
    )
    return format_html(
        "{}{} → {} · <a href='{}'>#{}</a> [{}] {}{}{}",
        "▶ " if current else "",
        held_from,
        held_to,
        _entity_url(memory),
        memory.pk,
        memory.status,
        memory.content[:120],
        ended,
        undone,
    )


def _entity_url(memory: SemanticMemory) -> str:
    return reverse("admin:memory_semanticmemory_change", args=[memory.pk])


class _BlockInline(admin.StackedInline):
    """The day's editable blocks of one tag, folded away under the day's reading view."""

    fk_name = "parent"
    extra = 0
    can_delete = False
    show_change_link = True
    classes = ("collapse",)
    fields = ("title", "content")

    def has_add_permission(self, request, obj=None) -> bool:
        return False


class NarrativeBlockInline(_BlockInline):
    model = NarrativeBlock
    verbose_name_plural = "edit the narratives"


class DreamBlockInline(_BlockInline):
    model = DreamBlock
    verbose_name_plural = "edit the dream"


# Body values shown beside a block's text; the rest of its body folds away under "details".
BLOCK_FIGURES = ("valence", "arousal", "intensity", "significance")
DIARY_SECTIONS = {
    BlockTag.LIMBIC: "Feelings (limbic memory: kept as felt, never edited)",
    BlockTag.NARRATIVE: "Narratives",
    BlockTag.DREAM: "Dream",
}


@dataclass(frozen=True)
class DiaryBlockView:
    block: ContentBlock
    figures: list[tuple[str, str]]
    details: SafeString | None


def _block_view(block: ContentBlock) -> DiaryBlockView:
    body = block.body if isinstance(block.body, dict) else {}
    figures = [
        (key, f"{value:+.2f}" if key == "valence" else f"{value:.2f}" if isinstance(value, float) else str(value))
        for key, value in ((key, body.get(key)) for key in BLOCK_FIGURES)
        if value is not None
    ]
    rest = {key: value for key, value in body.items() if key not in BLOCK_FIGURES}
    return DiaryBlockView(block=block, figures=figures, details=readable_block(rest) if rest else None)


IMPRINTS_SECTION = "Imprints (feelings that kept coming back; limbic memory, never edited)"


def _is_imprint(block: ContentBlock) -> bool:
    return block.tag == BlockTag.LIMBIC and block.memory_type == MemoryType.IMPRINT


def diary_day_sections(*, entry: DiaryEntry) -> list[tuple[str, list[DiaryBlockView]]]:
    """The day as the console reads it: one section per kind of block, in the diary's reading order; the
    imprints written under the day (their last day) right after its feelings."""
    blocks = diary_reading_order(entry.blocks.select_related("person"))
    sections = []
    for tag, title in DIARY_SECTIONS.items():
        views = [_block_view(block) for block in blocks if block.tag == tag and not _is_imprint(block)]
        if views:
            sections.append((title, views))
        imprints = [_block_view(block) for block in blocks if block.tag == tag and _is_imprint(block)]
        if imprints:
            sections.append((IMPRINTS_SECTION, imprints))
    return sections


@admin.register(DiaryEntry)
class DiaryEntryAdmin(admin.ModelAdmin):
    """A day of the diary: read as sections (feelings, narratives, dream); narratives and dream edited below."""

    list_display = ("source_day", "limbic_count", "narrative_count", "dream_count")
    date_hierarchy = "source_day"
    ordering = ("-source_day",)
    fields = ("source_day", "title")
    inlines = [NarrativeBlockInline, DreamBlockInline]
    change_form_template = "admin/memory/diaryentry/change_form.html"

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        entry = self.get_object(request, object_id)
        if entry is not None:
            extra_context = {**(extra_context or {}), "day_sections": diary_day_sections(entry=entry)}
        return super().change_view(request, object_id, form_url, extra_context)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        counts = {f"{tag}_blocks": Count("blocks", filter=Q(blocks__tag=tag)) for tag in BlockTag.values}
        return super().get_queryset(request).annotate(**counts)

    @admin.display(description="limbic", ordering="limbic_blocks")
    def limbic_count(self, obj: DiaryEntry) -> int:
        return obj.limbic_blocks

    @admin.display(description="narrative", ordering="narrative_blocks")
    def narrative_count(self, obj: DiaryEntry) -> int:
        return obj.narrative_blocks

    @admin.display(description="dream", ordering="dream_blocks")
    def dream_count(self, obj: DiaryEntry) -> int:
        return obj.dream_blocks

    def has_delete_permission(self, request, obj=None) -> bool:
        # A day's deletion would cascade into its limbic blocks, which the database refuses to delete.
        return False


@admin.register(ContentBlock)
class ContentBlockAdmin(StoredDetailsMixin, admin.ModelAdmin):
    list_display = ("id", "tag", "memory_type", "source_day", "short_content", "person")
    list_filter = ("tag", "memory_type", "source_day", "person")
    list_select_related = ("person",)
    search_fields = ("content", "title")
    raw_id_fields = ("parent",)
    fields = ("parent", "tag", "title", "content", "rendered_body", "person", "source_day", "created_at")
    readonly_fields = ("rendered_body", "created_at")

    def has_change_permission(self, request, obj=None) -> bool:
        return super().has_change_permission(request, obj) and (obj is None or obj.tag != BlockTag.LIMBIC)

    def has_delete_permission(self, request, obj=None) -> bool:
        return super().has_delete_permission(request, obj) and (obj is None or obj.tag != BlockTag.LIMBIC)

    @admin.display(description="content")
    def short_content(self, obj: ContentBlock) -> str:
        return obj.content[:100]


@admin.register(MemoryReference)
class MemoryReferenceAdmin(ReadOnlyAdmin):
    list_display = ("entity", "message", "weight", "created_at")
    raw_id_fields = ("entity", "message")


@admin.register(WorkspaceText)
class WorkspaceTextAdmin(ReadOnlyAdmin):
    """What an imported workspace file held that Anima cannot place: written back verbatim on export."""

    list_display = ("path", "updated_at")
    fields = ("path", "content", "updated_at")


@admin.register(SelfLayerBlock)
class SelfLayerBlockAdmin(admin.ModelAdmin):
    list_display = ("key", "language", "locked", "updated_at")
    list_filter = ("language",)
    fields = ("key", "language", "content", "locked")

    def get_readonly_fields(self, request: HttpRequest, obj: SelfLayerBlock | None = None) -> tuple[str, ...]:
        # A locked block (the existence anchor) changes only after an explicit unlock: save unlocked first.
        if obj is None:
            return ()
        return ("key", "language", "content") if obj.locked else ("key", "language")


MOOD_CHART_DAYS = 60
MOOD_CHART_MAX_DAYS = 366


def _valence_arousal(valence: float | None, arousal: float | None) -> str:
    if valence is None or arousal is None:
        return "—"
    return f"{valence:+.2f} / {arousal:.2f}"


def _anchors_url(point: DayPoint) -> str:
    """The anchors behind one chart dot: the anchor itself, or the list of that day's anchors."""
    if len(point.anchor_ids) == 1:
        return reverse("admin:memory_contentblock_change", args=[point.anchor_ids[0]])
    ids = ",".join(str(pk) for pk in point.anchor_ids)
    return f"{reverse('admin:memory_contentblock_changelist')}?id__in={ids}"


@admin.register(EmotionalTendency)
class EmotionalTendencyAdmin(ReadOnlyAdmin):
    """Tendencies are written by the nightly step; the chart page draws them with the anchors behind them."""

    # Valence and arousal side by side per window, so the row fits beside the filters.
    list_display = ("day", "who", "mood", "mood_since", "week", "month", "week_days", "chart_link")
    list_filter = ("mood", "person")
    list_select_related = ("person",)
    date_hierarchy = "day"

    def get_urls(self) -> list[URLPattern]:
        chart = path("chart/", self.admin_site.admin_view(self.chart_view), name="memory_emotionaltendency_chart")
        return [chart, *super().get_urls()]

    @admin.display(description="who", ordering="person__slug")
    def who(self, obj: EmotionalTendency) -> str:
        return obj.person.slug if obj.person_id else "everyone"

    @admin.display(description="week: valence / arousal")
    def week(self, obj: EmotionalTendency) -> str:
        return _valence_arousal(obj.week_valence, obj.week_arousal)

    @admin.display(description="month: valence / arousal")
    def month(self, obj: EmotionalTendency) -> str:
        return _valence_arousal(obj.month_valence, obj.month_arousal)

    @admin.display(description="chart")
    def chart_link(self, obj: EmotionalTendency) -> SafeString:
        query = f"?person={obj.person.slug}" if obj.person_id else ""
        return format_html("<a href='{}{}'>chart</a>", reverse("admin:memory_emotionaltendency_chart"), query)

    def chart_view(self, request: HttpRequest) -> HttpResponse:
        """Valence and arousal per day of one person (``?person=slug``, else everyone) over ``?days=``."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        slug = request.GET.get("person", "")
        person = get_object_or_404(Person, slug=slug) if slug else None
        raw_days = request.GET.get("days", "")
        days = int(raw_days) if raw_days.isascii() and raw_days.isdigit() and len(raw_days) <= 3 else MOOD_CHART_DAYS
        days = min(max(days, 7), MOOD_CHART_MAX_DAYS)
        until = timezone.localdate()
        since = until - timedelta(days=days - 1)
        points = mood_points(since=since, until=until, person=person)
        tendencies = list(
            EmotionalTendency.objects.filter(person=person, day__gte=since, day__lte=until).order_by("day")
        )
        week_means: list[tuple[date, float | None, float | None]] = [
            (row.day, row.week_valence, row.week_arousal) for row in tendencies
        ]
        shown_since, shown_until = mood_chart_span(
            since=since, until=until, days=[point.day for point in points] + [row.day for row in tendencies]
        )
        context = {
            **self.admin_site.each_context(request),
            "title": f"Mood of {person or 'everyone'}",
            "opts": self.model._meta,
            "person": person,
            "persons": Person.objects.filter(emotional_tendencies__isnull=False).distinct().order_by("slug"),
            "days": days,
            "since": since,
            "until": until,
            "shown_since": shown_since,
            "shown_until": shown_until,
            "chart": mood_chart_svg(
                points=points,
                since=shown_since,
                until=shown_until,
                href=_anchors_url,
                week_means=week_means,
                notable=[(row.day, row.get_mood_display().lower()) for row in tendencies if row.mood],
            ),
            "points": len(points),
            "latest": tendencies[-1] if tendencies else None,
        }
        return TemplateResponse(request, "admin/memory/emotionaltendency/chart.html", context)
