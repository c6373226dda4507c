"""Light sleep: per conversation of the day, three LLM stages (facts, feelings, narrative) + the outline.

The outline (``sleep.steps.light_outline``) is asked once a night, after every conversation-day.

Every stage writes in one transaction only after its answer validated, and every row
it writes carries a deterministic external_id, so re-running a day never duplicates.

A stage whose model call fails (after the LLM layer's own repair round) stops its conversation-day
only: the others of the night go on, the step's output lists the failure (the step and the run are
then partial), and the conversation's watermark stays where it was, marked with the stage and the
error, so that the runs of the following days try it again. A spent token budget is not one
conversation's failure: it stops the step.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import date, timedelta

from django.db import transaction
from django.db.models import Exists, OuterRef
from django.db.models.functions import TruncDate
from django.utils import timezone

from anima.core.calendar import day_start, moment_iso
from anima.core.config import config_get
from anima.core.llm import LlmBudgetExceeded, LlmError, llm_json
from anima.core.llm.schema import (
    schema_array,
    schema_date,
    schema_enum,
    schema_integer,
    schema_number,
    schema_object,
    schema_string,
)
from anima.core.models import BlockTag, Entity, MemoryStatus, MemoryType
from anima.core.text import clip, content_key
from memory.models import ContentBlock, LimbicBlock, NarrativeBlock, SemanticMemory
from memory.services import diary_block_create, diary_entries_ensure, memory_create, memory_deprecate, memory_update
from sleep.checks import FactChecks, citations_refusal
from sleep.context import StepContext
from sleep.models import LightSleepWatermark
from sleep.slots import SLOT_RULE, SLOT_SCHEMA, memory_slot, restates
from sleep.step_runs import FAILURES
from sleep.steps.light_outline import autobiography_outline_refresh
from sleep.steps.outcome import answer_or_failure
from temporal.selectors import DayConversation, day_conversation_ids, day_conversations, dialogue_messages

logger = logging.getLogger(__name__)

MEMORY_TYPES = list(MemoryType.values)
LIMBIC_KINDS = ["conversation_mood", "turning_point", "spike"]
SIGNIFICANCE = ["normal", "milestone", "turning_point"]
# Every row light sleep writes has an external id "ls:<day>:<conversation id>:<stage>:<content key>".
LIGHT_SLEEP_ID_PREFIX = "ls:"
# Why a conversation was not consolidated: nobody known is behind it.
UNKNOWN_HUMAN = "unknown_human"
# How far back a run looks for messages stored after their day was slept (imports, delayed clients), and
# for conversation-days whose light sleep failed.
LATE_LOOKBACK = timedelta(days=7)

_LANGUAGE_RULE = (
    "Write every text in the language the conversation is held in (a Chinese conversation gives Chinese text, "
    "an English one English). Writing nothing is a valid answer when nothing is worth keeping."
)
_TEXT = schema_string(min_length=1, max_length=600)
# What one conversation-day yields at most: the demo's richest day gives 6 facts and 3 anchors. A bound keeps a
# grammar-constrained model from repeating an item until max_tokens (a 0.5B model did, with no bound).
MAX_FACTS = 20
MAX_ANCHORS = 8
# Answer budgets from what each stage writes (a CJK character is about a token, four Latin ones are): a fact is
# a sentence plus its type, date and slot, ~90 tokens, and a day gives up to a dozen; an anchor ~120 tokens;
# a narrative 300-600 characters. A cut-off answer is retried once with twice this.
SEMANTIC_MAX_TOKENS = 1200
LIMBIC_MAX_TOKENS = 1000
NARRATIVE_MAX_TOKENS = 800
_OCCURRED_AT = schema_date(nullable=True, description="The day the fact is about, YYYY-MM-DD, or null.")

SEMANTIC_INSTRUCTIONS = (
    "You consolidate one conversation of the day into durable semantic memories about the person and the world. "
    f"Each memory is one self-contained fact typed as one of: {', '.join(MEMORY_TYPES)}. Name the person instead "
    "of 'I'/'我' (e.g. 'Leo 住在杭州', 'Maya lives in Lisbon'). `existing` lists memories already taken from this "
    "same conversation: do not repeat them; you may update one (give only the fields that change) or deprecate "
    f"one that the conversation shows to be wrong. {_LANGUAGE_RULE} "
    "occurred_at is the day the fact happened or was stated, as YYYY-MM-DD, or null. "
    f"{SLOT_RULE} "
    'Answer JSON: {"create": [{"memory_type", "content", "occurred_at", "slot"}], "update": [{"id", ...}], '
    '"deprecate": [{"id", "reason"}]}.'
)
SEMANTIC_SCHEMA = schema_object(
    {
        "create": schema_array(
            schema_object(
                {
                    "memory_type": schema_enum(MEMORY_TYPES),
                    "content": _TEXT,
                    "occurred_at": _OCCURRED_AT,
                    "slot": SLOT_SCHEMA,
                },
                required=["memory_type", "content"],
            ),
            max_items=MAX_FACTS,
            nullable=True,
        ),
        "update": schema_array(
            schema_object(
                {
                    "id": schema_integer(),
                    "memory_type": schema_enum(MEMORY_TYPES, nullable=True),
                    "content": schema_string(min_length=1, max_length=600, nullable=True),
                    "occurred_at": _OCCURRED_AT,
                },
                required=["id"],
            ),
            max_items=MAX_FACTS,
            nullable=True,
        ),
        "deprecate": schema_array(
            schema_object({"id": schema_integer(), "reason": schema_string(max_length=300)}, required=["id", "reason"]),
            max_items=MAX_FACTS,
            nullable=True,
        ),
    }
)

LIMBIC_INSTRUCTIONS = (
    "You are the companion. Record your own emotional anchors from this conversation: the overall mood, turning "
    "points and spikes of feeling. Each anchor is first person ('I feel …' / '我感到……') with valence (-1..1), "
    "arousal (0..1) and intensity (0..1); anchors under intensity 0.3 are not kept. `facts` are the memories "
    f"taken from this conversation; cite the related ones by id in semantic_memory_ids. {_LANGUAGE_RULE} "
    'Answer JSON: {"anchors": [{"kind", "content", "valence", "arousal", "intensity", "source_segment", '
    '"semantic_memory_ids"}]}.'
)
LIMBIC_SCHEMA = schema_object(
    {
        "anchors": schema_array(
            schema_object(
                {
                    "kind": schema_enum(LIMBIC_KINDS),
                    "content": _TEXT,
                    "valence": schema_number(minimum=-1, maximum=1),
                    "arousal": schema_number(minimum=0, maximum=1),
                    "intensity": schema_number(minimum=0, maximum=1),
                    "source_segment": schema_string(max_length=600, nullable=True),
                    "semantic_memory_ids": schema_array(schema_integer(), max_items=MAX_FACTS, nullable=True),
                },
                required=["kind", "content", "valence", "arousal", "intensity"],
            ),
            max_items=MAX_ANCHORS,
        )
    },
    required=["anchors"],
)

NARRATIVE_INSTRUCTIONS = (
    "You are the companion writing your autobiography. From this conversation, its facts and your anchors, write "
    "what the day meant to you as a short first-person narrative with a short title, and judge its significance "
    f"(normal, milestone or turning_point). {_LANGUAGE_RULE} "
    'Answer JSON: {"narratives": [{"title", "content", "significance"}]}.'
)
NARRATIVE_SCHEMA = schema_object(
    {
        "narratives": schema_array(
            schema_object(
                {
                    "title": schema_string(min_length=1, max_length=120),
                    "content": schema_string(min_length=1, max_length=2000),
                    "significance": schema_enum(SIGNIFICANCE),
                },
                required=["title", "content", "significance"],
            ),
            # One narrative a conversation-day is asked for; a few leave room for a day of two halves.
            max_items=3,
        )
    },
    required=["narratives"],
)


def light_sleep(ctx: StepContext) -> dict:
    """The whole step in one process; under a broker its three parts run as a fan-out (see ``sleep.cycle``)."""
    return light_sleep_join(ctx, [light_sleep_conversation(ctx, pk) for pk in light_sleep_conversations(ctx)])


def light_sleep_conversations(ctx: StepContext) -> list[int]:
    """Ids of the day's conversations, in the order light sleep takes them."""
    return day_conversation_ids(day=ctx.day, max_chars=config_get(section="sleep")["dialogue_max_chars"])


