"""Redaction for forgetting: which passages quote a forgotten fact, and the one audited path past append-only rows.

A passage *quotes* a fact when it holds most of the fact's content words: at least three quarters
of them (all of them for a fact of three or fewer), compared by their first five letters so that
"allergic" meets "allergy" and "peanuts" meets "peanut"; Chinese text is compared by character
bigrams. Words that only name who the fact is about (the person's name) are left out first: a
passage that names Maya is not a passage about Maya's allergy. Redaction removes each quoting
sentence whole, and every ``[[anima:ID]]`` marker of a forgotten id.

Limbic blocks and history entries are append-only by database triggers. The triggers let an UPDATE
or DELETE through only inside a transaction that names an open forget tombstone
(``forget_redaction``): every change past them is recorded by the tombstone it belongs to.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from anima.core.models import FORGET_SETTING
from anima.core.text import FUNCTION_WORDS

STEM_CHARS = 5
QUOTE_SHARE = 0.75
SHORT_FACT_WORDS = 3

# Words, and numbers of two or more digits (a code, a year: "1234" is what tells two locker codes apart).
_WORD_RE = re.compile(r"[^\W\d_][\w'’]*|\d{2,}", re.UNICODE)
_CJK_RUN_RE = re.compile(r"[\u3400-\u9fff]+")
# Sentence spans keep their trailing punctuation and whitespace, so the text around a removed one is unchanged.
_SPAN_RE = re.compile(r".*?(?:[。！？!?；;\n]+|\.(?=\s)|$)\s*", re.DOTALL)
_MARKER_RE = re.compile(r"\[\[anima:(\d{1,18})\]\]")
# JSON lists of entity ids (source_facts, semantic_memory_ids, anchor_ids, merged_from …): citations.
_CITING_KEYS = ("_ids", "_facts", "merged_from", "supersedes")


def _stems(text: str) -> set[str]:
    stems = set()
    lowered = text.casefold()
    for word in _WORD_RE.findall(_CJK_RUN_RE.sub(" ", lowered)):
        word = re.sub(r"['’]s?$", "", word)
        if len(word) >= 3 and word not in FUNCTION_WORDS:
            stems.add(word[:STEM_CHARS])
    for run in _CJK_RUN_RE.findall(lowered):
        stems.update(run[i : i + 2] for i in range(len(run) - 1))
    return stems


@dataclass(frozen=True)
class Fact:
    """A forgotten fact as the matcher sees it: its content stems and how many a quote must hold."""

    stems: frozenset[str]
    needed: int

    @classmethod
    def of(cls, text: str, *, names: Iterable[str] = ()) -> Fact | None:
        """None for a text with no content word (nothing to look for)."""
        stems = _stems(text)
        named = set().union(*(_stems(name) for name in names)) if names else set()
        content = stems - named or stems
        if not content:
            return None
        needed = len(content) if len(content) <= SHORT_FACT_WORDS else math.ceil(QUOTE_SHARE * len(content))
        return cls(stems=frozenset(content), needed=needed)

    def quoted_in(self, stems: set[str]) -> bool:
        return len(self.stems & stems) >= self.needed


@dataclass(frozen=True)
class Redactor:
    """Removes the sentences quoting any of ``facts`` and the citation markers of ``ids``."""

    facts: tuple[Fact, ...]
    ids: frozenset[int]

    def search_terms(self) -> list[str]:
        """Words a quoting text must contain one of (a cheap SQL pre-filter; Python decides)."""
        return sorted({stem for fact in self.facts for stem in fact.stems} | {f"[[anima:{pk}]]" for pk in self.ids})

    def quotes(self, text: str) -> bool:
        stems = _stems(text)
        return any(fact.quoted_in(stems) for fact in self.facts)

    def text(self, text: str) -> str:
        """``text`` without its quoting sentences and forgotten markers; unchanged text is returned as is."""
        if not text:
            return text
        kept = []
        changed = False
        for span in _SPAN_RE.findall(text):
            if not span:
                continue
            if self.quotes(span):
                changed = True
                continue
            bare = _MARKER_RE.sub(lambda m: "" if int(m[1]) in self.ids else m[0], span)
            changed = changed or bare != span
            kept.append(bare)
        if not changed:
            return text
        return re.sub(r"[ \t]{2,}", " ", "".join(kept)).strip()

    def value(self, value: Any, *, key: str = "") -> Any:
        """A JSON value with every string redacted and forgotten ids dropped from lists that cite entities."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            cites = key.endswith(_CITING_KEYS)
            return [self.value(item) for item in value if not (cites and type(item) is int and item in self.ids)]
        if isinstance(value, dict):
            return {name: self.value(item, key=name) for name, item in value.items()}
        return value


@contextmanager
def forget_redaction(*, tombstone_id: int) -> Iterator[None]:
    """A transaction in which the append-only triggers let tombstone ``tombstone_id`` redact and delete."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config(%s, %s, true)", [FORGET_SETTING, str(tombstone_id)])
        yield
        cursor.execute("SELECT set_config(%s, '', true)", [FORGET_SETTING])
