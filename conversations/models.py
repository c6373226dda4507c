"""What was said, by whom, on which channel."""

from __future__ import annotations

import pgtrigger
from django.conf import settings
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.text import slugify

from anima.core.models import AppendOnly, SegmentedTextModel, search_index, search_vector_of, trigram_index

PERSON_SLUG_MAX_LENGTH = 64


def person_slug_valid(value: object) -> bool:
    """A person slug as every entry point accepts it: what Django's slugify leaves unchanged, ≤ 64 chars."""
    return isinstance(value, str) and 0 < len(value) <= PERSON_SLUG_MAX_LENGTH and slugify(value) == value


class Language(models.TextChoices):
    """The languages prompts are framed in (headings, instructions); memories keep the language they were written in."""

    ZH = "zh", "Chinese"
    EN = "en", "English"


# A person's prompts are framed in their language: when their setting changes, their conversations' snapshots and
# frozen peer blocks go (the next turn renders them in the new language), theirs by person or by a mapped account.
_LANGUAGE_CHANGED = """
IF OLD.language IS NOT DISTINCT FROM NEW.language THEN
    RETURN NULL;
END IF;
WITH dropped AS (
    UPDATE conversations c SET system_prompt = '', system_prompt_built_at = NULL
    WHERE c.person_id = NEW.id
       OR (c.person_id IS NULL AND EXISTS (
            SELECT 1 FROM identities i
            WHERE i.person_id = NEW.id AND i.external_id = c.chat_id
              AND i.channel = COALESCE(NULLIF(c.channel, ''), c.platform)))
    RETURNING c.id
)
DELETE FROM conversation_peer_blocks WHERE conversation_id IN (SELECT id FROM dropped);
RETURN NULL;
"""


