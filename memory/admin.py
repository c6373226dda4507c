from __future__ import annotations

from django.contrib import admin

from anima.admin import ReadOnlyAdmin
from anima.models import BlockTag
from memory.models import ContentBlock, DiaryEntry, MemoryReference, SelfLayerBlock, SemanticMemory


@admin.register(SemanticMemory)
class SemanticMemoryAdmin(admin.ModelAdmin):
    list_display = ("id", "short_content", "memory_type", "status", "pinned", "reference_count", "person", "source_day")
    list_filter = ("memory_type", "status", "pinned", "person", "source_day")
    search_fields = ("content", "external_id")
    readonly_fields = ("reference_count", "fts_segmented", "created_at", "updated_at")
    raw_id_fields = ("superseded_by", "source_conversation")
    fields = (
        "content",
        "memory_type",
        "status",
        "expired_reason",
        "superseded_by",
        "pinned",
        "person",
        "source_conversation",
        "source_channel",
        "source_day",
        "body",
        "reference_count",
        "fts_segmented",
        "external_id",
        "created_at",
        "updated_at",
    )

    @admin.display(description="content")
    def short_content(self, obj: SemanticMemory) -> str:
        return obj.content[:100]


class ContentBlockInline(admin.StackedInline):
    """The day's blocks, read in place; non-limbic blocks are edited on their own page."""

    model = ContentBlock
    fk_name = "parent"
    extra = 0
    can_delete = False
    show_change_link = True
    fields = ("tag", "title", "content", "body", "created_at")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(DiaryEntry)
class DiaryEntryAdmin(admin.ModelAdmin):
    list_display = ("source_day", "block_count")
    date_hierarchy = "source_day"
    fields = ("source_day", "title")
    inlines = [ContentBlockInline]

    @admin.display(description="blocks")
    def block_count(self, obj: DiaryEntry) -> int:
        return obj.blocks.count()


@admin.register(ContentBlock)
class ContentBlockAdmin(admin.ModelAdmin):
    list_display = ("id", "tag", "source_day", "short_content", "person")
    list_filter = ("tag", "source_day", "person")
    search_fields = ("content", "title")
    raw_id_fields = ("parent",)
    fields = ("parent", "tag", "title", "content", "body", "person", "source_day", "created_at")

    def has_change_permission(self, request, obj=None) -> bool:
        return obj is None or obj.tag != BlockTag.LIMBIC

    def has_delete_permission(self, request, obj=None) -> bool:
        return obj is None or obj.tag != BlockTag.LIMBIC

    @admin.display(description="content")
    def short_content(self, obj: ContentBlock) -> str:
        return obj.content[:100]


@admin.register(MemoryReference)
class MemoryReferenceAdmin(ReadOnlyAdmin):
    list_display = ("entity", "message", "weight", "created_at")
    raw_id_fields = ("entity", "message")


@admin.register(SelfLayerBlock)
class SelfLayerBlockAdmin(admin.ModelAdmin):
    list_display = ("key", "locked", "updated_at")
    fields = ("key", "content", "locked")
