"""Offline profile lines: each fact in its own words, with the subject it opens with taken off.

「Leo 的女儿小雨属虎」 about 小雨 → 「属虎」; "Maya is allergic to peanuts" about Maya → "is allergic to
peanuts". A fact that does not open with the subject ("Leo 打算带小雨去爬山" about 小雨) stays whole: what is
left after someone else's name would not be about the subject. Nothing is added to what the fact says. The front
is found in the fact's simplified reading (「Leo 的女兒小雨屬虎」 → 「屬虎」), and the line keeps the fact's characters.
"""

from __future__ import annotations

import re

from anima.core.llm.offline import offline_handler
from anima.core.segmentation import text_ruled_in_place, text_simplified

# What may stand between the person, the relation and the name at the front of a fact.
_POSSESSIVE = r"(?:\s*(?:'s|’s|的)\s*|\s+)"
_DETERMINER = r"(?:(?:my|his|her|their|our)\s+)?"
_GAP = r"\s*[，,：:]?\s*"
# Too little left to say anything: the fact is kept whole.
_MIN_CHARS = 2


def _alternatives(words: list[str]) -> str:
    """Any of ``words``, longest first; a Latin one only whole ("Ann" does not open "Anna")."""
    ordered = sorted({w for w in words if w}, key=len, reverse=True)
    return "|".join(re.escape(word) + ("(?![A-Za-z0-9])" if word.isascii() else "") for word in ordered)


def _line(content: str, *, person: str, names: list[str], kind: str) -> str:
    text = content.strip().rstrip("。.！!；;")
    person, names = text_simplified(person), [text_simplified(name) for name in names]
    if kind == "self":
        # 「Leo 的邮箱是 …」 → 「邮箱是 …」: the person's own things read as theirs without their name.
        pattern = rf"^(?:{_alternatives([person])})(?:\s*(?:'s|’s|的))?\s*"
    else:
        subject = _alternatives([name for name in names if name != person])
        if not subject:
            return text
        owner = rf"(?:(?:{_alternatives([person])}){_POSSESSIVE})?" if person else ""
        # and its own possessive: "Ana's dog's name is Biscuit" → "name is Biscuit", 「猫的名字叫咪咪」 → 「名字叫咪咪」
        pattern = rf"^{owner}{_DETERMINER}(?:(?:{subject})\s*,?\s*)+(?:'s\s+|’s\s+|的)?{_GAP}"
    found = re.match(pattern, text_ruled_in_place(text), re.I)
    rest = text[found.end() :].strip() if found else ""
    return rest if len(rest) >= _MIN_CHARS else text


@offline_handler("sleep.subject-profile")
def subject_profile(payload: dict) -> dict:
    subject = payload["subject"]
    person, names = payload.get("person", ""), subject.get("names", [])
    return {
        "lines": [
            {"fact": fact["id"], "text": _line(fact["content"], person=person, names=names, kind=subject.get("kind"))}
            for fact in payload["facts"]
        ]
    }