def light_sleep_conversation(ctx: StepContext, conversation_id: int) -> dict:
    """One conversation of the day, its three stages: writes only that conversation's rows, safe to run twice."""
    config = config_get(section="sleep")
    found = day_conversations(day=ctx.day, max_chars=config["dialogue_max_chars"], conversation_id=conversation_id)
    if not found:
        return {"conversation_id": conversation_id, "skipped_reason": "no_dialogue"}
    item = found[0]
    mark = (
        LightSleepWatermark.objects.filter(day=ctx.day, conversation=item.conversation)
        .values_list("last_message_id", flat=True)
        .first()
    )
    if mark:  # 0: an attempt failed before anything was consolidated
        # Slept before: only what arrived since (a re-run finds nothing and asks no model again).
        item.messages = [m for m in item.messages if m.pk > mark]
        if not item.messages:
            return {"conversation_id": item.conversation.pk, "skipped_reason": "already_consolidated"}
    # Not late when nothing was consolidated yet: the stages an earlier attempt finished are kept, not re-asked.
    return _consolidate(ctx, item, late=bool(mark), config=config)


def light_sleep_join(ctx: StepContext, conversations: list[dict]) -> dict:
    """After every conversation of the day: the earlier days' failed and late ones, then the outline (shared).

    Lists in ``failures`` every conversation-day that failed, and the outline if it did (the stored one stays).
    """
    config = config_get(section="sleep")
    output: dict = {"day": ctx.day.isoformat(), "conversations": conversations}
    if not conversations:
        output["skipped_reason"] = "no_conversations"
    # Listed apart, so that the night's one-line summary says how many waited for a known human.
    unknown = [report["conversation_id"] for report in conversations if report.get("skipped_reason") == UNKNOWN_HUMAN]
    if unknown:
        output[UNKNOWN_HUMAN] = unknown
    retried = [light_sleep_conversation(replace(ctx, day=day), pk) for day, pk in _failed_before(ctx.day)]
    if retried:
        output["retried"] = retried
    late = [_consolidate(replace(ctx, day=day), item, late=True, config=config) for day, item in _late_batches(ctx.day)]
    if late:
        output["late"] = late
    failures = [failure for report in (*conversations, *retried, *late) for failure in report.get(FAILURES, [])]
    outline = answer_or_failure(lambda: autobiography_outline_refresh(ctx), failures=failures, stage="outline")
    output["autobiography_summary"] = outline if outline is not None else {"skipped_reason": "failed"}
    if failures:
        output[FAILURES] = failures
    return output


