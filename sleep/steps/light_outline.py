"""Light sleep's outline stage: the self layer's ``autobiography_summary``, title-only bullets grouped by significance.

Run once a night after every conversation-day of light sleep (its join, ``sleep.steps.light``), over all the
narratives: which ones it keeps (by significance and age), the model call that groups their titles, and one
outline per language in use.
"""

from __future__ import annotations

from datetime import date, timedelta

from anima.core.calendar import day_start
from anima.core.llm import llm_json
from anima.core.llm.schema import schema_array, schema_object, schema_string
from anima.core.models import Entity
from conversations.models import Language
from conversations.selectors import languages_in_use
from memory.models import NarrativeBlock, SelfBlock, SelfLayerBlock
from sleep.context import StepContext

NO_OUTLINE = {"en": "(No autobiography summary yet)", "zh": "（还没有自传摘要）"}
OUTLINE_NORMAL_MAX_AGE = timedelta(days=30)
OUTLINE_OTHER_MAX_AGE = timedelta(days=180)
OUTLINE_FALLBACK_TURNING_POINTS = 5
# The answer budget: an outline title is ~20 tokens. A cut-off answer is retried once with twice this.
OUTLINE_MAX_TOKENS = 1000

OUTLINE_INSTRUCTIONS = (
    "Compress these autobiographical narratives into an outline of titles only, grouped by significance: "
    "turning points, milestones, recent narratives. Keep each title short; keep each title's language. "
    'Answer JSON: {"turning_points": [str], "milestones": [str], "recent_narratives": [str]}.'
)
# An outline is read in every system prompt: a section longer than this is no outline.
_TITLES = schema_array(schema_string(min_length=1, max_length=120), max_items=20)
OUTLINE_SCHEMA = schema_object(
    {"turning_points": _TITLES, "milestones": _TITLES, "recent_narratives": _TITLES},
    required=["turning_points", "milestones", "recent_narratives"],
)
OUTLINE_SECTIONS = (
    ("turning_points", "Turning points"),
    ("milestones", "Milestones"),
    ("recent_narratives", "Recent narratives"),
)
# The outline's headings in a self layer written in Chinese (its titles keep their own language).
OUTLINE_SECTIONS_ZH = {"turning_points": "转折点", "milestones": "里程碑", "recent_narratives": "近来的经历"}
# How far back a conversation counts as in use: the outline is kept in the languages of these.
OUTLINE_LANGUAGE_WINDOW = timedelta(days=30)


def _narrative_day(block: Entity) -> date:
    end = (block.body or {}).get("period_end")
    try:
        return date.fromisoformat(end) if end else block.source_day
    except ValueError:
        return block.source_day


def _outline_candidates(*, day: date) -> list[Entity]:
    """Narratives the outline keeps: normal ones up to 30 days old, milestones up to 180, turning points always."""
    narratives = [
        n
        for n in NarrativeBlock.objects.filter(source_day__lte=day).order_by("source_day", "id")
        # A blank row (stored before answers were checked) has nothing to outline.
        if (n.body or {}).get("status", "active") == "active" and _outline_title(n)
    ]
    kept = []
    for narrative in narratives:
        significance = (narrative.body or {}).get("significance", "normal")
        age = day - (_narrative_day(narrative) or day)
        if significance == "normal" and age > OUTLINE_NORMAL_MAX_AGE:
            continue
        if significance != "turning_point" and age > OUTLINE_OTHER_MAX_AGE:
            continue
        kept.append(narrative)
    if not kept:
        kept = [n for n in narratives if (n.body or {}).get("significance") == "turning_point"][
            :OUTLINE_FALLBACK_TURNING_POINTS
        ]
    return kept


def _outline_title(narrative: Entity) -> str:
    return (narrative.title.strip() or narrative.content.strip()[:60]).strip()


def autobiography_outline_refresh(ctx: StepContext) -> dict:
    """The outline stage: the self layer's autobiography_summary, title-only bullets grouped by significance."""
    narratives = _outline_candidates(day=ctx.day)
    if narratives:
        answer = llm_json(
            purpose="light-sleep.outline",
            instructions=OUTLINE_INSTRUCTIONS,
            max_tokens=OUTLINE_MAX_TOKENS,
            run_key=ctx.run_key,
            token_budget=ctx.token_budget,
            payload={
                "narratives": [
                    {
                        "title": _outline_title(n),
                        "significance": (n.body or {}).get("significance", "normal"),
                        "period_start": (n.body or {}).get("period_start", n.source_day.isoformat()),
                    }
                    for n in narratives
                ]
            },
            schema=OUTLINE_SCHEMA,
        )
        if not any(answer[key] for key, _ in OUTLINE_SECTIONS):
            # There are narratives to outline: an answer without one title is no outline, the stored one stays.
            return {"narratives": len(narratives), "skipped_reason": "empty_answer"}
    since = day_start(ctx.day + timedelta(days=1)) - OUTLINE_LANGUAGE_WINDOW
    chars = 0
    # One outline per language in use: the headings in it, the titles as the narratives wrote them.
    for language in languages_in_use(since=since):
        content = _outline_text(answer, language=language) if narratives else NO_OUTLINE[language]
        SelfLayerBlock.objects.update_or_create(
            key=SelfBlock.AUTOBIOGRAPHY_SUMMARY, language=language, defaults={"content": content}
        )
        chars = chars or len(content)
    return {"narratives": len(narratives), "chars": chars}


def _outline_text(answer: dict, *, language: str) -> str:
    return "\n\n".join(
        f"## {OUTLINE_SECTIONS_ZH[key] if language == Language.ZH else heading}\n"
        + "\n".join(f"- {title.strip()}" for title in answer[key])
        for key, heading in OUTLINE_SECTIONS
        if answer[key]
    )
