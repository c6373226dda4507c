"""API representations of semantic memories, recall and the diary."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from anima.core.api.serializers import MomentField, StrictSerializer
from anima.core.models import Entity, ForgetReason, ForgetTombstone, MemoryType
from conversations.serializers import PersonSlugField, ReachableConversationField
from memory.models import DiaryEntry, EmotionalTendency, SemanticMemory, diary_reading_order
from memory.search import MAX_LIMIT
from memory.selectors import MEMORY_TYPES, RECALL_LIMIT


class SemanticMemorySerializer(serializers.ModelSerializer):
    person = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    citation = serializers.SerializerMethodField()

    class Meta:
        model = SemanticMemory
        fields = [
            "id",
            "memory_type",
            "status",
            "title",
            "content",
            "person",
            "pinned",
            "reference_count",
            "source_conversation",
            "source_channel",
            "source_day",
            "expired_reason",
            "superseded_by",
            "valid_from",
            "valid_to",
            "body",
            "citation",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_citation(self, memory: SemanticMemory) -> str:
        return f"[[anima:{memory.pk}]]"


class RememberSerializer(StrictSerializer):
    content = serializers.CharField(max_length=10_000)
    memory_type = serializers.ChoiceField(choices=MemoryType.choices, default=MemoryType.WORLD)
    person = PersonSlugField(required=False, allow_null=True, default=None)
    pinned = serializers.BooleanField(default=False)
    source_conversation = ReachableConversationField(required=False, allow_null=True, default=None)
    source_channel = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")


class CorrectSerializer(StrictSerializer):
    content = serializers.CharField(max_length=10_000, required=False, help_text="The corrected text.")
    memory_type = serializers.ChoiceField(choices=MemoryType.choices, required=False)
    reason = serializers.CharField(
        max_length=2000, required=False, allow_blank=True, default="", help_text="Why (kept in belief history)."
    )

    def validate(self, attrs):
        if "content" not in attrs and "memory_type" not in attrs:
            raise serializers.ValidationError({"content": ["Give the corrected content and/or memory_type."]})
        return attrs


class DeprecateSerializer(StrictSerializer):
    reason = serializers.CharField(max_length=2000, required=False, allow_blank=True, default="")


class ForgetSerializer(StrictSerializer):
    messages = serializers.BooleanField(default=False, help_text="Redact the messages that stated it too.")
    reason = serializers.ChoiceField(choices=ForgetReason.choices, required=False)


class ForgetTombstoneSerializer(serializers.ModelSerializer):
    class Meta:
        model = ForgetTombstone
        fields = [
            "id",
            "kind",
            "target_id",
            "reason",
            "requested_by",
            "with_messages",
            "entity_ids",
            "counts",
            "created_at",
            "finished_at",
        ]
        read_only_fields = fields


class RecallQuerySerializer(serializers.Serializer):
    q = serializers.CharField(max_length=10_000, required=False, default="", allow_blank=True)
    entity = serializers.CharField(
        max_length=200,
        required=False,
        default=None,
        help_text="Ask about one of the person's subjects (key, relation, name or alias, e.g. daughter, Lily, 小雨): "
        "its profile first, then its facts (ordered by q, which may then be empty) and the latest lines naming it.",
    )
    types = serializers.CharField(
        required=False, default=None, help_text=f"Comma-separated subset of {', '.join(MEMORY_TYPES)}."
    )
    person = PersonSlugField(required=False, default=None)
    since = MomentField(required=False, default=None)
    until = MomentField(required=False, default=None)
    as_of = MomentField(
        required=False,
        default=None,
        help_text="Recall what was held then: a date (the end of that local day) or an ISO datetime.",
    )
    channel = serializers.CharField(max_length=64, required=False, default=None)
    limit = serializers.IntegerField(min_value=1, max_value=MAX_LIMIT, default=RECALL_LIMIT)
    min_score = serializers.FloatField(
        min_value=0.0,
        max_value=1.0,
        default=0.0,
        help_text="Leave out hits whose score (the estimated chance that the hit is relevant, 0..1) is below this.",
    )

    def validate(self, attrs: dict) -> dict:
        if not attrs["q"].strip() and not attrs["entity"]:
            raise serializers.ValidationError({"q": "give q, or an entity to ask about"})
        return attrs

    def validate_types(self, value: str | None) -> list[str] | None:
        if value is None:
            return None
        types = [part.strip() for part in value.split(",") if part.strip()]
        unknown = [t for t in types if t not in MEMORY_TYPES]
        if unknown or not types:
            raise serializers.ValidationError(f"unknown memory type(s) {unknown}; use {', '.join(MEMORY_TYPES)}")
        return types


class RecallResultSerializer(serializers.Serializer):
    memory_type = serializers.CharField()
    id = serializers.IntegerField()
    external_id = serializers.CharField(allow_null=True)
    score = serializers.FloatField(help_text="The estimated chance that the hit is relevant (calibrated, 0..1).")
    snippet = serializers.CharField()
    created_at = serializers.CharField()
    conversation_external_id = serializers.CharField(allow_null=True)
    message_external_id = serializers.CharField(allow_null=True)
    ranks = serializers.DictField(child=serializers.IntegerField())
    scores = serializers.DictField(child=serializers.FloatField())
    semantic_memory_id = serializers.IntegerField(required=False)
    valid_from = serializers.CharField(required=False, allow_null=True)
    valid_to = serializers.CharField(required=False, allow_null=True)
    role = serializers.CharField(required=False)


class ContentBlockSerializer(serializers.ModelSerializer):
    class Meta:
        model = Entity
        fields = ["id", "tag", "content", "body", "created_at"]
        read_only_fields = fields


class DiaryEntrySerializer(serializers.ModelSerializer):
    blocks = serializers.SerializerMethodField()

    class Meta:
        model = DiaryEntry
        fields = ["id", "source_day", "title", "blocks", "created_at"]
        read_only_fields = fields

    @extend_schema_field(ContentBlockSerializer(many=True))
    def get_blocks(self, entry: DiaryEntry) -> list[dict]:
        return ContentBlockSerializer(diary_reading_order(entry.blocks.all()), many=True).data


class EmotionalTendencySerializer(serializers.ModelSerializer):
    """One day's tendency of one person (``person`` null: overall, operators only)."""

    person = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = EmotionalTendency
        exclude = ["id"]
        read_only_fields = [field.name for field in EmotionalTendency._meta.fields if field.name != "id"]
