"""Memory kinds as proxies over ``entities``, citations, and the self layer."""

from __future__ import annotations

from collections.abc import Iterable

import pgtrigger
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone

from anima.core.models import BlockTag, Component, ComponentKind, ComponentManager, Entity, MemoryStatus, MemoryType
from conversations.models import Language


class ComponentProxy(ComponentKind, Entity):
    """Base of memory's per-kind proxies."""

    class Meta:
        proxy = True


class SemanticMemory(ComponentProxy):
    component = Component.SEMANTIC_MEMORY
    objects = ComponentManager(Component.SEMANTIC_MEMORY)

    class Meta:
        proxy = True
        verbose_name_plural = "semantic memories"

    def save(self, *args, **kwargs) -> None:
        if self.status is None:
            self.status = MemoryStatus.ACTIVE
        super().save(*args, **kwargs)


class DiaryEntry(ComponentProxy):
    component = Component.DIARY_ENTRY
    objects = ComponentManager(Component.DIARY_ENTRY)

    class Meta:
        proxy = True
        verbose_name_plural = "diary entries"


class ContentBlock(ComponentProxy):
    component = Component.CONTENT_BLOCK
    objects = ComponentManager(Component.CONTENT_BLOCK)

    class Meta:
        proxy = True


class LimbicBlock(ContentBlock):
    """Limbic memory: the anchors light sleep writes per conversation, and the imprints made of recurring ones."""

    objects = ComponentManager(Component.CONTENT_BLOCK, tag=BlockTag.LIMBIC)
    # An imprint summarises anchors: whatever reads feelings of a day or a window reads anchors only, or would
    # count the same moments twice.
    anchors = ComponentManager(Component.CONTENT_BLOCK, tag=BlockTag.LIMBIC, memory_type__isnull=True)
    imprints = ComponentManager(Component.CONTENT_BLOCK, tag=BlockTag.LIMBIC, memory_type=MemoryType.IMPRINT)

    class Meta:
        proxy = True
        verbose_name = "limbic memory"
        verbose_name_plural = "limbic memories"


class NarrativeBlock(ContentBlock):
    objects = ComponentManager(Component.CONTENT_BLOCK, tag=BlockTag.NARRATIVE)

    class Meta:
        proxy = True
        verbose_name = "autobiographical narrative"


class DreamBlock(ContentBlock):
    objects = ComponentManager(Component.CONTENT_BLOCK, tag=BlockTag.DREAM)

    class Meta:
        proxy = True
        verbose_name = "dream"


# A diary day reads limbic before narrative before dream, then in the order the blocks were written.
_DIARY_ORDER = {BlockTag.LIMBIC: 0, BlockTag.NARRATIVE: 1, BlockTag.DREAM: 2}


def diary_reading_order(blocks: Iterable[Entity]) -> list[Entity]:
    """A day's blocks in the diary's reading order."""
    return sorted(
        blocks, key=lambda block: (_DIARY_ORDER.get(block.tag, len(_DIARY_ORDER)), block.created_at, block.pk)
    )


class MemoryReference(models.Model):
    """One message citing one entity with ``[[anima:ID]]``; triggers keep ``reference_count`` = Σ weight."""

    entity = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="references")
    message = models.ForeignKey("conversations.Message", on_delete=models.CASCADE, related_name="references")
    weight = models.PositiveSmallIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memory_references"
        constraints = [
            # Each citing message counts once per cited id.
            models.UniqueConstraint(fields=["message", "entity"], name="memory_references_once_per_message"),
        ]
        triggers = [
            pgtrigger.Trigger(
                name="reference_count_on_insert",
                when=pgtrigger.After,
                operation=pgtrigger.Insert,
                func="UPDATE entities SET reference_count = reference_count + NEW.weight WHERE id = NEW.entity_id;"
                " RETURN NULL;",
            ),
            pgtrigger.Trigger(
                name="reference_count_on_delete",
                when=pgtrigger.After,
                operation=pgtrigger.Delete,
                func="UPDATE entities SET reference_count = GREATEST(reference_count - OLD.weight, 0)"
                " WHERE id = OLD.entity_id; RETURN NULL;",
            ),
            pgtrigger.Trigger(
                name="reference_count_on_update",
                when=pgtrigger.After,
                operation=pgtrigger.UpdateOf("weight", "entity_id"),
                func="UPDATE entities SET reference_count = GREATEST(reference_count - OLD.weight, 0)"
                " WHERE id = OLD.entity_id;"
                " UPDATE entities SET reference_count = reference_count + NEW.weight WHERE id = NEW.entity_id;"
                " RETURN NULL;",
            ),
        ]

    def __str__(self) -> str:
        return f"message {self.message_id} cites [[anima:{self.entity_id}]]"


