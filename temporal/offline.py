"""Offline (no-LLM) temporal digests — half-hour chunks, peer rollups, days, months, years: extractive,
capped, no internal ids."""

from __future__ import annotations

import re

from anima.core.llm.offline import offline_handler
from anima.core.text import clip, is_chinese, sentences, text_keywords
from temporal.rollup import summaries_concat

# Acknowledgements carry no theme ("好的", "Sure, …").
_PREAMBLE = re.compile(
    r"^(?:好的|好|收到|嗯|早上好|晚安|谢谢|哈哈|ok|okay|sure|thanks|hi|hello|good (?:morning|night))\b", re.I
)


def _user_sentences(dialogue: list[dict]) -> list[str]:
    found = []
    for turn in dialogue:
        if turn["role"] != "user":
            continue
        for sentence in sentences(turn["content"]):
            if len(sentence) >= (6 if is_chinese(sentence) else 15) and not _PREAMBLE.match(sentence):
                found.append(sentence)
    return found


def _short(text: str, limit: int) -> str:
    cut = clip(text, limit)
    return cut if cut == text.strip() else f"{cut}…"


def _best(sentences: list[str], keywords: list[str]) -> str:
    return max(sentences, key=lambda s: sum(k.casefold() in s.casefold() for k in keywords), default="")


def conversation_digest(conversation: dict) -> str:
    """One line: who, where, the theme (keywords + the most telling sentence) and how it ended."""
    sentences = _user_sentences(conversation["dialogue"])
    text = " ".join(sentences)
    keywords = text_keywords(text, count=4)
    theme_sentence = _best(sentences, keywords)
    # The outcome is the last sentence that still carries a theme word (not a closing "thanks").
    later = [s for s in sentences if s != theme_sentence and any(k.casefold() in s.casefold() for k in keywords)]
    limit = 70 if is_chinese(text) else 110
    theme = _short(theme_sentence, limit)
    outcome = _short(later[-1], limit) if later and sentences.index(later[-1]) > sentences.index(theme_sentence) else ""
    who = conversation.get("person") or ""
    title = conversation.get("title") or ""
    if is_chinese(text or title):
        line = f"{who}（{conversation['channel']}）「{title}」：{theme}"
        line += f" 结果：{outcome}" if outcome else ""
        return line + (f" 关键词：{'、'.join(keywords)}" if keywords else "")
    line = f"{who} ({conversation['channel']}) “{title}”: {theme}"
    line += f" Outcome: {outcome}" if outcome else ""
    return line + (f" Themes: {', '.join(keywords)}." if keywords else "")


@offline_handler("temporal.day")
def day_answer(payload: dict) -> dict:
    lines = [f"- {conversation_digest(c)}" for c in payload["conversations"] if c["dialogue"]]
    return {"summary": clip("\n".join(lines), payload["max_chars"])}


def _rollup(payload: dict, *, label_chars: int, part_chars: int) -> dict:
    lines = []
    for part in payload["parts"]:
        first = next((line.lstrip("- ").strip() for line in part["summary"].splitlines() if line.strip()), "")
        lines.append(f"- {part['period_start'][:label_chars]}: {clip(first, part_chars)}")
    return {"summary": clip("\n".join(lines), payload["max_chars"])}


@offline_handler("temporal.month")
def month_answer(payload: dict) -> dict:
    return _rollup(payload, label_chars=10, part_chars=150)


@offline_handler("temporal.year")
def year_answer(payload: dict) -> dict:
    return _rollup(payload, label_chars=7, part_chars=200)


@offline_handler("temporal.chunk")
def chunk_answer(payload: dict) -> dict:
    """The theme and outcome of the new messages, in their language (earlier chunks are context only)."""
    return {"summary": clip(conversation_digest(payload), payload["max_chars"])}


@offline_handler("temporal.peer-rollup")
def peer_rollup_answer(payload: dict) -> dict:
    return {"summary": summaries_concat(payload["summaries"], max_chars=payload["max_chars"])}
