from __future__ import annotations

from datetime import datetime

from django import forms
from django.contrib import admin
from django.core.paginator import Paginator
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from anima.core.admin import ReadOnlyAdmin, ReadOnlyInlineMixin, StoredDetailsMixin, readable_block
from anima.core.errors import AnimaError
from conversations.access import access_of_scope
from conversations.models import (
    Conversation,
    HistoryEntry,
    Identity,
    Message,
    PeerBlock,
    Person,
    ShortTermMemory,
    TokenScope,
)
from conversations.services import token_scope_set, token_scope_validate

MESSAGES_PER_PAGE = 50


class IdentityInline(admin.TabularInline):
    model = Identity
    extra = 0


@admin.register(Person)
class PersonAdmin(admin.ModelAdmin):
    list_display = ("slug", "display_name", "language", "created_at", "forget_link")
    search_fields = ("slug", "display_name", "identities__external_id")
    inlines = [IdentityInline]

    @admin.display(description="forget")
    def forget_link(self, obj: Person) -> SafeString:
        # Forgetting lives in the memory app (it reaches memories): linked by URL name only.
        return format_html("<a href='{}'>forget…</a>", reverse("admin:memory_forget_person", args=[obj.slug]))


@admin.register(Identity)
class IdentityAdmin(admin.ModelAdmin):
    list_display = ("channel", "external_id", "person")
    list_filter = ("channel",)
    search_fields = ("external_id", "person__slug")
    autocomplete_fields = ("person",)


class ShortTermMemoryInline(ReadOnlyInlineMixin, admin.StackedInline):
    """The LLM-authored short-term summary (M9), one per scope; written by the tool, read here."""

    model = ShortTermMemory
    fields = ("scope", "summary", "covers_until", "covers_until_message_id", "person", "channel", "updated_at")
    readonly_fields = fields
    verbose_name_plural = "short-term summary"


class PeerBlockInline(ReadOnlyInlineMixin, admin.TabularInline):
    """What this conversation was shown of its peers per closed bucket (never rewritten)."""

    model = PeerBlock
    fields = ("bucket", "content", "created_at")
    readonly_fields = fields
    verbose_name_plural = "peer digests shown (temporal_summary_peers)"


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    """Messages are shown a page at a time below the form (newest page first), not as a formset."""

    list_display = ("__str__", "platform", "channel", "person", "message_count", "updated_at")
    list_filter = ("platform", "channel", "archived", "person")
    search_fields = ("title", "external_id", "chat_id")
    readonly_fields = ("system_prompt_built_at", "temporal_chunks", "created_at")
    # temporal_day is operational state written by the tick: shown rendered, never hand-edited.
    fieldsets = (
        (None, {"fields": ("title", "platform", "channel", "chat_id", "external_id", "person", "archived")}),
        ("Today's temporal chunks", {"fields": ("temporal_chunks",)}),
        (
            "System prompt snapshot",
            {
                "classes": ("collapse",),
                "fields": ("system_prompt", "system_prompt_built_at", "created_at", "updated_at"),
            },
        ),
    )
    change_form_template = "admin/conversations/conversation/change_form.html"
    inlines = [ShortTermMemoryInline, PeerBlockInline]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: dict | None = None
    ) -> HttpResponse:
        conversation = self.get_object(request, object_id)
        if conversation is not None:
            messages = conversation.messages.order_by("created_at", "id")
            paginator = Paginator(messages, MESSAGES_PER_PAGE)
            page = paginator.get_page(request.GET.get("messages_page") or paginator.num_pages)
            extra_context = {
                **(extra_context or {}),
                "messages_page": page,
                "messages_changelist_url": reverse("admin:conversations_message_changelist")
                + "?"
                + urlencode({"conversation__id__exact": conversation.pk}),
            }
        return super().change_view(request, object_id, form_url, extra_context)

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).select_related("person").annotate(messages_total=Count("messages"))

    @admin.display(description="messages", ordering="messages_total")
    def message_count(self, obj: Conversation) -> int:
        return obj.messages_total

    @admin.display(description="chunks")
    def temporal_chunks(self, obj: Conversation) -> SafeString | str:
        day = obj.temporal_day or {}
        chunks = day.get("chunks") or []
        if not chunks:
            return "no chunk yet today"
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>#{} at {}</td></tr>",
            (
                (
                    _local_time(chunk.get("at", "")),
                    _local_time(chunk.get("bucket", "")),
                    chunk.get("summary", ""),
                    chunk.get("watermark_message_id", ""),
                    _local_time(chunk.get("watermark_at", "")),
                )
                for chunk in chunks
            ),
        )
        return format_html(
            "<div>day {}</div><table class='anima-chunks'><thead><tr><th>at</th><th>bucket</th><th>summary</th>"
            "<th>watermark</th></tr></thead><tbody>{}</tbody></table>",
            day.get("cst_date", "?"),
            rows,
        )