class SelfBlock(models.TextChoices):
    EXISTENCE_ANCHOR = "existence_anchor", "Existence anchor"
    SELF_MODEL = "self_model", "Self model"
    PERSONALITY_BASELINE = "personality_baseline", "Personality baseline"
    DIRECTION = "direction", "Direction"
    METACOGNITION = "metacognition", "Metacognition"
    AUTOBIOGRAPHY_SUMMARY = "autobiography_summary", "Autobiography summary"


# Each block's heading in a prompt framed in Chinese (``SelfBlock`` labels are the English ones).
SELF_BLOCK_ZH = {
    "existence_anchor": "存在之锚",
    "self_model": "自我认知",
    "personality_baseline": "性格基调",
    "direction": "方向",
    "metacognition": "元认知",
    "autobiography_summary": "自传摘要",
}


class SelfLayerBlock(models.Model):
    """One of the six self-layer blocks carried by every memory-processing LLM call, in one language.

    A block is kept per language in use: a prompt reads the version in its conversation's language.
    """

    key = models.CharField(max_length=32, choices=SelfBlock.choices)
    language = models.CharField(max_length=8, choices=Language.choices, default=Language.EN)
    content = models.TextField(blank=True, default="")
    # existence_anchor is locked: it changes only with an explicit force.
    locked = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "self_layer_blocks"
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["key", "language"], name="self_layer_block_key_language")]

    def __str__(self) -> str:
        return f"{self.get_key_display()} ({self.language})"

    def heading(self, language: str) -> str:
        """The block's heading in a prompt framed in ``language``."""
        return SELF_BLOCK_ZH[self.key] if language == Language.ZH else self.get_key_display()


class WorkspaceText(models.Model):
    """What an imported workspace file held that Anima cannot place (nanobot's own SOUL.md persona, free-form
    Markdown), kept verbatim so an export writes it back as it was."""

    path = models.CharField(max_length=255, unique=True)  # the file, relative to the workspace root
    content = models.TextField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "workspace_texts"
        ordering = ["path"]

    def __str__(self) -> str:
        return self.path


class Mood(models.TextChoices):
    """How a notable week differs from the usual days (``memory.tendency`` says when a week is notable)."""

    STRESSED = "stressed", "More stressed than usual"
    LOW = "low", "Lower in spirits than usual"
    UPBEAT = "upbeat", "In better spirits than usual"
    TENSE = "tense", "More on edge than usual"
    SUBDUED = "subdued", "Quieter than usual"


