"""Reads over memories."""

from __future__ import annotations

import logging

from django.db.models import QuerySet

from anima.config import config_get
from anima.models import MemoryStatus
from memory.models import SelfLayerBlock, SemanticMemory

logger = logging.getLogger(__name__)

RESIDENT_PINNED_HARD_CAP = 40


def active_semantic_memories() -> QuerySet[SemanticMemory]:
    return SemanticMemory.objects.filter(status=MemoryStatus.ACTIVE)


def resident_memories() -> list[SemanticMemory]:
    """Pinned memories (at most 40; more are cut here with a warning) then the most referenced ones."""
    config = config_get(section="memory.resident")
    pinned_limit = min(config["pinned_limit"], RESIDENT_PINNED_HARD_CAP)
    pinned = list(active_semantic_memories().filter(pinned=True).order_by("-reference_count", "id")[: pinned_limit + 1])
    if len(pinned) > pinned_limit:
        logger.warning("more than %d pinned memories; resident memory keeps the first %d", pinned_limit, pinned_limit)
        pinned = pinned[:pinned_limit]
    top = list(
        active_semantic_memories()
        .filter(pinned=False, reference_count__gt=0)
        .order_by("-reference_count", "id")[: config["top_referenced"]]
    )
    return pinned + top


def resident_memory_lines() -> list[str]:
    """One line per resident memory, each ending in its citation marker."""
    return [f"- {memory.content} [[anima:{memory.pk}]]" for memory in resident_memories()]


def self_layer_text() -> str:
    """The six self-layer blocks as prompt text (empty blocks left out)."""
    blocks = SelfLayerBlock.objects.exclude(content="").order_by("id")
    return "\n\n".join(f"## {block.get_key_display()}\n{block.content}" for block in blocks)