def _consolidate(ctx: StepContext, item: DayConversation, *, late: bool, config: dict) -> dict:
    """The three stages over one conversation's messages of ``ctx.day``, then its watermark moves past them.

    A stage whose model call fails ends this conversation-day's attempt, its watermark where it was (see the
    module's docstring); the report then lists the failure under ``failures``.
    """
    report: dict = {
        "conversation_id": item.conversation.pk,
        "day": ctx.day.isoformat(),
        "messages": len(item.messages),
        "truncated": item.truncated,
    }
    if item.person is None:
        # Nobody known said it (no person, no account mapped): what it taught would be person-less, and a
        # person-less memory is in everyone's recall and prompts. Map the account, then sleep the day again.
        return {**report, "skipped_reason": UNKNOWN_HUMAN}
    stage = "semantic"
    try:
        diary = diary_entries_ensure(days=[ctx.day])[ctx.day]
        facts, report["semantic"] = _semantic_stage(ctx, item, late=late)
        stage = "limbic"
        min_intensity = config["limbic_min_intensity"]
        anchors, report["limbic"] = _limbic_stage(ctx, item, diary, facts, min_intensity=min_intensity, late=late)
        stage = "narrative"
        report["narrative"] = _narrative_stage(ctx, item, diary, facts, anchors, late=late)
    except LlmBudgetExceeded:
        raise
    except LlmError as exc:
        return {**report, FAILURES: [_failure_record(ctx, item, stage=stage, exc=exc)]}
    LightSleepWatermark.objects.update_or_create(
        conversation=item.conversation,
        day=ctx.day,
        defaults={"last_message_id": max(m.pk for m in item.messages), "failed_stage": "", "error": ""},
    )
    return report


