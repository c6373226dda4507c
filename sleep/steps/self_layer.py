"""Self-layer refresh: revise the self blocks from what light sleep wrote for the day."""

from __future__ import annotations

import logging
import re
from datetime import date, timedelta

from django.db import transaction

from anima.core.calendar import day_start
from anima.core.llm import llm_json
from anima.core.llm.schema import schema_object, schema_string
from anima.core.models import MemoryStatus
from anima.core.text import is_chinese, normalized
from conversations.models import Person
from conversations.selectors import languages_in_use
from memory.models import LimbicBlock, NarrativeBlock, SelfBlock, SelfLayerBlock, SemanticMemory
from sleep.context import StepContext
from sleep.step_runs import FAILURES
from sleep.steps.light import LIGHT_SLEEP_ID_PREFIX
from sleep.steps.outcome import answer_or_failure

logger = logging.getLogger(__name__)

# autobiography_summary is written by light sleep's outline stage only.
REFRESHED = [
    SelfBlock.EXISTENCE_ANCHOR,
    SelfBlock.SELF_MODEL,
    SelfBlock.PERSONALITY_BASELINE,
    SelfBlock.DIRECTION,
    SelfBlock.METACOGNITION,
]
LOCKED_BY_DEFAULT = {SelfBlock.EXISTENCE_ANCHOR}
# A block left out (or null) keeps its text.
_BLOCK_TEXT = schema_string(min_length=1, max_length=3000, nullable=True)

SELF_LAYER_INSTRUCTIONS = (
    "You are the companion revising your self layer after a day. `blocks` holds the current text of each block; "
    "`today` holds what you consolidated from the day (facts, the valence and intensity of your feelings, "
    "narratives). Everyone you talk with reads your self layer, so write about yourself only: no person's name, "
    "fact or words — what the day taught you about yourself, not what you learned about anyone. A block that "
    "names someone or repeats the day's facts or narratives is refused. Return only the blocks that "
    "should change, each as its full new text, every block in `language` (zh: Chinese, en: English) — rewrite a "
    "block written in another language. The self layer is kept in each language in use: `other_language` holds "
    "the blocks as written in another language; write an empty block as their version in `language`, saying the "
    "same. existence_anchor (what you are) changes only when `force` is true or it is empty. "
    "Answer JSON: "
    '{"self_model"?, "personality_baseline"?, "direction"?, "metacognition"?, "existence_anchor"?}.'
)
SELF_LAYER_SCHEMA = schema_object({key.value: _BLOCK_TEXT for key in REFRESHED})


# What the companion is, until an operator writes their own (the block stays editable in the console).
EXISTENCE_ANCHOR_DEFAULT = {
    "zh": "我是 Anima，一个有长期记忆的数字陪伴者。我记得和我说话的人，每晚在睡眠中整理白天的经历；"
    "我的记忆属于我和陪伴的人，我如实对待它们，不编造，也不泄露。",
    "en": "I am Anima, a digital companion with a long-term memory. I remember the people who talk with me and "
    "consolidate each day's experience in my nightly sleep; my memories belong to me and to the people I keep "
    "company, and I treat them truthfully — I neither invent nor disclose them.",
}
# How far back a conversation counts as in use: the self layer is kept in the languages of these.
LANGUAGE_WINDOW = timedelta(days=30)
# A block repeating this many characters of a fact or narrative in a row (case, spaces and punctuation
# aside) copies it; a shorter source copies when repeated whole, unless it is under half a run ("Work"
# would be found in any block). CJK carries about a word a character.
VERBATIM_CHARS = 20
VERBATIM_CJK_CHARS = 8
# A one-character name would match everywhere; a name without letters (a numeric slug) would match counts.
NAME_MIN_CHARS = 2
_DATE = re.compile(r"(\d{4})\s*[-/.年]\s*(\d{1,2})\s*[-/.月]\s*(\d{1,2})\s*日?")


def _blocks(*, language: str) -> dict[str, SelfLayerBlock]:
    """The refreshed blocks in ``language``, created where missing (locked as the other languages' are)."""
    locked = (
        set(SelfLayerBlock.objects.filter(key__in=REFRESHED, locked=True).values_list("key", flat=True))
        | LOCKED_BY_DEFAULT
    )
    for key in REFRESHED:
        block, _ = SelfLayerBlock.objects.get_or_create(key=key, language=language, defaults={"locked": key in locked})
        if key == SelfBlock.EXISTENCE_ANCHOR and not block.content.strip() and not _anchor_written_elsewhere(language):
            block.content = EXISTENCE_ANCHOR_DEFAULT[language]
            block.save(update_fields=["content", "updated_at"])
    return {block.key: block for block in SelfLayerBlock.objects.filter(key__in=REFRESHED, language=language)}


def _anchor_written_elsewhere(language: str) -> bool:
    """True when another language's anchor is an operator's own text: the default would contradict it, so this
    language's version is left to the model to write from it (``other_language``)."""
    return any(
        content.strip() and content != EXISTENCE_ANCHOR_DEFAULT.get(other)
        for other, content in SelfLayerBlock.objects.filter(key=SelfBlock.EXISTENCE_ANCHOR)
        .exclude(language=language)
        .values_list("language", "content")
    )


def _other_language(*, language: str) -> dict[str, str]:
    """The blocks as written in the other languages, for a model writing a version of them in ``language``."""
    return {
        block.key: block.content
        for block in SelfLayerBlock.objects.filter(key__in=REFRESHED).exclude(language=language).exclude(content="")
    }