class Person(models.Model):
    """One human, whatever channels they use; memories aggregate per person."""

    slug = models.SlugField(max_length=64, unique=True)
    display_name = models.CharField(max_length=200, blank=True, default="")
    # The language their prompts are framed in; blank: what their conversations are held in.
    language = models.CharField(max_length=8, choices=Language.choices, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "persons"
        ordering = ["slug"]
        triggers = [
            pgtrigger.Trigger(
                name="persons_language_drops_their_prompts",
                when=pgtrigger.After,
                operation=pgtrigger.Update,
                func=_LANGUAGE_CHANGED,
            ),
        ]

    def __str__(self) -> str:
        return self.display_name or self.slug


# A conversation's prompt snapshot and frozen peer blocks are rendered for its person: when the person
# changes they are dropped in the same statement (every path, console and cascades included), so the
# next turn is built for the new person and nobody reads the old one's memories from the snapshot.
#
# An identity's trigger: the conversations without a person of their own whose channel account is OLD's or NEW's (OLD is
# NULL on INSERT, NEW on DELETE): their person is the identity's (conversations.selectors).
_IDENTITY_CHANGED = """
IF TG_OP = 'UPDATE' AND (OLD.channel, OLD.external_id, OLD.person_id)
        IS NOT DISTINCT FROM (NEW.channel, NEW.external_id, NEW.person_id) THEN
    RETURN NULL;
END IF;
WITH dropped AS (
    UPDATE conversations c SET system_prompt = '', system_prompt_built_at = NULL
    WHERE c.person_id IS NULL
      AND ((c.chat_id = OLD.external_id AND COALESCE(NULLIF(c.channel, ''), c.platform) = OLD.channel)
        OR (c.chat_id = NEW.external_id AND COALESCE(NULLIF(c.channel, ''), c.platform) = NEW.channel))
    RETURNING c.id
)
DELETE FROM conversation_peer_blocks WHERE conversation_id IN (SELECT id FROM dropped);
RETURN NULL;
"""


class Identity(models.Model):
    """A channel account (``channel:external_id``) resolved to one person."""

    channel = models.CharField(max_length=64)
    external_id = models.CharField(max_length=200)
    person = models.ForeignKey(Person, on_delete=models.CASCADE, related_name="identities")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "identities"
        verbose_name_plural = "identities"
        constraints = [
            models.UniqueConstraint(fields=["channel", "external_id"], name="identities_channel_external_id_unique"),
        ]
        triggers = [
            pgtrigger.Trigger(
                name="identities_drop_prompts_of_their_conversations",
                when=pgtrigger.After,
                operation=pgtrigger.Insert | pgtrigger.Update | pgtrigger.Delete,
                func=_IDENTITY_CHANGED,
            ),
        ]

    def __str__(self) -> str:
        return f"{self.channel}:{self.external_id} → {self.person.slug}"


class Platform(models.TextChoices):
    WEB = "web", "Web"
    TELEGRAM = "telegram", "Telegram"
    CLI = "cli", "CLI"
    CRON = "cron", "Cron"
    API = "api", "API"
    DISCORD = "discord", "Discord"
    WECHAT = "wechat", "WeChat"
    DEBUG = "debug", "Debug"


# What decides a conversation's person (``conversations.selectors.conversation_person``).
_PERSON_COLUMNS = ("person_id", "channel", "platform", "chat_id")


class Conversation(models.Model):
    external_id = models.CharField(max_length=200, unique=True, null=True, blank=True)
    platform = models.CharField(max_length=32, choices=Platform.choices, default=Platform.WEB)
    channel = models.CharField(max_length=64, blank=True, default="")
    chat_id = models.CharField(max_length=200, blank=True, default="")
    person = models.ForeignKey(Person, null=True, blank=True, on_delete=models.SET_NULL, related_name="conversations")
    title = models.CharField(max_length=300, blank=True, default="")
    archived = models.BooleanField(default=False)
    system_prompt = models.TextField(blank=True, default="")
    system_prompt_built_at = models.DateTimeField(null=True, blank=True)
    # Today's half-hour chunks {cst_date, chunks[]} written by the temporal tick; operational, not citable.
    temporal_day = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        db_table = "conversations"
        ordering = ["-updated_at"]
        indexes = [
            # Light sleep and the temporal tick select user-facing conversations by platform.
            models.Index(fields=["platform", "updated_at"], name="conversations_platform_updated"),
            # The identities trigger finds the conversations an account's person decides.
            models.Index(fields=["chat_id"], condition=Q(person__isnull=True), name="conversations_by_account"),
        ]
        triggers = [
            pgtrigger.Trigger(
                name="conversations_drop_prompt_on_person_change",
                when=pgtrigger.Before,
                operation=pgtrigger.UpdateOf(*_PERSON_COLUMNS),
                condition=pgtrigger.AnyChange("person", "channel", "platform", "chat_id"),
                func="""
                    NEW.system_prompt := ''; NEW.system_prompt_built_at := NULL;
                    DELETE FROM conversation_peer_blocks WHERE conversation_id = NEW.id;
                    RETURN NEW;
                """,
            ),
        ]

    def __str__(self) -> str:
        return self.title or self.external_id or f"conversation {self.pk}"

    @property
    def channel_name(self) -> str:
        """The channel its account lives on (identities are keyed by it): the channel, else the platform."""
        return self.channel or self.platform

    @property
    def is_cron(self) -> bool:
        return self.platform == Platform.CRON


class Role(models.TextChoices):
    SYSTEM = "system", "System"
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"
    TOOL = "tool", "Tool"


class Message(SegmentedTextModel):
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=16, choices=Role.choices)
    name = models.CharField(max_length=128, blank=True, default="")
    content = models.TextField(blank=True, default="")
    tool_payload = models.JSONField(null=True, blank=True)
    external_id = models.CharField(max_length=200, null=True, blank=True)
    # Historical timestamps are allowed (imports); the timeline orders by this, then id.
    created_at = models.DateTimeField(default=timezone.now)
    content_fts = models.GeneratedField(
        expression=search_vector_of("fts_segmented"), output_field=SearchVectorField(), db_persist=True
    )

    class Meta:
        db_table = "messages"
        ordering = ["created_at", "id"]
        indexes = [
            search_index(fields=["content_fts"], name="messages_content_fts_gin"),
            # Trigram branch of session recall, over the segmented text.
            trigram_index(name="messages_fts_segmented_trgm"),
            # Timeline of one conversation; also the temporal tick's "after the watermark" scan.
            models.Index(fields=["conversation", "created_at", "id"], name="messages_conversation_timeline"),
            # Light sleep and ref-sync scan one local day of messages.
            models.Index(fields=["created_at"], name="messages_created_at"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "external_id"],
                condition=Q(external_id__isnull=False),
                name="messages_external_id_unique_per_conversation",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:60]}"

    def searchable_text(self) -> str:
        return self.content