def _failure_record(ctx: StepContext, item: DayConversation, *, stage: str, exc: LlmError) -> dict:
    """Mark the conversation-day failed at ``stage``, its watermark unmoved (0 when there was none); the failure."""
    error = f"{type(exc).__name__}: {exc}"
    logger.warning("light sleep of conversation %s on %s failed at %s: %s", item.conversation.pk, ctx.day, stage, error)
    LightSleepWatermark.objects.update_or_create(
        conversation=item.conversation,
        day=ctx.day,
        defaults={"failed_stage": stage, "error": error},
        create_defaults={"last_message_id": 0, "failed_stage": stage, "error": error},
    )
    return {"conversation_id": item.conversation.pk, "day": ctx.day.isoformat(), "stage": stage, "error": error}


def _failed_before(day: date) -> list[tuple[date, int]]:
    """(day, conversation id) of the days before ``day`` (within LATE_LOOKBACK) whose last light sleep failed."""
    failed = LightSleepWatermark.objects.filter(day__gte=day - LATE_LOOKBACK, day__lt=day).exclude(error="")
    return list(failed.order_by("day", "conversation_id").values_list("day", "conversation_id"))


def _late_batches(day: date) -> list[tuple[date, DayConversation]]:
    """Messages of the days before ``day`` (within LATE_LOOKBACK) stored after those days were slept.

    A message is late when its conversation has a watermark for the message's local day (within the window)
    that it lies past: one query, whatever the number of watermarks. A failed conversation-day is not late
    but retried whole (``_failed_before``).
    """
    past_mark = LightSleepWatermark.objects.filter(
        conversation_id=OuterRef("conversation_id"),
        day=OuterRef("local_day"),
        last_message_id__lt=OuterRef("pk"),
        error="",
    )
    late = (
        dialogue_messages()
        .filter(created_at__gte=day_start(day - LATE_LOOKBACK), created_at__lt=day_start(day))
        .annotate(local_day=TruncDate("created_at", tzinfo=timezone.get_current_timezone()))
        .filter(Exists(past_mark))
    )
    grouped: dict[tuple[date, int], list] = {}
    for message in late:
        grouped.setdefault((message.local_day, message.conversation_id), []).append(message)
    return [
        (late_day, DayConversation(messages[0].conversation, messages))
        for (late_day, _), messages in sorted(grouped.items())
    ]


def _llm(ctx: StepContext, *, purpose: str, instructions: str, payload: dict, schema: dict, **options) -> dict:
    return llm_json(
        purpose=purpose,
        instructions=instructions,
        payload=payload,
        schema=schema,
        run_key=ctx.run_key,
        token_budget=ctx.token_budget,
        **options,
    )


def _stage_prefix(day: date, item: DayConversation, kind: str) -> str:
    return f"{LIGHT_SLEEP_ID_PREFIX}{day.isoformat()}:{item.conversation.pk}:{kind}:"


def _external_id(day: date, item: DayConversation, kind: str, text: str) -> str:
    return f"{_stage_prefix(day, item, kind)}{content_key(text)}"


def _stage_rows(model: type[Entity], day: date, item: DayConversation, kind: str) -> list[Entity]:
    """Rows a stage already wrote for this conversation and day: a model re-asked would word them anew."""
    return list(model.objects.filter(external_id__startswith=_stage_prefix(day, item, kind)).order_by("id"))


def _day_facts(item: DayConversation, day: date) -> list[SemanticMemory]:
    return list(
        SemanticMemory.objects.filter(source_conversation=item.conversation, source_day=day, status=MemoryStatus.ACTIVE)
    )


