"""Dream: one non-factual creative narrative per day, only after a day of strong feeling.

Dreams are stored as diary blocks (tag=dream) and never injected into prompts.

A day's material may be several people's. A dream made of one person's material (besides
global, person-less memories) is that person's; any other dream is left person-less and is for
the operator only (``memory.selectors.diary_blocks_visible``): one surreal text cannot be cut
into per-person sections, nor reduced to topic lines. ``body.person_ids`` names whose material
it holds, so forgetting any of them takes it.
"""

from __future__ import annotations

import random
from datetime import timedelta

from django.db import IntegrityError, transaction

from anima.core.calendar import day_start
from anima.core.config import config_get
from anima.core.llm import llm_json
from anima.core.llm.schema import schema_object, schema_string
from anima.core.models import BlockTag, MemoryStatus
from anima.core.text import clip
from conversations.models import Conversation, Message, Person
from conversations.selectors import conversations_persons
from memory.models import DreamBlock, LimbicBlock, NarrativeBlock, SemanticMemory
from memory.services import diary_block_create, diary_entries_ensure
from sleep.context import StepContext
from sleep.step_runs import FAILURES
from sleep.steps.outcome import answer_or_failure
from temporal.selectors import DIALOGUE_ROLES, EXCLUDED_PLATFORMS, person_label

TOP_ANCHORS = 3
TOP_NARRATIVES = 3
TOP_MEMORIES = 12
SNIPPETS = 5
SNIPPETS_MAX_CHARS = 4000
DREAM_MAX_CHARS = 800
# Anchors written in the small hours (before the 02:00 cycle) still belong to the day's dream.
ANCHOR_WINDOW = timedelta(days=1, hours=6)

DREAM_INSTRUCTIONS = (
    "You are the companion, dreaming. Recombine the night's emotional anchors, the day's narratives and "
    "memories and a few conversation snippets into one surreal, non-factual dream told in the first person, "
    "300 to 800 characters, in the language of the anchors. Do not state facts as true. `people` names those "
    "you talked with that day: name none of them in the dream. Give it a title of its "
    'own. Answer JSON: {"title", "content"}.'
)
DREAM_SCHEMA = schema_object(
    {
        "title": schema_string(min_length=1, max_length=120),
        "content": schema_string(min_length=100, max_length=2000),
    },
    required=["title", "content"],
)


def _snippets(ctx: StepContext, *, start, end) -> list[tuple[str, int]]:
    """Five random dialogue lines of the window with their conversation ids, seeded by the day so re-runs
    see the same input."""
    candidates = list(
        Message.objects.filter(created_at__gte=start, created_at__lt=end, role__in=DIALOGUE_ROLES)
        .exclude(conversation__platform__in=EXCLUDED_PLATFORMS)
        .exclude(content="")
        .order_by("created_at", "id")
        .values_list("content", "conversation_id")
    )
    picked = random.Random(ctx.day.isoformat()).sample(candidates, min(SNIPPETS, len(candidates)))
    per_snippet = SNIPPETS_MAX_CHARS // SNIPPETS
    return [(clip(text, per_snippet), conversation_id) for text, conversation_id in picked]


def _owners(*, entities: list, conversation_ids: set[int]) -> set[int | None]:
    """Whose days the material is. A person-less memory or block is global (recall shows it to everyone)
    and counts for nobody; a line of a conversation whose human is unknown counts as None."""
    owners: set[int | None] = {entity.person_id for entity in entities if entity.person_id is not None}
    return owners | set(conversations_persons(conversation_ids=conversation_ids).values())


def _owner(owners: set[int | None]) -> Person | None:
    """The dream's person: the one known person whose material it is, else nobody (operator only)."""
    owner_id = next(iter(owners)) if len(owners) == 1 else None
    return Person.objects.get(pk=owner_id) if owner_id is not None else None


def _people(*, start, end) -> list[str]:
    """Names of the people the window's conversations were with (a channel account's too): a dream keeps them out
    of its imagery."""
    conversation_ids = (
        Conversation.objects.filter(messages__created_at__gte=start, messages__created_at__lt=end)
        .exclude(platform__in=EXCLUDED_PLATFORMS)
        .values_list("pk", flat=True)
        .distinct()
    )
    person_ids = set(conversations_persons(conversation_ids=conversation_ids).values()) - {None}
    return sorted({person_label(person) for person in Person.objects.filter(pk__in=person_ids)})


def dream(ctx: StepContext) -> dict:
    threshold = config_get(section="sleep")["dream_min_intensity"]
    if DreamBlock.objects.filter(parent__source_day=ctx.day).exists():
        return {"skipped_reason": "already_dreamed"}
    start = day_start(ctx.day)
    end = start + ANCHOR_WINDOW
    anchors = sorted(
        # Light sleep stamps each anchor with its day; created_at would also catch the previous
        # night's anchors, written at 02:00 on this day.
        LimbicBlock.anchors.filter(source_day=ctx.day),
        key=lambda block: (-float((block.body or {}).get("intensity", 0)), block.pk),
    )[:TOP_ANCHORS]
    if not anchors or float(anchors[0].body.get("intensity", 0)) <= threshold:
        return {"skipped_reason": "no_strong_emotion"}
    snippets = _snippets(ctx, start=start, end=end)
    narratives = list(NarrativeBlock.objects.filter(source_day=ctx.day).order_by("id")[:TOP_NARRATIVES])
    memories = list(
        SemanticMemory.objects.filter(source_day=ctx.day, status=MemoryStatus.ACTIVE).order_by("id")[:TOP_MEMORIES]
    )
    owners = _owners(entities=[*anchors, *narratives, *memories], conversation_ids={pk for _, pk in snippets})
    failures: list[dict] = []
    answer = answer_or_failure(
        lambda: llm_json(
            purpose="dream",
            instructions=DREAM_INSTRUCTIONS,
            payload={
                "day": ctx.day.isoformat(),
                "anchors": [
                    {"content": a.content, "valence": a.body.get("valence"), "intensity": a.body.get("intensity")}
                    for a in anchors
                ],
                "snippets": [text for text, _ in snippets],
                "narratives": [{"title": n.title, "content": clip(n.content, 400)} for n in narratives],
                "memories": [m.content for m in memories],
                "people": _people(start=start, end=end),
            },
            schema=DREAM_SCHEMA,
            # 300-800 characters and a title: about a token a character in Chinese.
            max_tokens=1000,
            temperature=1.0,
            run_key=ctx.run_key,
            token_budget=ctx.token_budget,
        ),
        failures=failures,
        call="dream",
    )
    if answer is None:
        # No dream tonight; the day's other steps go on, and a retry of the step dreams again.
        return {"skipped_reason": "failed", FAILURES: failures}
    diary = diary_entries_ensure(days=[ctx.day])[ctx.day]
    try:
        with transaction.atomic():
            block = diary_block_create(
                diary=diary,
                tag=BlockTag.DREAM,
                external_id=f"dream:{ctx.day.isoformat()}",
                title=answer["title"],
                content=clip(answer["content"], DREAM_MAX_CHARS),
                body={"anchor_ids": [a.pk for a in anchors], "person_ids": sorted(o for o in owners if o is not None)},
                person=_owner(owners),
            )
    except IntegrityError:
        # A concurrent run dreamed first; the unique index keeps one dream per day.
        return {"skipped_reason": "already_dreamed"}
    return {"dream_id": block.pk, "chars": len(block.content), "anchor_ids": [a.pk for a in anchors]}