class HistoryEntry(SegmentedTextModel):
    """Append-only timeline of consolidated conversation summaries (global when ``person`` is null)."""

    timestamp = models.DateTimeField(default=timezone.now, db_index=True)
    content = models.TextField()
    channel = models.CharField(max_length=64, blank=True, default="")
    # An imported record's session key as its file wrote it (nanobot's ``telegram:12345678``), written back whole.
    session_key = models.CharField(max_length=255, blank=True, default="")
    person = models.ForeignKey(Person, null=True, blank=True, on_delete=models.PROTECT, related_name="history")
    conversation = models.ForeignKey(
        Conversation, null=True, blank=True, on_delete=models.PROTECT, related_name="history_entries"
    )
    search_fts = models.GeneratedField(
        expression=search_vector_of("fts_segmented"), output_field=SearchVectorField(), db_persist=True
    )

    class Meta:
        db_table = "history_entries"
        verbose_name_plural = "history entries"
        ordering = ["id"]
        indexes = [
            search_index(fields=["search_fts"], name="history_search_fts_gin"),
            # search_history: one person's (or the global) timeline by time.
            models.Index(fields=["person", "timestamp"], name="history_person_timestamp"),
        ]
        triggers = [
            AppendOnly(name="history_entries_append_only"),
        ]

    @property
    def cursor(self) -> int:
        return self.pk

    def __str__(self) -> str:
        return f"#{self.pk} {self.timestamp:%Y-%m-%d %H:%M} {self.content[:60]}"

    def searchable_text(self) -> str:
        return self.content


class StmScope(models.TextChoices):
    USER = "user", "User (person + conversation)"
    SERVER = "server", "Server (conversation / channel)"


class ShortTermMemory(models.Model):
    """The LLM-authored short-term summary of a conversation, one row per scope.

    Written beside the messages (never instead of them); turn assembly renders the summary in
    place of the raw messages it covers while it is live (``stm.summary_ttl_hours``).
    """

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="short_term_memories")
    scope = models.CharField(max_length=16, choices=StmScope.choices)
    person = models.ForeignKey(Person, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    channel = models.CharField(max_length=64, blank=True, default="")
    summary = models.TextField()
    # The newest message the summary stands for; later messages stay raw.
    covers_until = models.DateTimeField()
    covers_until_message_id = models.BigIntegerField(null=True, blank=True)
    # The turn of the last successful tool call (the once-per-turn guard).
    last_turn_id = models.CharField(max_length=64, blank=True, default="")
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "short_term_memories"
        verbose_name_plural = "short-term memories"
        constraints = [
            models.UniqueConstraint(fields=["conversation", "scope"], name="short_term_memories_conversation_scope"),
        ]

    def __str__(self) -> str:
        return f"{self.scope} {self.conversation_id}: {self.summary[:60]}"


class PeerBlock(models.Model):
    """The ``temporal_summary_peers`` text a conversation was shown for one closed bucket of today.

    Stored the first time the bucket is rendered so later peer activity can never rewrite it
    (a stable prompt prefix for the LLM's KV cache); empty content means "no peers then".
    """

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="peer_blocks")
    bucket = models.DateTimeField()
    content = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "conversation_peer_blocks"
        ordering = ["bucket"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "bucket"], name="peer_blocks_conversation_bucket"),
        ]
        triggers = [
            pgtrigger.Protect(name="peer_blocks_never_rewritten", operation=pgtrigger.Update),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id} @ {self.bucket:%Y-%m-%d %H:%M}"


class ScopeKind(models.TextChoices):
    AGENT = "agent", "Agent: tools, turn assembly, proxy, bound to persons and/or conversations"
    PERSON = "person", "Person: one person plus global memories"


class TokenScope(models.Model):
    """What a non-staff user's API token may reach (a staff user's token is operator and needs no row).

    Without a row a non-staff token has no rights. ``conversations.access`` reads it; the console
    and ``token_scope`` write it through ``conversations.services.token_scope_set``.
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="anima_scope")
    scope = models.CharField(max_length=16, choices=ScopeKind.choices)
    persons = models.ManyToManyField(Person, blank=True, related_name="token_scopes")
    conversations = models.ManyToManyField(Conversation, blank=True, related_name="token_scopes")
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "token_scopes"

    def __str__(self) -> str:
        return f"{self.user} ({self.scope})"
