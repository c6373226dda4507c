"""What every benchmark set measures: evidence recall at k, BM25 beside Anima, passive recall, small talk."""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from anima.core.segmentation import segment_text, text_simplified, words_cut
from conversations.models import Conversation, Message, Person
from memory.passive import passive_recall
from memory.search import ALL_BRANCHES, KEYWORD_BRANCHES

KS = (1, 3, 5, 10, 20)
# Anima's default (every branch fused), its keyword branches alone and its dense branch alone.
BRANCHES = {"anima": ALL_BRANCHES, "anima_keyword": KEYWORD_BRANCHES, "dense": ("dense",)}
SMALLTALK = Path(settings.BASE_DIR) / "bench" / "recall" / "smalltalk.jsonl"
# Chats written for this project in LoCoMo's format, one file a language (bench_recall's ``chats``).
CHATS = Path(settings.BASE_DIR) / "bench" / "recall" / "chats"
_WORD_RE = re.compile(r"\w")


def bm25_tokens(text: str) -> list[str]:
    """jieba's search tokens, lower-cased, punctuation left out: BM25's words (zh and en alike), Chinese in simplified
    characters as recall's own (``text_simplified``)."""
    return [token.lower() for token in words_cut(text_simplified(text), search=True) if _WORD_RE.search(token)]


class Bm25:
    """rank_bm25's Okapi BM25 over ``documents`` (key, text)."""

    def __init__(self, documents: Sequence[tuple[str, str]]) -> None:
        from rank_bm25 import BM25Okapi  # a development package: production installs leave it out

        self.keys = [key for key, _ in documents]
        self._index = BM25Okapi([bm25_tokens(text) for _, text in documents])

    def ranked(self, query: str) -> list[str]:
        scores = self._index.get_scores(bm25_tokens(query))
        return [self.keys[i] for i in sorted(range(len(self.keys)), key=lambda i: -scores[i])]


# The cut the lead of one system over another is read at (recall's default of 10 hits).
LEAD_K = 10


@dataclass
class RecallTally:
    """R@k: the share of a query's relevant keys among its first k results, query by query (``found``), and
    averaged over the queries (``figures``)."""

    found: dict[int, list[float]] = field(default_factory=lambda: {k: [] for k in KS})

    @property
    def queries(self) -> int:
        return len(self.found[LEAD_K])

    def add(self, *, ranked: Sequence[str], relevant: set[str]) -> None:
        for k in KS:
            self.found[k].append(len(relevant.intersection(ranked[:k])) / len(relevant))

    def figures(self) -> dict[str, float]:
        return {
            f"R@{k}": round(100 * statistics.fmean(values), 1) if values else 0.0 for k, values in self.found.items()
        }


def lead_figures(tallies: dict[str, RecallTally]) -> dict[str, float | str]:
    """How far ``anima`` (the fused default) leads its best single branch (``over``) at R@LEAD_K, over the same
    queries: the mean of its differences query by query, and that mean's standard error, which says how much of the
    lead a set of this size can tell from chance. Empty without the fused default or a branch beside it."""
    branches = [name for name in BRANCHES if name != "anima" and name in tallies and tallies[name].queries]
    fused = tallies.get("anima")
    if fused is None or not fused.queries or not branches:
        return {}
    best = max(branches, key=lambda name: sum(tallies[name].found[LEAD_K]))
    mean, error = paired_difference(values=fused.found[LEAD_K], baseline=tallies[best].found[LEAD_K])
    return {f"R@{LEAD_K}": round(100 * mean, 1), "standard error": round(100 * error, 1), "over": best}


def paired_difference(*, values: Sequence[float], baseline: Sequence[float]) -> tuple[float, float]:
    """The mean of ``values`` less ``baseline`` (the same queries, in the same order) and that mean's standard
    error: two systems asked the same queries are compared query by query, which tells apart far smaller
    differences than their two means' errors would."""
    differences = [value - base for value, base in zip(values, baseline, strict=True)]
    error = statistics.stdev(differences) / math.sqrt(len(differences)) if len(differences) > 1 else 0.0
    return statistics.fmean(differences), error


@dataclass
class PassiveTally:
    """What passive recall offered unasked: in how many turns anything, in how many a relevant memory, and the
    relevant share of all it offered."""

    turns: int = 0
    offered: int = 0
    relevant: int = 0
    memories: int = 0
    relevant_memories: int = 0

    def add(self, *, offered: set[str], relevant: set[str]) -> None:
        self.turns += 1
        self.offered += bool(offered)
        self.relevant += bool(offered & relevant)
        self.memories += len(offered)
        self.relevant_memories += len(offered & relevant)

    def figures(self) -> dict[str, float]:
        turns = max(self.turns, 1)
        return {
            "offered %": round(100 * self.offered / turns, 1),
            "relevant %": round(100 * self.relevant / turns, 1),
            "precision %": round(100 * self.relevant_memories / max(self.memories, 1), 1),
            "mean offered": round(self.memories / turns, 2),
        }


def conversation_holding(*, person: Person, turns: Sequence[tuple[str, str]]) -> Conversation:
    """A new conversation of ``person`` holding ``turns`` (role, text), a second apart: what a turn that follows them
    in a real conversation would have before it."""
    conversation = Conversation.objects.create(person=person)
    start = timezone.now() - timedelta(seconds=len(turns) + 1)
    Message.objects.bulk_create(
        Message(
            conversation=conversation,
            role=role,
            content=text,
            created_at=start + timedelta(seconds=index),
            fts_segmented=segment_text(text),
        )
        for index, (role, text) in enumerate(turns)
    )
    return conversation


def passive_offered(*, conversation: Conversation, message: str, key_of: dict[int, str]) -> set[str]:
    """The keys (``key_of`` by memory id) of what passive recall offers for ``message`` in ``conversation``."""
    hits = passive_recall(conversation=conversation, user_message=message).hits
    return {key_of.get(hit["id"], str(hit["id"])) for hit in hits}


def smalltalk_lines(*, lang: str) -> list[str]:
    """The small-talk lines of ``lang`` (greetings, thanks, acknowledgements): passive recall should offer nothing."""
    with SMALLTALK.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return [row["text"] for row in rows if row["lang"] == lang]


def smalltalk_figures(*, conversations: Iterable[Conversation], lang: str) -> dict[str, float]:
    """Over every small-talk line of ``lang`` in each of ``conversations`` (each holding a topical exchange, which a
    small-talk line after it must not drag in): how many lines and conversations, the share of the lines asked that
    were offered anything, and how much."""
    conversations, lines = list(conversations), smalltalk_lines(lang=lang)
    tally = PassiveTally()
    for conversation in conversations:
        for line in lines:
            tally.add(offered=passive_offered(conversation=conversation, message=line, key_of={}), relevant=set())
    figures = tally.figures()
    return {
        "lines": len(lines),
        "conversations": len(conversations),
        "offered %": figures["offered %"],
        "mean offered": figures["mean offered"],
    }
