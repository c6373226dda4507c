"""Redaction for forgetting: which passages quote a forgotten fact, and the one audited path past append-only rows.

A passage *quotes* a fact when it holds most of the fact's content words: at least three quarters
of them (all of them for a fact of three or fewer). English words are compared by their stems as
PostgreSQL's ``english`` configuration makes them — the stemming of recall's full-text branch, so
"lives" meets "live" and "peanuts" meets "peanut" — and a stem of five letters or more meets one that
begins with it ("allergic" ~ "allergy"); stopwords and function words never count. Chinese text is
compared by the character bigrams of its simplified reading (a fact in 「過敏」 meets a summary in 「过敏」).
Words that only name who the fact is about (the person's name) are left out first: a
passage that names Maya is not a passage about Maya's allergy. Redaction removes each quoting
sentence whole, and every ``[[anima:ID]]`` marker of a forgotten id. A string holding a JSON
document or JSON lines (an LLM prompt's payload) is redacted inside; there, an object whose text
quoted a fact goes whole. ``Passages`` finds a forgotten person's own messages the same way.

Limbic blocks and history entries are append-only by database triggers. The triggers let an UPDATE
or DELETE through only inside a transaction that names an open forget tombstone
(``forget_redaction``): every change past them is recorded by the tombstone it belongs to.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction

from anima.core.models import FORGET_SETTING
from anima.core.segmentation import text_simplified, text_traditional_forms
from anima.core.text import FUNCTION_WORDS

# Two stems this long meet when one begins with the other (allerg ~ allergi).
STEM_PREFIX_CHARS = 5
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


# A backslash escape of JSON text (a prompt stored as text) separates words like a space.
_ESCAPE_RE = re.compile(r"\\+[nrtu]?")


def _words(text: str) -> list[str]:
    """The content words of ``text`` outside Chinese runs, case-folded: numbers, and words of three letters or more
    that are no function word."""
    found = []
    for word in _WORD_RE.findall(_CJK_RUN_RE.sub(" ", _ESCAPE_RE.sub(" ", text.casefold()))):
        word = re.sub(r"['’]s?$", "", word)
        if len(word) >= 3 and word not in FUNCTION_WORDS:
            found.append(word)
    return found


class Lexemes:
    """English words to their stems as ``to_tsvector('english', …)`` makes them ("" for a stopword), asked of
    PostgreSQL a batch of texts at a time (``load``) and kept for one forget."""

    def __init__(self) -> None:
        self._known: dict[str, str] = {}

    def load(self, texts: Iterable[str]) -> None:
        missing = {word for text in texts for word in _words(text) if not word.isdigit()} - self._known.keys()
        if not missing:
            return
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT w, coalesce((ts_lexize('english_stem', w))[1], '') FROM unnest(%s::text[]) AS t(w)",
                [sorted(missing)],
            )
            self._known.update(cursor.fetchall())

    def stems(self, text: str) -> set[str]:
        """The stems of ``text``: its words' (numbers as they are) and the bigrams of its Chinese runs."""
        self.load([text])
        stems = {word if word.isdigit() else self._known[word] for word in _words(text)}
        stems.discard("")
        for run in _CJK_RUN_RE.findall(text_simplified(text)):
            stems.update(run[i : i + 2] for i in range(len(run) - 1))
        return stems


def _meets(stem: str, stems: set[str]) -> bool:
    if stem in stems:
        return True
    if len(stem) < STEM_PREFIX_CHARS or not stem.isalpha():
        return False
    return any(
        len(other) >= STEM_PREFIX_CHARS and (other.startswith(stem) or stem.startswith(other)) for other in stems
    )


@dataclass(frozen=True)
class Fact:
    """A forgotten fact as the matcher sees it: its content stems and how many a quote must hold."""

    stems: frozenset[str]
    needed: int

    @classmethod
    def of(cls, text: str, *, lexemes: Lexemes, names: Iterable[str] = ()) -> Fact | None:
        """None for a text with no content word (nothing to look for)."""
        stems = lexemes.stems(text)
        named = set().union(*(lexemes.stems(name) for name in names)) if names else set()
        content = stems - named or stems
        if not content:
            return None
        needed = len(content) if len(content) <= SHORT_FACT_WORDS else math.ceil(QUOTE_SHARE * len(content))
        return cls(stems=frozenset(content), needed=needed)

    def quoted_in(self, stems: set[str]) -> bool:
        return sum(_meets(stem, stems) for stem in self.stems) >= self.needed


def _search_term(stem: str) -> str:
    """What a text holding a word of ``stem`` contains: the stem without the ending a stemmer may have added
    (live ← living, studi ← study)."""
    bare = stem[:-1] if stem[-1:] in ("e", "i") else stem
    return bare if len(bare) >= 3 else stem


