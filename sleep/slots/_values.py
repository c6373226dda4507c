"""Numbers and values as the slot grammar compares them: counts in words, values without their tails."""

from __future__ import annotations

import re

# ---------------------------------------------------------------- numbers and values

_CN_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}


_EN_UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen"
).split()
_EN_TENS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
# A number spelled in English words, 0-99: "seven", "twenty-one", "forty two".
EN_NUMBER_WORDS = rf"(?:(?:{'|'.join(_EN_TENS)})(?:[- ](?:{'|'.join(_EN_UNITS[1:10])}))?|{'|'.join(_EN_UNITS)})"
# How many of a thing someone has ("a", "seven", "12"), and the verbs that say they have it.
EN_COUNT = rf"(?:an?|{EN_NUMBER_WORDS}|\d+)"
EN_HAVE = r"(?:have|has|'ve got|have got|has got|own|owns)"
# A pet or relative newly had: "just adopted a puppy called Max", "we got a cat named Luna".
# "Have got" is having ("I've got two cats"), and "got" alone, getting.
EN_ACQUIRED = (
    r"(?:(?:just|finally|recently)\s+)?(?:got|adopted|rescued|"
    r"(?:have|'ve|has|'s)\s+(?:(?:just|finally|recently)\s+)?(?:gotten|adopted|rescued))"
)


def _en_number(text: str) -> int | None:
    words = re.split(r"[- ]", text.casefold())
    if len(words) == 1 and words[0] in _EN_UNITS:
        return _EN_UNITS.index(words[0])
    if words[0] in _EN_TENS and (len(words) == 1 or (len(words) == 2 and words[1] in _EN_UNITS[1:10])):
        return _EN_TENS[words[0]] + (_EN_UNITS.index(words[1]) if len(words) == 2 else 0)
    return None


def number_value(text: str) -> str:
    """ "8", "八", "二十八", "６", "eight", "twenty-eight" → "8" / "28" / "6" / "8" / "28"; other text unchanged.

    One spelling for a number whatever the language it was said in: "two cats" and later "2 cats" restate.
    """
    text = text.strip()
    if text.isdigit():
        return str(int(text))
    if (spelled := _en_number(text)) is not None:
        return str(spelled)
    if text and all(ch in _CN_DIGITS or ch in "十百" for ch in text):
        total, current = 0, 0
        for ch in text:
            if ch == "百":
                total += (current or 1) * 100
                current = 0
            elif ch == "十":
                total += (current or 1) * 10
                current = 0
            else:
                current = _CN_DIGITS[ch]
        return str(total + current)
    return text


_EN_ARTICLES = re.compile(r"^(?:a|an|the|some|my|our|his|her|their)\s+", re.I)
_EN_VALUE_TAIL = re.compile(
    r"\s+(?:now|anymore|any more|these days|nowadays|lately|too|as well|though|again|already|actually|instead|"
    r"last \w+|this \w+|next \w+|since .*|for (?:work|years|ages|a while|now|\w+ (?:years|months|weeks)).*|"
    r"\d+ (?:years|months|weeks|days) ago.*|ago|yesterday|today|every .*|each .*|because .*|when .*|"
    r"lol|haha|honestly|btw|at all|really|so much|a lot)$",
    re.I,
)
_ZH_VALUE_TAIL = re.compile(r"(?:了|啦|呢|吧|啊|呀|的|哦|喔|嘛)+$")


def value_normalized(text: str) -> str:
    previous = None
    while previous != text:
        previous = text
        text = text.strip().strip("。.!！?？,，;；:：\"'“”‘’《》「」()（）").strip()
        text = _EN_VALUE_TAIL.sub("", text).strip()
        text = _ZH_VALUE_TAIL.sub("", text).strip()
    text = _EN_ARTICLES.sub("", text)
    return number_value(" ".join(text.split()).casefold())


def head_value(text: str) -> str:
    """The head of a job or place phrase: "nurse at a children's hospital" → "nurse"."""
    head = re.split(
        r"\s+(?:at|in|for|with|from|on|near|outside|by|who|which|that|and)\s+|[,，]", text.strip(), maxsplit=1
    )
    return value_normalized(head[0])
