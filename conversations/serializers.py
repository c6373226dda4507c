"""API representations of conversations, messages, people and history."""

from __future__ import annotations

from django.utils import timezone
from rest_framework import serializers

from anima.core.api.serializers import BoundedDateTimeField, MomentField, StrictModelSerializer, StrictSerializer
from anima.core.text import MAX_TEXT_CHARS
from conversations.access import access_of
from conversations.models import (
    PERSON_SLUG_MAX_LENGTH,
    Conversation,
    HistoryEntry,
    Identity,
    Message,
    Person,
    Role,
    person_slug_valid,
)


class PersonSlugValueField(serializers.CharField):
    """A new person's slug, valid by the same rule as the importers and the memory tool."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not person_slug_valid(value):
            raise serializers.ValidationError(
                "must be a slug: lowercase letters, digits, single - or _ inside, at most 64 characters"
            )
        return value


class PersonSlugField(serializers.SlugRelatedField):
    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("queryset", Person.objects.all())
        super().__init__(slug_field="slug", **kwargs)


class ReachableConversationField(serializers.PrimaryKeyRelatedField):
    """A conversation id among those the request's caller can see: one it cannot is answered like a missing one."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("queryset", Conversation.objects.all())
        super().__init__(**kwargs)

    def get_queryset(self):
        request = self.context.get("request")
        return access_of(request).conversations(super().get_queryset()) if request else Conversation.objects.none()


class ConversationSerializer(StrictModelSerializer):
    person = PersonSlugField(required=False, allow_null=True)
    external_id = serializers.CharField(max_length=200, required=False, allow_null=True, allow_blank=True)

    def validate_external_id(self, value: str | None) -> str | None:
        # Blank means "no external id"; a real one must be unused.
        if not value:
            return None
        taken = Conversation.objects.filter(external_id=value)
        if self.instance is not None:
            taken = taken.exclude(pk=self.instance.pk)
        if taken.exists():
            raise serializers.ValidationError(f"a conversation with external_id {value!r} already exists")
        return value

    class Meta:
        model = Conversation
        fields = [
            "id",
            "external_id",
            "platform",
            "channel",
            "chat_id",
            "person",
            "title",
            "archived",
            "system_prompt",
            "system_prompt_built_at",
            "temporal_day",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["system_prompt", "system_prompt_built_at", "temporal_day", "created_at", "updated_at"]


class MessageSerializer(serializers.ModelSerializer):
    class Meta:
        model = Message
        fields = ["id", "conversation", "role", "name", "content", "tool_payload", "external_id", "created_at"]
        read_only_fields = fields


class MessageCreateSerializer(StrictSerializer):
    role = serializers.ChoiceField(choices=Role.choices)
    content = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=MAX_TEXT_CHARS)
    name = serializers.CharField(required=False, allow_blank=True, max_length=128, default="")
    tool_payload = serializers.JSONField(required=False, allow_null=True, default=None)
    external_id = serializers.CharField(required=False, allow_null=True, max_length=200, default=None)
    created_at = BoundedDateTimeField(required=False, allow_null=True, default=None)


class IdentitySerializer(serializers.ModelSerializer):
    person = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Identity
        fields = ["id", "channel", "external_id", "person", "created_at"]
        read_only_fields = fields


class IdentityMapSerializer(StrictSerializer):
    channel = serializers.CharField(max_length=64)
    external_id = serializers.CharField(max_length=200)
    person = PersonSlugValueField(max_length=PERSON_SLUG_MAX_LENGTH)
    display_name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class PersonSerializer(StrictModelSerializer):
    slug = PersonSlugValueField(max_length=PERSON_SLUG_MAX_LENGTH)
    identities = IdentitySerializer(many=True, read_only=True)

    class Meta:
        model = Person
        fields = ["id", "slug", "display_name", "language", "identities", "created_at"]
        read_only_fields = ["created_at"]

    def validate_slug(self, value: str) -> str:
        taken = Person.objects.filter(slug=value)
        if self.instance is not None:
            taken = taken.exclude(pk=self.instance.pk)
        if taken.exists():
            raise serializers.ValidationError(f"a person with slug {value!r} already exists")
        return value


class PersonRenameSerializer(StrictSerializer):
    display_name = serializers.CharField(max_length=200, allow_blank=True)


class HistoryEntrySerializer(serializers.ModelSerializer):
    cursor = serializers.IntegerField(read_only=True)
    person = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = HistoryEntry
        fields = ["cursor", "timestamp", "content", "channel", "person", "conversation"]
        read_only_fields = fields


class HistoryAppendSerializer(StrictSerializer):
    content = serializers.CharField(max_length=MAX_TEXT_CHARS)
    timestamp = BoundedDateTimeField(required=False, default=None, allow_null=True)
    channel = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    person = PersonSlugField(required=False, allow_null=True, default=None)
    conversation = ReachableConversationField(required=False, allow_null=True, default=None)

    def validate_timestamp(self, value):
        return value or timezone.now()


class HistoryQuerySerializer(serializers.Serializer):
    q = serializers.CharField(required=False, allow_blank=True, max_length=10_000, default="")
    since = MomentField(required=False, default=None)
    until = MomentField(required=False, default=None)
    channel = serializers.CharField(required=False, max_length=64, default=None)
    person = PersonSlugField(required=False, default=None)
    scope = serializers.ChoiceField(choices=["all", "global"], required=False, default="all")


class IdentityQuerySerializer(serializers.Serializer):
    channel = serializers.CharField(max_length=64)
    external_id = serializers.CharField(max_length=200)
