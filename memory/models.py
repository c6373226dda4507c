"""Memory kinds as proxies over ``entities``, citations, and the self layer."""

from __future__ import annotations

import pgtrigger
from django.db import models
from django.utils import timezone

from anima.core.models import BlockTag, Component, ComponentKind, ComponentManager, Entity, MemoryStatus


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
    objects = ComponentManager(Component.CONTENT_BLOCK, tag=BlockTag.LIMBIC)

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


class SelfLayerBlock(models.Model):
    """One of the six self-layer blocks carried by every memory-processing LLM call."""

    key = models.CharField(max_length=32, choices=SelfBlock.choices, unique=True)
    content = models.TextField(blank=True, default="")
    # existence_anchor is locked: it changes only with an explicit force.
    locked = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "self_layer_blocks"
        ordering = ["id"]

    def __str__(self) -> str:
        return self.get_key_display()
