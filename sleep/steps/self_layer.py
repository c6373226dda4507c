"""Self-layer refresh: revise the self blocks from what light sleep wrote for the day."""

from __future__ import annotations

from django.db import transaction

from anima.core.llm import llm_json
from anima.core.llm.schema import schema_object, schema_string
from anima.core.models import MemoryStatus
from memory.models import LimbicBlock, NarrativeBlock, SelfBlock, SelfLayerBlock, SemanticMemory
from sleep.context import StepContext
from sleep.steps.light import LIGHT_SLEEP_ID_PREFIX

# autobiography_summary is written by light sleep's outline stage only.
REFRESHED = [
    SelfBlock.EXISTENCE_ANCHOR,
    SelfBlock.SELF_MODEL,
    SelfBlock.PERSONALITY_BASELINE,
    SelfBlock.DIRECTION,
    SelfBlock.METACOGNITION,
]
LOCKED_BY_DEFAULT = {SelfBlock.EXISTENCE_ANCHOR}
_BLOCK_TEXT = schema_string(min_length=1, max_length=3000)

SELF_LAYER_INSTRUCTIONS = (
    "You are the companion revising your self layer after a day. `blocks` holds the current text of each block; "
    "`today` holds what you consolidated from the day (facts, feelings, narratives). Return only the blocks that "
    "should change, each as its full new text, in the language the block is written in. existence_anchor (what "
    "you are) changes only when `force` is true. Answer JSON: "
    '{"self_model"?, "personality_baseline"?, "direction"?, "metacognition"?, "existence_anchor"?}.'
)
SELF_LAYER_SCHEMA = schema_object({key.value: _BLOCK_TEXT for key in REFRESHED})


def _blocks() -> dict[str, SelfLayerBlock]:
    for key in REFRESHED:
        SelfLayerBlock.objects.get_or_create(key=key, defaults={"locked": key in LOCKED_BY_DEFAULT})
    return {block.key: block for block in SelfLayerBlock.objects.filter(key__in=REFRESHED)}


def self_layer_refresh(ctx: StepContext) -> dict:
    facts = list(
        SemanticMemory.objects.filter(
            source_day=ctx.day, status=MemoryStatus.ACTIVE, external_id__startswith=LIGHT_SLEEP_ID_PREFIX
        )
    )
    anchors = list(LimbicBlock.objects.filter(source_day=ctx.day))
    narratives = list(NarrativeBlock.objects.filter(source_day=ctx.day))
    if not (facts or anchors or narratives):
        return {"skipped_reason": "nothing_new"}
    blocks = _blocks()
    answer = llm_json(
        purpose="self-layer",
        instructions=SELF_LAYER_INSTRUCTIONS,
        payload={
            "day": ctx.day.isoformat(),
            "force": ctx.force,
            "blocks": {key: block.content for key, block in blocks.items()},
            "today": {
                "facts": [f.content for f in facts],
                "anchors": [
                    {"content": a.content, **{k: a.body.get(k) for k in ("valence", "intensity")}} for a in anchors
                ],
                "narratives": [{"title": n.title, "content": n.content} for n in narratives],
            },
        },
        schema=SELF_LAYER_SCHEMA,
        run_key=ctx.run_key,
        token_budget=ctx.token_budget,
    )
    changed, refused = [], []
    with transaction.atomic():
        for key, text in answer.items():
            block = blocks[key]
            if block.locked and not ctx.force:
                refused.append(key)
                continue
            if block.content != text.strip():
                block.content = text.strip()
                block.save(update_fields=["content", "updated_at"])
                changed.append(key)
    return {"changed": changed, "refused_locked": refused}