def _provenance(item: DayConversation) -> dict:
    conversation = item.conversation
    return {
        "person": item.person,
        "source_conversation": conversation,
        "source_channel": conversation.channel_name,
    }


def _payload(ctx: StepContext, item: DayConversation, **material) -> dict:
    """What every stage shows the model: the day, the conversation and its dialogue, then its own material."""
    return {"day": ctx.day.isoformat(), "conversation": item.meta(), "dialogue": item.dialogue(), **material}


def _diary_block_once(
    report: dict, ctx: StepContext, item: DayConversation, *, diary: Entity, tag: str, **fields
) -> None:
    """Write one diary block of the stage unless a run of the same day already wrote it (same id)."""
    external_id = _external_id(ctx.day, item, tag, fields["content"])
    if ContentBlock.objects.filter(external_id=external_id).exists():
        report["duplicates"] += 1
        return
    block = diary_block_create(diary=diary, tag=tag, external_id=external_id, **fields, **_provenance(item))
    report["created"].append(block.pk)


def _cites_others(report: dict, item: DayConversation, text: str) -> bool:
    """Whether ``text`` cites another person's memories (then it is refused, and the report says why)."""
    reason = citations_refusal(text, person_id=item.person.pk if item.person else None)
    if reason:
        report.setdefault("refused", []).append({"what": clip(text, 120), "reason": reason})
    return bool(reason)


def _semantic_stage(ctx: StepContext, item: DayConversation, *, late: bool) -> tuple[list[SemanticMemory], dict]:
    conversation = item.conversation
    if not late and _stage_rows(SemanticMemory, ctx.day, item, "semantic"):
        return _day_facts(item, ctx.day), {"skipped_reason": "already_consolidated"}
    # Dedupe only against this conversation's own memories; cross-conversation merging is deep sleep's job.
    existing = {
        m.pk: m
        # The person is read for each memory's slot (its name stands for "I").
        for m in SemanticMemory.objects.select_related("person")
        .filter(source_conversation=conversation, status=MemoryStatus.ACTIVE)
        .order_by("id")
    }
    answer = _llm(
        ctx,
        purpose="light-sleep.semantic",
        instructions=SEMANTIC_INSTRUCTIONS,
        max_tokens=SEMANTIC_MAX_TOKENS,
        payload=_payload(
            ctx,
            item,
            existing=[{"id": m.pk, "memory_type": m.memory_type, "content": m.content} for m in existing.values()],
        ),
        schema=SEMANTIC_SCHEMA,
    )
    observed_at = moment_iso(item.messages[0].created_at)
    report = {"created": [], "updated": [], "deprecated": [], "duplicates": 0, "refused": []}
    refused = FactChecks(item, report)
    with transaction.atomic():
        known = {content_key(m.content) for m in existing.values()}
        held = [slot for slot in (memory_slot(m) for m in existing.values()) if slot is not None]
        for fact in answer.get("create", []):
            if refused.fact("create", fact["content"]):
                continue
            external_id = _external_id(ctx.day, item, "semantic", fact["content"])
            slot = refused.slot(fact)
            if (
                content_key(fact["content"]) in known
                or SemanticMemory.objects.filter(external_id=external_id).exists()
                # A restated fact (same slot, same value) never becomes a second active memory.
                or (slot is not None and any(restates(slot, other) for other in held))
            ):
                report["duplicates"] += 1
                continue
            memory = memory_create(
                content=fact["content"],
                memory_type=fact["memory_type"],
                external_id=external_id,
                source_day=ctx.day,
                body={
                    "observed_at": observed_at,
                    "occurred_at": fact.get("occurred_at") or ctx.day.isoformat(),
                    "source_conversations": [conversation.pk],
                    **({"slot": slot.as_body()} if slot else {}),
                },
                **_provenance(item),
            )
            known.add(content_key(memory.content))
            if slot is not None:
                held.append(slot)
            report["created"].append(memory.pk)
        for change in answer.get("update", []):
            memory = existing.get(change["id"])
            if refused.memory("update", change["id"], memory) or refused.fact("update", change.get("content", "")):
                continue
            memory_update(memory=memory, changes={k: v for k, v in change.items() if k != "id"})
            report["updated"].append(memory.pk)
        for change in answer.get("deprecate", []):
            memory = existing.get(change["id"])
            if refused.memory("deprecate", change["id"], memory):
                continue
            memory_deprecate(memory=memory, reason=change["reason"])
            report["deprecated"].append(memory.pk)
    if not report["refused"]:
        del report["refused"]
    return _day_facts(item, ctx.day), report


