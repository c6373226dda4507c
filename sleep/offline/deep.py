"""Offline answers of deep sleep's four rounds: contradiction / expiry, split, merge, pin review."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from itertools import combinations

from anima.core.llm.offline import offline_handler
from anima.core.segmentation import text_ruled
from anima.core.text import normalized, sentences
from sleep.offline._shared import bigrams

_ZH_CHANGE_MARKERS = re.compile(r"现在(?:更)?喜欢|现在改|改用|不再|换成")
_EN_CHANGE_MARKERS = re.compile(r"\bnow prefers?\b|\bno longer\b|\bswitched to\b|\bthese days\b|\bused to\b", re.I)
_LIKED_OBJECT = re.compile(r"(?:喜欢|爱|prefers?|likes?|loves?)\s*([A-Za-z][\w.+#-]*|[\u4e00-\u9fff]{2,})", re.I)
# Exclusive attributes: one subject has exactly one value at a time.
_ATTRIBUTES: tuple[tuple[str, re.Pattern], ...] = (
    ("zodiac", re.compile(r"(?P<subject>[^，。；,;]*?)属(?P<value>[鼠牛虎兔龙蛇马羊猴鸡狗猪])")),
    ("email", re.compile(r"(?P<subject>[^，。；,;]*?)(?:的)?邮箱是\s*(?P<value>\S+@\S+)")),
    ("birthday", re.compile(r"(?P<subject>[^，。；,;]*?)(?:的)?生日是\s*(?P<value>[^，。；,;]+)")),
    ("email", re.compile(r"(?P<subject>[^,.;]*?)'s email(?: address)? is (?P<value>\S+@\S+)", re.I)),
    ("birthday", re.compile(r"(?P<subject>[^,.;]*?)'s birthday is (?P<value>[^,.;]+)", re.I)),
    ("zodiac", re.compile(r"(?P<subject>[^,.;]*?) was born in the year of the (?P<value>\w+)", re.I)),
)


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _subject(text: str, person: str | None) -> str:
    text = text.casefold()
    if person:
        text = text.replace(person.casefold(), "")
    return normalized(re.sub(r"的|我|今年", "", text))


def _attributes(memory: dict) -> dict[tuple[str, str], str]:
    found = {}
    for attribute, pattern in _ATTRIBUTES:
        for match in pattern.finditer(text_ruled(memory["content"])):
            found[(attribute, _subject(match.group("subject"), memory["person"]))] = normalized(match.group("value"))
    return found


def _same_subject(a: str, b: str) -> bool:
    return a == b or (bool(a) and bool(b) and (a in b or b in a))


def _chronological(memories: list[dict]) -> list[dict]:
    return sorted(memories, key=lambda m: (m.get("observed_at") or "", m["id"]))


def _verdict(older: dict, newer: dict) -> dict | None:
    if older["person"] != newer["person"]:
        return None
    # Read as the markers are written: 現在更喜歡 is 现在更喜欢, "doesn’t" is "doesn't".
    older_text, newer_text = text_ruled(older["content"]), text_ruled(newer["content"])
    changed = _ZH_CHANGE_MARKERS.search(newer_text) or _EN_CHANGE_MARKERS.search(newer_text)
    liked = _LIKED_OBJECT.search(older_text)
    if changed and liked and liked.group(1).casefold() in newer_text.casefold():
        return {"id": older["id"], "superseded_by": newer["id"], "kind": "change", "reason": "preference changed"}
    old_attrs, new_attrs = _attributes(older), _attributes(newer)
    for (attribute, subject), value in old_attrs.items():
        for (other_attribute, other_subject), other_value in new_attrs.items():
            if attribute == other_attribute and _same_subject(subject, other_subject) and value != other_value:
                return {
                    "id": older["id"],
                    "superseded_by": newer["id"],
                    "kind": "contradiction",
                    "reason": f"{attribute}: {value} vs {other_value}; the newer statement stands",
                }
    return None


@offline_handler("deep-sleep.contradiction")
def contradiction_answer(payload: dict) -> dict:
    expire, retired = [], set()
    for older, newer in combinations(_chronological(_lines(payload["group"])), 2):
        if older["id"] in retired or newer["id"] in retired:
            continue
        verdict = _verdict(older, newer)
        if verdict:
            retired.add(older["id"])
            expire.append(verdict)
    return {"expire": expire}


# A Chinese pronoun runs on into the next word (「她今年八岁」: no word boundary after it), an English one does not.
_PRONOUN_START = re.compile(r"^(?:他|她|它|这|那|(?:he|she|it|they|this|that)\b)", re.I)
SPLIT_PART_MIN_CHARS = 10


@offline_handler("deep-sleep.split")
def split_answer(payload: dict) -> dict:
    wanted = set(payload["candidate_ids"])
    splits = []
    for memory in _lines(payload["memories"]):
        if memory["id"] not in wanted or memory["type"] in {"procedural", "imprint"}:
            continue
        parts = sentences(memory["content"])
        parts = [p for p in parts if len(normalized(p)) >= SPLIT_PART_MIN_CHARS]
        # A part that leans on the previous one ("She …") is not self-contained: leave the memory whole.
        if len(parts) >= 2 and not any(_PRONOUN_START.match(text_ruled(p)) for p in parts[1:]):
            splits.append({"id": memory["id"], "parts": [{"memory_type": memory["type"], "content": p} for p in parts]})
    return {"splits": splits}


CANDIDATE_DICE = 0.6


def _dice(ga: frozenset[str], gb: frozenset[str]) -> float:
    return 2 * len(ga & gb) / (len(ga) + len(gb)) if ga and gb else 0.0


# A shorter text whose character bigrams nearly all occur in a longer one says nothing the longer does not
# («Leo 是一名软件工程师» inside «Leo 在杭州工作，是一名后端软件工程师»), unless a number or a negation differs.
CONTAINED_SHARE = 0.8
CONTAINED_MIN_BIGRAMS = 6
_NUMBERS = re.compile(r"\d+|[零一二两三四五六七八九十百]+(?=岁|个|只|年|月|号|日)")
_NEGATIONS = re.compile(r"不|没|别|\bnot\b|n't\b|\bnever\b|\bno longer\b", re.I)


@dataclass(frozen=True)
class _Text:
    """What the duplicate tests read of a memory's text, worked out once per memory rather than once per pair."""

    normalized: str
    grams: frozenset[str]
    # «ran 7 km» and «ran 17 km», «likes» and «doesn't like» overlap in text but are different facts.
    marks: tuple[frozenset[str], int]

    @classmethod
    def of(cls, text: str) -> _Text:
        text = text_ruled(text)  # 沒 is a negation as 没 is, 兩 a number as 两 is, and "doesn’t" as "doesn't"
        marks = (frozenset(_NUMBERS.findall(text)), len(_NEGATIONS.findall(text)))
        return cls(normalized=normalized(text), grams=frozenset(bigrams(text)), marks=marks)


