"""Writes of the day / month / year summaries, overwritten per period, a section per conversation.

Each section keeps its conversation's full text and a validated topic line (``temporal.privacy``),
so a prompt can show a person their own sections and everyone else's topics.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date

from django.db import transaction

from anima.core.config import config_get
from anima.core.llm import llm_json
from anima.core.llm.schema import schema_array, schema_integer, schema_object, schema_string
from anima.core.segmentation import text_ruled_in_place
from anima.core.text import clip
from conversations.models import Person
from temporal.models import TemporalSummary, Window
from temporal.privacy import FULL, TOPIC_RULE, sections_render, summary_sections, topic_line
from temporal.selectors import (
    day_conversations,
    person_label,
    persons_named,
    temporal_summaries,
    temporal_summary_get,
)

_PREAMBLE = re.compile(
    r"^\s*(?:(?:好的|好|收到|明白了?|当然|没问题|以下是[^：:\n]{0,20}|"
    r"sure|ok(?:ay)?|certainly|of course|got it|here(?:'s| is) (?:the |a |your )?[a-z ]{0,30})"
    r"\s*[,，。.!！:：…]+\s*)+",
    re.IGNORECASE,
)


def summary_clean(text: str, *, max_chars: int) -> str:
    """Strip acknowledgement preambles (and NUL, which JSONB refuses) and hard-cut to the cap.

    A preamble is found as the rules read the text (「當然，以下是…」, "Here’s …" too) and cut where it ends."""
    text = text.replace("\x00", "").strip()
    preamble = _PREAMBLE.match(text_ruled_in_place(text))
    return clip(text[preamble.end() :] if preamble else text, max_chars)


_SECTION_RULES = (
    "Answer one section per conversation, by its index `conversation`. `summary`: an objective digest of its "
    "themes and outcomes, covering it without judging what is worth remembering; omit internal ids, step-by-step "
    "tool or configuration actions and timestamps unless essential; in the dominant language of its material, at "
    f"most `max_chars` characters. `topic`: {TOPIC_RULE}. "
    'Answer JSON: {"sections": [{"conversation": int, "topic": str, "summary": str}]}.'
)
DAY_INSTRUCTIONS = (
    f"Summarise one day, conversation by conversation (each with its title, channel, person and dialogue). "
    f"{_SECTION_RULES}"
)
MONTH_INSTRUCTIONS = (
    f"Summarise one month, conversation by conversation, from each one's day summaries (`parts`). {_SECTION_RULES}"
)
YEAR_INSTRUCTIONS = (
    f"Summarise one year, conversation by conversation, from each one's month summaries (`parts`). {_SECTION_RULES}"
)
SUMMARY_SCHEMA = schema_object({"summary": schema_string(max_length=20000)}, required=["summary"])


def sections_schema(count: int) -> dict:
    """The answer of a window over ``count`` conversations: at most one section each."""
    return schema_object(
        {
            "sections": schema_array(
                schema_object(
                    {
                        "conversation": schema_integer(minimum=0),
                        "topic": schema_string(max_length=2000),
                        "summary": schema_string(max_length=20000),
                    },
                    required=["conversation", "topic", "summary"],
                ),
                max_items=count,
            )
        },
        required=["sections"],
    )


def chars_budget(max_chars: int) -> int:
    """The answer budget of a text of at most ``max_chars``: a token a character (CJK) plus its topic and keys."""
    return max_chars + 200


# A section's share of the window's cap never drops below this.
MIN_SECTION_CHARS = 100


@dataclass
class SectionSource:
    """One conversation's material for a section, and what the section records about its owner."""

    conversation_id: int | None
    person_id: int | None
    who: str
    channel: str
    title: str
    material: dict = field(default_factory=dict)
    # The text whose themes make the topic line when the model names none.
    source: str = ""

    def meta(self) -> dict:
        return {
            "conversation_id": self.conversation_id,
            "person_id": self.person_id,
            "who": self.who,
            "channel": self.channel,
            "title": self.title,
        }


def section_refusal(text: str, *, source: SectionSource, persons: list[Person]) -> str:
    """Why a section may not be stored: it names someone who is neither its conversation's person nor named in
    the conversation itself (a model mixing two conversations' people in one section)."""
    strangers = [
        person
        for person in persons_named(text, persons=persons)
        if person.pk != source.person_id and not persons_named(f"{source.title}\n{source.source}", persons=[person])
    ]
    if not strangers:
        return ""
    return "names " + ", ".join(person_label(p) for p in strangers) + ", who is not in this conversation"


def temporal_summary_upsert(*, window: Window, period_start: date, sections: list[dict]) -> TemporalSummary:
    """Overwrite the (window, period_start) summary with ``sections``, creating it on first write.

    ``content`` is every section in full, as the console shows it.
    """
    with transaction.atomic():
        row = temporal_summary_get(window=window, period_start=period_start)
        if row is None:
            row = TemporalSummary()
        row.body = {"window": str(window), "period_start": period_start.isoformat(), "sections": sections}
        row.source_day = period_start
        row.title = f"{window} {period_start.isoformat()}"
        # Every section whole (the console's view): no topic line is rendered, so no language is needed.
        whole = sections_render(sections, viewer_ids=None, mode=FULL, chinese=False)
        row.content = "\n".join(f"- {line}" for line in whole)
        row.save()
    return row


