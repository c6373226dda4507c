from __future__ import annotations

from django.contrib import admin

from anima.admin import ReadOnlyAdmin
from conversations.models import Conversation, HistoryEntry, Identity, Message, Person


class IdentityInline(admin.TabularInline):
    model = Identity
    extra = 0


@admin.register(Person)
class PersonAdmin(admin.ModelAdmin):
    list_display = ("slug", "display_name", "created_at")
    search_fields = ("slug", "display_name", "identities__external_id")
    inlines = [IdentityInline]


@admin.register(Identity)
class IdentityAdmin(admin.ModelAdmin):
    list_display = ("channel", "external_id", "person")
    list_filter = ("channel",)
    search_fields = ("external_id", "person__slug")
    autocomplete_fields = ("person",)


class MessageInline(admin.TabularInline):
    model = Message
    extra = 0
    fields = ("created_at", "role", "name", "content")
    readonly_fields = ("created_at", "role", "name", "content")
    show_change_link = True
    can_delete = False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ("__str__", "platform", "channel", "person", "message_count", "updated_at")
    list_filter = ("platform", "channel", "archived", "person")
    search_fields = ("title", "external_id", "chat_id")
    readonly_fields = ("system_prompt_built_at", "temporal_day", "created_at")
    inlines = [MessageInline]

    @admin.display(description="messages")
    def message_count(self, obj: Conversation) -> int:
        return obj.messages.count()


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ("created_at", "role", "short_content", "conversation")
    list_filter = ("role", "conversation__platform")
    search_fields = ("content", "external_id")
    list_select_related = ("conversation",)
    readonly_fields = ("fts_segmented",)
    raw_id_fields = ("conversation",)

    @admin.display(description="content")
    def short_content(self, obj: Message) -> str:
        return obj.content[:100]


@admin.register(HistoryEntry)
class HistoryEntryAdmin(ReadOnlyAdmin):
    list_display = ("id", "timestamp", "channel", "person", "short_content")
    list_filter = ("channel", "person")
    search_fields = ("content",)

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # append-only, as the database enforces

    @admin.display(description="content")
    def short_content(self, obj: HistoryEntry) -> str:
        return obj.content[:100]