def _limbic_stage(
    ctx: StepContext,
    item: DayConversation,
    diary: Entity,
    facts: list[SemanticMemory],
    *,
    min_intensity: float,
    late: bool,
) -> tuple[list[dict], dict]:
    written = [] if late else _stage_rows(LimbicBlock, ctx.day, item, BlockTag.LIMBIC.value)
    if written:
        anchors = [
            {
                "content": b.content,
                "kind": b.body["kind"],
                "intensity": b.body["intensity"],
                "valence": b.body.get("valence"),
            }
            for b in written
        ]
        return anchors, {"skipped_reason": "already_consolidated"}
    answer = _llm(
        ctx,
        purpose="light-sleep.limbic",
        instructions=LIMBIC_INSTRUCTIONS,
        max_tokens=LIMBIC_MAX_TOKENS,
        payload=_payload(ctx, item, facts=[{"id": f.pk, "content": f.content} for f in facts]),
        schema=LIMBIC_SCHEMA,
    )
    fact_ids = {f.pk for f in facts}
    report = {"created": [], "refused_low_intensity": 0, "duplicates": 0}
    kept: list[dict] = []
    with transaction.atomic():
        for anchor in answer["anchors"]:
            if anchor["intensity"] < min_intensity:
                report["refused_low_intensity"] += 1
                continue
            if _cites_others(report, item, anchor["content"]):
                continue
            kept.append(anchor)
            # Limbic blocks are append-only (a trigger refuses UPDATE): existing ones are never touched.
            _diary_block_once(
                report,
                ctx,
                item,
                diary=diary,
                tag=BlockTag.LIMBIC.value,
                content=anchor["content"],
                body={
                    "valence": anchor["valence"],
                    "arousal": anchor["arousal"],
                    "intensity": anchor["intensity"],
                    "kind": anchor["kind"],
                    "conversation_id": item.conversation.pk,
                    "source_segment": anchor.get("source_segment", ""),
                    "semantic_memory_ids": [i for i in anchor.get("semantic_memory_ids", []) if i in fact_ids],
                },
            )
    return kept, report


def _narrative_stage(
    ctx: StepContext,
    item: DayConversation,
    diary: Entity,
    facts: list[SemanticMemory],
    anchors: list[dict],
    *,
    late: bool,
) -> dict:
    if not late and _stage_rows(NarrativeBlock, ctx.day, item, BlockTag.NARRATIVE.value):
        return {"skipped_reason": "already_consolidated"}
    answer = _llm(
        ctx,
        purpose="light-sleep.narrative",
        instructions=NARRATIVE_INSTRUCTIONS,
        max_tokens=NARRATIVE_MAX_TOKENS,
        payload=_payload(
            ctx,
            item,
            facts=[{"id": f.pk, "content": f.content} for f in facts],
            anchors=[
                {"content": a["content"], "kind": a["kind"], "intensity": a["intensity"], "valence": a.get("valence")}
                for a in anchors
            ],
        ),
        schema=NARRATIVE_SCHEMA,
    )
    report = {"created": [], "duplicates": 0}
    with transaction.atomic():
        for narrative in answer["narratives"]:
            if _cites_others(report, item, f"{narrative['title']}\n{narrative['content']}"):
                continue
            _diary_block_once(
                report,
                ctx,
                item,
                diary=diary,
                tag=BlockTag.NARRATIVE.value,
                title=narrative["title"],
                content=narrative["content"],
                body={
                    "significance": narrative["significance"],
                    "period_start": ctx.day.isoformat(),
                    "period_end": ctx.day.isoformat(),
                    "source_facts": [f.pk for f in facts],
                    "source_conversations": [item.conversation.pk],
                    "status": "active",
                },
            )
    return report