def _write(
    *,
    window: Window,
    period_start: date,
    instructions: str,
    sources: list[SectionSource],
    cap: int,
    run_key: str,
    token_budget,
) -> dict:
    section_cap = max(MIN_SECTION_CHARS, cap // len(sources))
    material = [{"conversation": index, **source.material} for index, source in enumerate(sources)]
    answer = llm_json(
        purpose=f"temporal.{window}",
        instructions=instructions,
        payload={
            "window": str(window),
            "period_start": period_start.isoformat(),
            "max_chars": section_cap,
            "conversations": material,
        },
        schema=sections_schema(len(sources)),
        max_tokens=len(sources) * chars_budget(section_cap),
        run_key=run_key,
        token_budget=token_budget,
    )
    answered: dict[int, dict] = {}
    for item in answer["sections"]:
        answered.setdefault(item["conversation"], item)
    # A re-run (late messages, --force) whose answer leaves a conversation out keeps its earlier section.
    stored = temporal_summary_get(window=window, period_start=period_start)
    earlier = {s.get("conversation_id"): s for s in (stored.body.get("sections") or [] if stored else [])}
    sections, written, kept, refused = [], 0, 0, []
    persons = list(Person.objects.all())
    for index, source in enumerate(sources):
        item = answered.get(index)
        # The model was told the cap; an answer over it is hard-cut. A topic line is validated whoever wrote it.
        text = summary_clean(item["summary"], max_chars=section_cap) if item else ""
        if text and (reason := section_refusal(text, source=source, persons=persons)):
            refused.append({"conversation_id": source.conversation_id, "reason": reason})
            text = ""
        if text:
            sections.append({**source.meta(), "topic": topic_line(item["topic"], source=source.source), "text": text})
            written += 1
        elif source.conversation_id is not None and source.conversation_id in earlier:
            sections.append(earlier[source.conversation_id])
            kept += 1
    outcome = {"window": str(window), "period_start": period_start.isoformat()}
    if refused:
        outcome["refused"] = refused
    if not written:
        return {**outcome, "skipped_reason": "empty_summary"}
    row = temporal_summary_upsert(window=window, period_start=period_start, sections=sections)
    return {
        **outcome,
        "summary_id": row.pk,
        "sections": written,
        "kept": kept,
        "unanswered": len(sources) - written,
        "chars": len(row.content),
    }


def temporal_summary_write_day(*, day: date, run_key: str = "", token_budget: int | None = None) -> dict:
    """The day summary of one local day, a section per user-facing conversation (cron excluded)."""
    config = config_get(section="memory.temporal_summary")
    if not config["enabled"]:
        return {"skipped_reason": "disabled"}
    dialogue_cap = config_get(section="sleep")["dialogue_max_chars"]
    conversations = day_conversations(day=day, max_chars=dialogue_cap)
    if not conversations:
        return {"window": "day", "period_start": day.isoformat(), "skipped_reason": "no_conversations"}
    sources = []
    for item in conversations:
        owner = item.person
        dialogue = item.dialogue()
        sources.append(
            SectionSource(
                conversation_id=item.conversation.pk,
                person_id=owner.pk if owner else None,
                who=person_label(owner),
                channel=item.conversation.channel_name,
                title=item.conversation.title,
                material={**item.meta(), "dialogue": dialogue},
                source="\n".join(turn["content"] for turn in dialogue),
            )
        )
    return _write(
        window=Window.DAY,
        period_start=day,
        instructions=DAY_INSTRUCTIONS,
        sources=sources,
        cap=config["day_chars"],
        run_key=run_key,
        token_budget=token_budget,
    )


def _rollup(
    *, window: Window, part: Window, start: date, end: date, instructions: str, cap_key: str, run_key, token_budget
) -> dict:
    """A month or year from its parts' sections, again a section per conversation."""
    config = config_get(section="memory.temporal_summary")
    if not config["enabled"]:
        return {"skipped_reason": "disabled"}
    sources: dict[int | None, SectionSource] = {}
    for row in temporal_summaries(window=part, start=start, end=end):
        for section in summary_sections(body=row.body, content=row.content):
            source = sources.setdefault(
                section.get("conversation_id"),
                SectionSource(
                    conversation_id=section.get("conversation_id"),
                    person_id=section.get("person_id"),
                    who=section.get("who", ""),
                    channel=section.get("channel", ""),
                    title=section.get("title", ""),
                    material={"parts": []},
                ),
            )
            source.material["parts"].append({"period_start": row.source_day.isoformat(), "summary": section["text"]})
            source.source = f"{source.source}\n{section['text']}".strip()
    if not sources:
        return {"window": str(window), "period_start": start.isoformat(), "skipped_reason": f"no_{part}_summaries"}
    for source in sources.values():
        source.material.update(title=source.title, channel=source.channel, person=source.who)
    return _write(
        window=window,
        period_start=start,
        instructions=instructions,
        sources=list(sources.values()),
        cap=config[cap_key],
        run_key=run_key,
        token_budget=token_budget,
    )


def temporal_summary_write_month(*, day: date, run_key: str = "", token_budget: int | None = None) -> dict:
    """The month containing ``day``, from its day summaries."""
    start = day.replace(day=1)
    end = date(start.year + start.month // 12, start.month % 12 + 1, 1)
    return _rollup(
        window=Window.MONTH,
        part=Window.DAY,
        start=start,
        end=end,
        instructions=MONTH_INSTRUCTIONS,
        cap_key="month_chars",
        run_key=run_key,
        token_budget=token_budget,
    )


def temporal_summary_write_year(*, day: date, run_key: str = "", token_budget: int | None = None) -> dict:
    """The year containing ``day``, from its month summaries."""
    start = date(day.year, 1, 1)
    return _rollup(
        window=Window.YEAR,
        part=Window.MONTH,
        start=start,
        end=date(day.year + 1, 1, 1),
        instructions=YEAR_INSTRUCTIONS,
        cap_key="year_chars",
        run_key=run_key,
        token_budget=token_budget,
    )