def _local_time(text: str) -> str:
    """A stored ISO instant as the console shows times: local, to the minute (chunks written in UTC included)."""
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return text
    return timezone.localtime(moment).strftime("%H:%M") if timezone.is_aware(moment) else text


@admin.register(Message)
class MessageAdmin(StoredDetailsMixin, admin.ModelAdmin):
    list_display = ("created_at", "role", "short_content", "conversation")
    list_filter = ("role", "conversation__platform")
    search_fields = ("content", "external_id")
    list_select_related = ("conversation",)
    fields = (
        "conversation",
        "role",
        "name",
        "content",
        "rendered_tool_payload",
        "external_id",
        "created_at",
        "search_words",
    )
    readonly_fields = ("rendered_tool_payload", "search_words")
    raw_id_fields = ("conversation",)

    @admin.display(description="tool payload")
    def rendered_tool_payload(self, obj: Message) -> SafeString:
        # A tool call's arguments or result as the client sent it: shown, never hand-edited as JSON.
        return readable_block(obj.tool_payload)

    @admin.display(description="content")
    def short_content(self, obj: Message) -> str:
        return obj.content[:100]


@admin.register(HistoryEntry)
class HistoryEntryAdmin(ReadOnlyAdmin):
    list_display = ("id", "timestamp", "channel", "person", "short_content")
    list_select_related = ("person",)
    list_filter = ("channel", "person")
    search_fields = ("content",)

    @admin.display(description="content")
    def short_content(self, obj: HistoryEntry) -> str:
        return obj.content[:100]


class TokenScopeForm(forms.ModelForm):
    class Meta:
        model = TokenScope
        fields = ("user", "scope", "persons", "conversations")

    def clean(self):
        data = super().clean()
        if self.errors:
            return data
        try:
            token_scope_validate(
                user=data["user"],
                scope=data["scope"],
                persons=list(data.get("persons") or []),
                conversations=list(data.get("conversations") or []),
            )
        except AnimaError as exc:
            field = exc.field if exc.field in self.fields else None
            self.add_error(field, str(exc))
        return data


@admin.register(TokenScope)
class TokenScopeAdmin(admin.ModelAdmin):
    """What a non-staff user's API token may reach (staff tokens are operator and need no scope)."""

    form = TokenScopeForm
    list_display = ("user", "scope", "reach", "updated_at")
    list_filter = ("scope",)
    search_fields = ("user__username", "persons__slug", "conversations__external_id")
    autocomplete_fields = ("user", "persons", "conversations")

    def get_queryset(self, request):
        # The "reach" column reads every row's bindings: fetched with the page, not per row.
        return super().get_queryset(request).prefetch_related("persons", "conversations__person")

    def save_related(self, request, form, formsets, change) -> None:
        # The one write path (same as `token_scope`): scope and bindings replaced together.
        token_scope_set(
            user=form.instance.user,
            scope=form.instance.scope,
            persons=list(form.cleaned_data["persons"]),
            conversations=list(form.cleaned_data["conversations"]),
        )

    @admin.display(description="reach")
    def reach(self, obj: TokenScope) -> str:
        return access_of_scope(obj).binding
