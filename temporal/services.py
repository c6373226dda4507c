"""Writes of the global day / month / year summaries, overwritten per period."""

from __future__ import annotations

import re
from datetime import date

from django.db import transaction

from anima.core.config import config_get
from anima.core.llm import llm_json
from anima.core.llm.schema import schema_object, schema_string
from anima.core.text import clip
from temporal.models import TemporalSummary, Window
from temporal.selectors import day_conversations, temporal_summaries, temporal_summary_get

_PREAMBLE = re.compile(
    r"^\s*(?:(?:好的|好|收到|明白了?|当然|没问题|以下是[^：:\n]{0,20}|"
    r"sure|ok(?:ay)?|certainly|of course|got it|here(?:'s| is) (?:the |a |your )?[a-z ]{0,30})"
    r"\s*[,，。.!！:：…]+\s*)+",
    re.IGNORECASE,
)


def summary_clean(text: str, *, max_chars: int) -> str:
    """Strip acknowledgement preambles (and NUL, which JSONB refuses) and hard-cut to the cap."""
    return clip(_PREAMBLE.sub("", text.replace("\x00", "").strip(), count=1), max_chars)


_RULES = (
    "Write an objective digest: the themes and outcomes of what happened, covering every conversation without "
    "judging what is worth remembering. Omit internal ids, step-by-step tool or configuration actions and "
    "timestamps unless essential. Write in the dominant language of the material, at most `max_chars` "
    'characters. Answer JSON: {"summary": str}.'
)
DAY_INSTRUCTIONS = f"Summarise one day of conversations (each with its title, channel and dialogue). {_RULES}"
MONTH_INSTRUCTIONS = f"Summarise one month from its day summaries. {_RULES}"
YEAR_INSTRUCTIONS = f"Summarise one year from its month summaries. {_RULES}"
SUMMARY_SCHEMA = schema_object({"summary": schema_string(max_length=20000)}, required=["summary"])


def temporal_summary_upsert(*, window: Window, period_start: date, content: str) -> TemporalSummary:
    """Overwrite the (window, period_start) summary, creating it on first write."""
    with transaction.atomic():
        row = temporal_summary_get(window=window, period_start=period_start)
        if row is None:
            row = TemporalSummary(body={"window": str(window), "period_start": period_start.isoformat()})
        row.source_day = period_start
        row.title = f"{window} {period_start.isoformat()}"
        row.content = content
        row.save()
    return row


def _write(
    *, window: Window, period_start: date, instructions: str, material: dict, cap: int, run_key: str, token_budget
) -> dict:
    answer = llm_json(
        purpose=f"temporal.{window}",
        instructions=instructions,
        payload={"window": str(window), "period_start": period_start.isoformat(), "max_chars": cap, **material},
        schema=SUMMARY_SCHEMA,
        run_key=run_key,
        token_budget=token_budget,
    )
    # The model was told the cap; an answer over it is hard-cut.
    summary = summary_clean(answer["summary"], max_chars=cap)
    if not summary:
        return {"window": str(window), "period_start": period_start.isoformat(), "skipped_reason": "empty_summary"}
    row = temporal_summary_upsert(window=window, period_start=period_start, content=summary)
    return {
        "window": str(window),
        "period_start": period_start.isoformat(),
        "summary_id": row.pk,
        "chars": len(summary),
    }


def temporal_summary_write_day(*, day: date, run_key: str = "", token_budget: int | None = None) -> dict:
    """The global summary of one local day, from its user-facing conversations (cron excluded)."""
    config = config_get(section="memory.temporal_summary")
    if not config["enabled"]:
        return {"skipped_reason": "disabled"}
    dialogue_cap = config_get(section="sleep")["dialogue_max_chars"]
    conversations = day_conversations(day=day, max_chars=dialogue_cap)
    if not conversations:
        return {"window": "day", "period_start": day.isoformat(), "skipped_reason": "no_conversations"}
    material = {"conversations": [{**item.meta(), "dialogue": item.dialogue()} for item in conversations]}
    return _write(
        window=Window.DAY,
        period_start=day,
        instructions=DAY_INSTRUCTIONS,
        material=material,
        cap=config["day_chars"],
        run_key=run_key,
        token_budget=token_budget,
    )


def _rollup(
    *, window: Window, part: Window, start: date, end: date, instructions: str, cap_key: str, run_key, token_budget
) -> dict:
    config = config_get(section="memory.temporal_summary")
    if not config["enabled"]:
        return {"skipped_reason": "disabled"}
    parts = [
        {"period_start": s.source_day.isoformat(), "summary": s.content}
        for s in temporal_summaries(window=part, start=start, end=end)
    ]
    if not parts:
        return {"window": str(window), "period_start": start.isoformat(), "skipped_reason": f"no_{part}_summaries"}
    return _write(
        window=window,
        period_start=start,
        instructions=instructions,
        material={"parts": parts},
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
