"""Offline (no-LLM) temporal digests — half-hour chunks, peer rollups, days, months, years: extractive,
capped, no internal ids."""

from __future__ import annotations

import re

from anima.core.llm.offline import offline_handler
from anima.core.segmentation import text_in_script_of, text_simplified
from anima.core.text import (
    clip,
    is_chinese,
    sentences,
    text_keywords,
    third_person_en,
    third_person_zh,
    without_addresses,
)
from temporal.privacy import topic_of
from temporal.rollup import summaries_concat

# Acknowledgements carry no theme ("好的", "Sure, …"); read in simplified characters (謝謝 is 谢谢).
_PREAMBLE = re.compile(
    r"^(?:好的|好|收到|嗯|早上好|晚安|谢谢|哈哈|ok|okay|sure|thanks|hi|hello|good (?:morning|night))\b", re.I
)


def _user_sentences(dialogue: list[dict]) -> list[str]:
    found = []
    for turn in dialogue:
        if turn["role"] != "user":
            continue
        for sentence in sentences(turn["content"]):
            if len(sentence) >= (6 if is_chinese(sentence) else 15) and not _PREAMBLE.match(text_simplified(sentence)):
                found.append(sentence)
    return found


def _short(text: str, limit: int) -> str:
    cut = clip(text, limit)
    return cut if cut == text.strip() else f"{cut}…"


# A sentence that reports how something turned out.
_OUTCOME = re.compile(
    r"决定|定了|搞定|完成|通过|成功|结果|终于|已经|打算|准备|计划|约好|订了|买了|搬|换|辞|升职|"
    r"\b(?:decided|booked|bought|finished|passed|done|fixed|solved|moved|got|will|going to|plan|planning|agreed|"
    r"finally|signed|quit|started|switched)\b",
    re.I,
)


# How many outcomes a conversation's line reports (the last ones), or sentences when nothing came out.
OUTCOMES = 2


def _mentioned(told: str, name: str) -> str:
    """「Leo 提到……」 unless the sentence already names the person first."""
    return f"{told}。" if told.startswith(name) else f"{name} 提到{told}。"


def conversation_theme(conversation: dict) -> str:
    """Themes and how it turned out, in the conversation's language, told about the person (no raw quotes).

    Chinese is read in simplified characters, as the keyword and grammar rules are written, and told in the
    characters the person wrote in (the name as written)."""
    said = [s for s in _user_sentences(conversation["dialogue"]) if not s.rstrip().endswith(("?", "？"))]
    chinese = is_chinese(without_addresses(" ".join(said)) or conversation.get("title") or "")
    if chinese:
        written = conversation.get("person") or ""
        theme = _theme([text_simplified(s) for s in said], name=text_simplified(written) or "对方", chinese=True)
        return text_in_script_of(theme, like=" ".join(said), name=written)
    return _theme(said, name=conversation.get("person") or "They", chinese=False)


def _theme(sentences: list[str], *, name: str, chinese: bool) -> str:
    text = without_addresses(" ".join(sentences))
    keywords = [k for k in text_keywords(text, count=5) if k.casefold() != name.casefold()][:4]
    telling = [s for s in sentences if any(k.casefold() in s.casefold() for k in keywords)] or sentences
    outcomes = [s for s in telling if _OUTCOME.search(s)]
    limit = 70 if chinese else 110
    third_person = third_person_zh if chinese else third_person_en
    end = "。！!" if chinese else ".!"

    def told(said: list[str]) -> list[str]:
        # A sentence that says nothing told about the person ("My name is Sam") is left out.
        return [t for t in (_short(third_person(s, name), limit).rstrip(end) for s in said) if t]

    outcome_lines = told(outcomes)
    if chinese:
        line = f"聊了{'、'.join(keywords)}。" if keywords else ""
        if outcome_lines:
            return line + f"结果：{'；'.join(outcome_lines[-OUTCOMES:])}。"
        # No outcome: what was said, told about the person (the first sentences that carry a theme).
        return line + "".join(_mentioned(t, name) for t in told(telling)[:OUTCOMES])
    line = f"Talked about {', '.join(keywords)}." if keywords else ""
    if outcome_lines:
        return (line + f" Outcome: {'; '.join(outcome_lines[-OUTCOMES:])}.").strip()
    return " ".join([line, *(f"{t}." for t in told(telling)[:OUTCOMES])]).strip()


def conversation_digest(conversation: dict) -> str:
    """One line: who, where, then the theme and outcome."""
    who = conversation.get("person") or ""
    title = conversation.get("title") or ""
    theme = conversation_theme(conversation)
    if is_chinese(theme or title):
        return f"{who}（{conversation['channel']}）「{title}」：{theme}"
    return f"{who} ({conversation['channel']}) “{title}”: {theme}"


def _dialogue_topic(conversation: dict) -> str:
    return topic_of(" ".join(_user_sentences(conversation["dialogue"])))


def _parts_text(conversation: dict, *, label_chars: int, part_chars: int) -> str:
    lines = []
    for part in conversation["parts"]:
        first = next((line.lstrip("- ").strip() for line in part["summary"].splitlines() if line.strip()), "")
        lines.append(f"- {part['period_start'][:label_chars]}: {clip(first, part_chars)}")
    return "\n".join(lines)


def _sections(payload: dict, *, summary, topic) -> dict:
    return {
        "sections": [
            {"conversation": c["conversation"], "topic": topic(c), "summary": clip(summary(c), payload["max_chars"])}
            for c in payload["conversations"]
        ]
    }


@offline_handler("temporal.day")
def day_answer(payload: dict) -> dict:
    return _sections(payload, summary=conversation_theme, topic=_dialogue_topic)


def _rollup(payload: dict, *, label_chars: int, part_chars: int) -> dict:
    return _sections(
        payload,
        summary=lambda c: _parts_text(c, label_chars=label_chars, part_chars=part_chars),
        topic=lambda c: topic_of(" ".join(part["summary"] for part in c["parts"])),
    )


@offline_handler("temporal.month")
def month_answer(payload: dict) -> dict:
    return _rollup(payload, label_chars=10, part_chars=150)


@offline_handler("temporal.year")
def year_answer(payload: dict) -> dict:
    return _rollup(payload, label_chars=7, part_chars=200)


@offline_handler("temporal.chunk")
def chunk_answer(payload: dict) -> dict:
    """The theme and outcome of the new messages, in their language (earlier chunks are context only)."""
    return {"summary": clip(conversation_digest(payload), payload["max_chars"]), "topic": _dialogue_topic(payload)}


@offline_handler("temporal.peer-rollup")
def peer_rollup_answer(payload: dict) -> dict:
    return {"summary": summaries_concat(payload["summaries"], max_chars=payload["max_chars"])}