def _contained(ga: frozenset[str], gb: frozenset[str]) -> bool:
    short_grams, long_grams = sorted((ga, gb), key=len)
    return len(short_grams) >= CONTAINED_MIN_BIGRAMS and len(short_grams & long_grams) >= CONTAINED_SHARE * len(
        short_grams
    )


def _near_duplicates(a: _Text, b: _Text) -> bool:
    """High character-bigram overlap (Dice ≥ 0.8), or one text (nearly) contained in the other, with the same
    numbers and negations."""
    if a.marks != b.marks:
        return False
    short, long = sorted((a.normalized, b.normalized), key=len)
    if len(short) >= 8 and short in long:
        return True
    return _dice(a.grams, b.grams) >= 0.8 or _contained(a.grams, b.grams)


@offline_handler("deep-sleep.merge")
def merge_answer(payload: dict) -> dict:
    memories = _lines(payload["memories"])
    texts = {m["id"]: _Text.of(m["content"]) for m in memories}
    merged_into: dict[int, list[dict]] = {}
    owner: dict[int, int] = {}
    for a, b in combinations(memories, 2):
        if a["person"] != b["person"] or not _near_duplicates(texts[a["id"]], texts[b["id"]]):
            continue
        root = owner.get(a["id"], a["id"])
        if b["id"] in owner:
            continue
        group = merged_into.setdefault(root, [a])
        owner[a["id"]] = root
        group.append(b)
        owner[b["id"]] = root
    by_id = {m["id"]: m for m in memories}
    for ids in payload.get("candidates", []):
        # Close embeddings alone do not make a duplicate (a small model puts unrelated facts of one person
        # close together): the texts must also overlap, more loosely than _near_duplicates asks.
        group = [by_id[i] for i in ids if i in by_id and i not in owner]
        first = texts[group[0]["id"]] if group else None
        group = [
            m
            for m in group
            if m is group[0]
            or (_dice(texts[m["id"]].grams, first.grams) >= CANDIDATE_DICE and texts[m["id"]].marks == first.marks)
        ]
        if len(group) >= 2:
            merged_into[group[0]["id"]] = group
            owner.update({m["id"]: group[0]["id"] for m in group})
    merges = []
    for group in merged_into.values():
        richest = max(group, key=lambda m: (len(m["content"]), -m["id"]))
        merges.append({"ids": [m["id"] for m in group], "memory_type": richest["type"], "content": richest["content"]})
    return {"merges": merges}


@offline_handler("deep-sleep.pins")
def pins_answer(payload: dict) -> dict:
    unpin = [
        {"id": m["id"], "reason": f"memory is {m['status']}"}
        for m in _lines(payload["pinned"])
        if m.get("status") != "active"
    ]
    return {"unpin": unpin, "pin": []}
