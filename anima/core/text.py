"""Language-agnostic text helpers: language detection, sentence-aware caps, dedupe keys, keywords."""

from __future__ import annotations

import hashlib
import re
import unicodedata

_CJK_RE = re.compile(r"[\u3400-\u9fff]")
_LATIN_RE = re.compile(r"[A-Za-z]")


def normalized(text: str) -> str:
    """Content compared for dedupe: NFKC, case-folded, whitespace and punctuation dropped."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in text if ch.isalnum())


def content_key(text: str) -> str:
    return hashlib.sha1(normalized(text).encode()).hexdigest()[:16]


def is_chinese(text: str) -> bool:
    """True when CJK characters outweigh Latin letters (one CJK char carries about a word)."""
    return len(_CJK_RE.findall(text)) * 3 >= max(len(_LATIN_RE.findall(text)), 1)


def clip(text: str, limit: int) -> str:
    """Hard-cut to ``limit`` characters, preferring the last sentence end inside the limit."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[:limit]
    ends = [cut.rfind(mark) for mark in "。！？.!?\n"]
    best = max(ends)
    return cut[: best + 1].rstrip() if best >= limit // 2 else cut.rstrip()


_EN_STOPWORDS = frozenset(
    "about after again also am and any are because been before being but can could did does doing down during "
    "each few for from further had has have having her here hers him his how into its just more most much must "
    "not now off once only other our out over own same she should some such than that the their them then there "
    "these they this those through too under until very was were what when where which while who why will with "
    "would you your yours really maybe think thing things going today tomorrow yesterday morning night well okay "
    "thanks thank haha feel felt said says like just got get gets much went gone definitely completely mostly "
    "better worse probably actually little less lots kind sure good great always never ever every anything "
    "something nothing time times tonight".split()
)


# Nouns (and English words, tagged "eng"): verbs like 「没查」「老问」 make poor themes.
_KEYWORD_POS = ("n", "ns", "nz", "nt", "nw", "vn", "eng")


def text_keywords(text: str, *, count: int, script: str = "") -> list[str]:
    """Top content words (jieba TF-IDF): CJK words of ≥ 2 chars, Latin words of ≥ 4 letters minus stopwords.

    ``script`` "cjk" or "latin" keeps only words of that script.
    """
    import jieba.analyse

    words = []
    for word in jieba.analyse.extract_tags(text, topK=count * 4, allowPOS=_KEYWORD_POS):
        if script and (script == "latin") != word.isascii():
            continue
        if word.isascii():
            if len(word) < 4 or not word.isalpha() or word.casefold() in _EN_STOPWORDS:
                continue
        elif len(word) < 2 or not _CJK_RE.search(word):
            continue
        words.append(word)
    return words[:count]