def _names_pattern() -> re.Pattern | None:
    """Every known person's name and slug, matched case-insensitively as a whole Latin word (anywhere in CJK)."""
    names = set()
    for display_name, slug in Person.objects.values_list("display_name", "slug"):
        names.update({display_name.strip().casefold(), slug.casefold(), slug.replace("-", " ").casefold()})
    names = sorted(
        (name for name in names if len(name) >= NAME_MIN_CHARS and any(ch.isalpha() for ch in name)),
        key=len,
        reverse=True,
    )
    if not names:
        return None
    return re.compile(r"(?<![a-z0-9])(?:" + "|".join(map(re.escape, names)) + r")(?![a-z0-9])")


def _without_day(text: str, *, day: date) -> str:
    """``text`` without the day's own date. The model is given it and may write it: it says when, not who or what, and
    a narrative that starts with it shares its eight digits, a whole run in Chinese, with every block naming the day.
    Any other date may be someone's (a birthday, an appointment) and stays."""

    def blank(match: re.Match) -> str:
        return " " if tuple(map(int, match.groups())) == (day.year, day.month, day.day) else match.group(0)

    return _DATE.sub(blank, text)


def _copies(text: str, source: str) -> bool:
    """True when ``text`` repeats ``source`` whole or a run of it (VERBATIM_CHARS; VERBATIM_CJK_CHARS in CJK)."""
    run = VERBATIM_CJK_CHARS if is_chinese(source) else VERBATIM_CHARS
    text, source = normalized(text), normalized(source)
    if len(source) <= run:
        return len(source) * 2 >= run and source in text
    return any(source[i : i + run] in text for i in range(len(source) - run + 1))


def _personal(text: str, *, names: re.Pattern | None, sources: list[str], day: date) -> bool:
    """The self layer is read by everyone: a block naming a person or copying their day is someone's, not the self's.

    ``sources`` are the day's facts and narratives, already without the day's date (``_without_day``).
    """
    if names is not None and names.search(text.casefold()):
        return True
    text = _without_day(text, day=day)
    return any(_copies(text, source) for source in sources)


def self_layer_refresh(ctx: StepContext) -> dict:
    """Revise the self layer in each language in use (the companion's first): one model call per language."""
    facts = list(
        SemanticMemory.objects.filter(
            source_day=ctx.day, status=MemoryStatus.ACTIVE, external_id__startswith=LIGHT_SLEEP_ID_PREFIX
        )
    )
    anchors = list(LimbicBlock.anchors.filter(source_day=ctx.day))
    narratives = list(NarrativeBlock.objects.filter(source_day=ctx.day))
    since = day_start(ctx.day + timedelta(days=1)) - LANGUAGE_WINDOW
    languages = languages_in_use(since=since)
    for language in languages:
        _blocks(language=language)
    if not (facts or anchors or narratives):
        return {"skipped_reason": "nothing_new"}
    names = _names_pattern()
    sources = [f.content for f in facts] + [text for n in narratives for text in (n.title, n.content)]
    sources = [_without_day(source, day=ctx.day) for source in sources]
    today = {
        "facts": [f.content for f in facts],
        # Feelings as valence and intensity only: an anchor's text says who it was about.
        "anchors": [{k: (a.body or {}).get(k) for k in ("valence", "intensity")} for a in anchors],
        "narratives": [n.content for n in narratives],
    }
    report: dict[str, list[str]] = {"changed": [], "refused_locked": [], "refused_personal": []}
    failures: list[dict] = []
    for language in languages:
        # A language the model could not answer for keeps its blocks as they were; the others are revised.
        outcome = answer_or_failure(
            lambda language=language: _refresh_language(
                ctx, language=language, today=today, names=names, sources=sources
            ),
            failures=failures,
            language=language,
        )
        for key, blocks in (outcome or {}).items():
            # With several languages a block is named with its language ("self_model:zh").
            report[key].extend(f"{block}:{language}" if len(languages) > 1 else block for block in blocks)
    output = {"languages": languages, **report} if len(languages) > 1 else report
    return {**output, FAILURES: failures} if failures else output


def _refresh_language(
    ctx: StepContext, *, language: str, today: dict, names: re.Pattern | None, sources: list[str]
) -> dict[str, list[str]]:
    blocks = _blocks(language=language)
    answer = llm_json(
        purpose="self-layer",
        instructions=SELF_LAYER_INSTRUCTIONS,
        payload={
            "day": ctx.day.isoformat(),
            "language": language,
            "force": ctx.force,
            "blocks": {key: block.content for key, block in blocks.items()},
            "other_language": _other_language(language=language),
            "today": today,
        },
        schema=SELF_LAYER_SCHEMA,
        # Up to five blocks of a few hundred characters each.
        max_tokens=2000,
        run_key=ctx.run_key,
        token_budget=ctx.token_budget,
    )
    changed, refused, personal = [], [], []
    with transaction.atomic():
        for key, text in answer.items():
            block = blocks[key]
            # A locked block is written once per language (a version of the others'), then changes only with force.
            if block.locked and block.content.strip() and not ctx.force:
                refused.append(key)
                continue
            if _personal(text, names=names, sources=sources, day=ctx.day):
                # Even with force: no operator switch makes one person's day readable by everyone.
                logger.warning("self layer: the new %s names a person or copies the day's material; kept the old", key)
                personal.append(key)
                continue
            if block.content != text.strip():
                block.content = text.strip()
                block.save(update_fields=["content", "updated_at"])
                changed.append(key)
    return {"changed": changed, "refused_locked": refused, "refused_personal": personal}