def json_document(text: str) -> dict | list | None:
    """The JSON object or array ``text`` holds whole, else None."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return document if isinstance(document, dict | list) else None


def json_lines(text: str) -> list | None:
    """The objects of ``text`` when it is JSON lines (a prompt's inventory of memories), else None."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2 or not all(line.lstrip().startswith("{") for line in lines):
        return None
    documents = [json_document(line) for line in lines]
    return documents if all(isinstance(document, dict) for document in documents) else None


@dataclass(frozen=True)
class Redactor:
    """Removes the sentences quoting any of ``facts`` and the citation markers of ``ids``."""

    facts: tuple[Fact, ...]
    ids: frozenset[int]
    lexemes: Lexemes = field(default_factory=Lexemes, compare=False)

    def search_terms(self) -> list[str]:
        """Words a quoting text must contain one of (a cheap SQL pre-filter; Python decides): a Chinese bigram as
        each script writes it."""
        terms = {_search_term(stem) for fact in self.facts for stem in fact.stems}
        terms |= {form for term in list(terms) if _CJK_RUN_RE.search(term) for form in text_traditional_forms(term)}
        return sorted(terms | {f"[[anima:{pk}]]" for pk in self.ids})

    def quotes(self, text: str) -> bool:
        stems = self.lexemes.stems(text)
        return any(fact.quoted_in(stems) for fact in self.facts)

    def text(self, text: str) -> str:
        """``text`` without its quoting sentences and forgotten markers; unchanged text is returned as is."""
        if not text:
            return text
        self.lexemes.load([text])  # one query for the whole text, none per sentence
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

    def value(self, value: Any, *, key: str = "", records: bool = False) -> Any:
        """A JSON value with every string redacted and forgotten ids dropped from lists that cite entities.

        A string holding a JSON document (an LLM prompt's payload, an answer) is redacted inside and dumped
        again as ``llm_json`` dumps it; in there (``records``), an object whose text quoted a forgotten fact
        leaves its list whole, with its slot, key and dates.
        """
        if isinstance(value, str):
            document = json_document(value)
            if document is not None:
                redacted = self.value(document, records=True)
                if isinstance(document, dict) and _emptied(document, redacted):
                    return ""  # one record (a line of JSON lines), about the fact
                return value if redacted == document else json.dumps(redacted, ensure_ascii=False)
            lines = json_lines(value)
            if lines is not None:
                redacted = self.value(lines, records=True)
                dumped = (json.dumps(line, ensure_ascii=False, separators=(",", ":")) for line in redacted)
                return value if redacted == lines else "\n".join(dumped)
            return self.text(value)
        if isinstance(value, list):
            cites = key.endswith(_CITING_KEYS)
            kept = []
            for item in value:
                if cites and type(item) is int and item in self.ids:
                    continue
                redacted = self.value(item, records=records)
                if not (records and isinstance(item, dict) and _emptied(item, redacted)):
                    kept.append(redacted)
            return kept
        if isinstance(value, dict):
            return {name: self.value(item, key=name, records=records) for name, item in value.items()}
        return value


def _emptied(before: dict, after: dict) -> bool:
    """Whether redaction emptied a text of the object."""
    return any(
        isinstance(text, str) and text.strip() and isinstance(after.get(name), str) and not after[name].strip()
        for name, text in before.items()
    )


# A text shorter than this says nothing of its own ("ok", "好的"): it is not looked for.
PASSAGE_MIN_CHARS = 8
# A piece of a text no JSON escaping changes (no quote, backslash or control character), for an SQL pre-filter.
_UNESCAPED_RE = re.compile(r'[^"\\\x00-\x1f]+')
_FRAGMENT_CHARS = 40


@dataclass(frozen=True)
class Passages:
    """Texts to take out (a forgotten person's messages), wherever a prompt or an answer carried them.

    A string that is one of them, or the start of one (prompts cut long messages), is theirs; any other
    string loses every occurrence of them and every sentence quoting one (as a fact is quoted: most of
    its content words, so an extractive digest of a message goes too).
    """

    texts: tuple[str, ...]
    quoting: Redactor

    @classmethod
    def of(cls, texts: Iterable[str]) -> Passages:
        kept = sorted({text.strip() for text in texts if len(text.strip()) >= PASSAGE_MIN_CHARS}, key=len)
        lexemes = Lexemes()
        lexemes.load(kept)
        facts = tuple(fact for text in kept if (fact := Fact.of(text, lexemes=lexemes)) is not None)
        # Longest first: a text that holds another is taken out whole.
        return cls(texts=tuple(reversed(kept)), quoting=Redactor(facts=facts, ids=frozenset(), lexemes=lexemes))

    def fragments(self) -> list[str]:
        """For each text, a piece that any level of JSON escaping leaves as it is, from its start."""
        pieces = (max(_UNESCAPED_RE.findall(text[:200]) or [""], key=len)[:_FRAGMENT_CHARS] for text in self.texts)
        return sorted({piece for piece in pieces if piece.strip()})

    def held(self, text: str) -> bool:
        """Whether ``text`` is one of the texts or the start of one."""
        text = text.strip()
        return len(text) >= PASSAGE_MIN_CHARS and any(passage.startswith(text) for passage in self.texts)

    def text(self, text: str) -> str:
        """``text`` without any occurrence of the texts nor a sentence quoting one (unchanged text as is)."""
        for passage in self.texts:
            if passage in text:
                text = text.replace(passage, "")
        return self.quoting.text(text)


@contextmanager
def forget_redaction(*, tombstone_id: int) -> Iterator[None]:
    """A transaction in which the append-only triggers let tombstone ``tombstone_id`` redact and delete."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config(%s, %s, true)", [FORGET_SETTING, str(tombstone_id)])
        yield
        cursor.execute("SELECT set_config(%s, '', true)", [FORGET_SETTING])