class EmotionalTendency(models.Model):
    """The third limbic form: how the anchors of the 7 and 30 days up to ``day`` lean, per person.

    ``person`` null is the overall tendency over every anchor (operator eyes only: it mixes people).
    Written by the nightly ``emotional-tendency`` step; re-running a day rewrites the same values.
    Derived from a person's limbic anchors, so it goes with the person.
    """

    person = models.ForeignKey(
        "conversations.Person", null=True, blank=True, on_delete=models.CASCADE, related_name="emotional_tendencies"
    )
    day = models.DateField(db_index=True)
    # Per window: anchors and days with anchors; intensity-weighted mean valence (-1..1) and arousal
    # (0..1), mean intensity; trend = least-squares slope of the daily means, per week.
    week_anchors = models.PositiveIntegerField(default=0)
    week_days = models.PositiveSmallIntegerField(default=0)
    week_valence = models.FloatField(null=True, blank=True)
    week_arousal = models.FloatField(null=True, blank=True)
    week_intensity = models.FloatField(null=True, blank=True)
    week_valence_trend = models.FloatField(null=True, blank=True)
    week_arousal_trend = models.FloatField(null=True, blank=True)
    month_anchors = models.PositiveIntegerField(default=0)
    month_days = models.PositiveSmallIntegerField(default=0)
    month_valence = models.FloatField(null=True, blank=True)
    month_arousal = models.FloatField(null=True, blank=True)
    month_intensity = models.FloatField(null=True, blank=True)
    month_valence_trend = models.FloatField(null=True, blank=True)
    month_arousal_trend = models.FloatField(null=True, blank=True)
    # The week against the usual days before it: the median-day difference, the threshold it had to
    # pass (null: too few days to tell), and what that makes the week.
    valence_shift = models.FloatField(null=True, blank=True)
    arousal_shift = models.FloatField(null=True, blank=True)
    valence_threshold = models.FloatField(null=True, blank=True)
    arousal_threshold = models.FloatField(null=True, blank=True)
    mood = models.CharField(max_length=16, choices=Mood.choices, blank=True, default="")
    mood_since = models.DateField(null=True, blank=True)
    # Days of the 30 that stood out: [{day, valence, arousal, anchors, valence_direction, arousal_direction}].
    shifts = models.JSONField(default=list, blank=True)

    class Meta:
        db_table = "emotional_tendencies"
        verbose_name_plural = "emotional tendencies"
        ordering = ["-day", "person_id"]
        constraints = [
            # One row per person and day, and one overall row (person null) per day.
            models.UniqueConstraint(
                fields=["person", "day"], nulls_distinct=False, name="emotional_tendencies_one_per_person_day"
            ),
        ]

    def __str__(self) -> str:
        who = self.person.slug if self.person_id else "overall"
        return f"{who} {self.day}{f' ({self.mood})' if self.mood else ''}"


class SubjectKind(models.TextChoices):
    """What a subject of a person's memories is."""

    SELF = "self", "The person themself"
    PERSON = "person", "Person"
    PET = "pet", "Pet"
    PLACE = "place", "Place"
    ORGANISATION = "organisation", "Organisation"
    OTHER = "other", "Other"


class Subject(models.Model):
    """Someone or something a person's memories are about: the person, a relative, a pet, a place.

    Built nightly from the slots of the person's active facts (``sleep.steps.subjects``); ``key`` is what
    the build recognises a subject by (the relation and the name as the slot grammar reads them), so a
    re-run finds the rows it wrote. Derived from a person's memories, so it goes with the person.
    """

    person = models.ForeignKey("conversations.Person", on_delete=models.CASCADE, related_name="subjects")
    key = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=SubjectKind.choices)
    # The relation as the slot grammar reads it ("daughter", "cat"), "self" for the person, the attribute a
    # place is read from ("residence", "workplace"), "" when unknown.
    relation = models.CharField(max_length=64, blank=True, default="")
    name = models.CharField(max_length=200, blank=True, default="")  # as stated ("小雨", "Lily"); "" if unnamed
    # Every name and word the facts refer to it by, as written (names, relation words in either language).
    aliases = ArrayField(models.TextField(), default=list, blank=True)
    # The subject this one is related through (null: related to the person directly).
    related_to = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="related_subjects"
    )
    profile = models.ForeignKey(
        Entity, null=True, blank=True, on_delete=models.SET_NULL, related_name="profiled_subjects"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "subjects"
        ordering = ["person_id", "id"]
        constraints = [models.UniqueConstraint(fields=["person", "key"], name="subjects_one_per_person_key")]

    def __str__(self) -> str:
        return self.name or self.relation or self.key

    def label(self) -> str:
        """How a listing names it: its name, else its relation."""
        return self.name or self.relation or self.key


class SubjectMention(models.Model):
    """One active fact of a person that is about (or names) one of their subjects."""

    subject = models.ForeignKey(Subject, on_delete=models.CASCADE, related_name="mentions")
    memory = models.ForeignKey(Entity, on_delete=models.CASCADE, related_name="subject_mentions")
    # What the fact states of the subject: its slot's attribute ("job", "age", "favourite:film"), "" when the fact
    # only names the subject. Recall brings the facts stating what a question asks ("where do I live?").
    attribute = models.CharField(max_length=64, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "subject_mentions"
        ordering = ["subject_id", "memory_id"]
        constraints = [models.UniqueConstraint(fields=["subject", "memory"], name="subject_mentions_once")]

    def __str__(self) -> str:
        return f"{self.subject} in [[anima:{self.memory_id}]]"
