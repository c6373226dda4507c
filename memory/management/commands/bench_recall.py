"""Recall quality on MADial-Bench: R@k of Anima's hybrid recall beside BM25, zh and en.

Memories are loaded into a throwaway database (``anima_bench_<pid>`` on the same
server, migrated, dropped at the end). Each dialogue is queried with its turns
before the test turn (``dialogue[1:test_turn]``, as written). R@k is the share of
a dialogue's relevant memories found in the top k, averaged over dialogues (this
reproduces the published BM25 figures). Candidates are the dialogue user's
memories where the memory file gives a ``user-id`` (zh), otherwise all (en).
BM25 (rank_bm25) ranks jieba search tokens (lower-cased words) of the whole pre-test dialogue.

``anima`` is the default configuration (keyword and, where vectors exist, dense branches fused);
``anima_keyword`` its FTS and trigram branches only; ``dense`` its dense branch only, absent when no
vectors could be made (``ANIMA_EMBEDDINGS=off``, no pgvector). Memories are embedded by the same
backfill production uses before the queries run.

``passive``: passive recall (what a turn is offered unasked) for the user's last message before the test
turn alone, in a conversation of the dialogue's user: in how many dialogues it offered anything, in how
many a relevant memory, and what share of all it offered was relevant.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jieba
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from rank_bm25 import BM25Okapi

from anima.core.db import throwaway_database
from anima.core.models import Component, MemoryStatus, MemoryType
from anima.core.segmentation import segment_text
from conversations.models import Conversation, Person
from memory.embedding import embed_backfill_run
from memory.models import SemanticMemory
from memory.search import ALL_BRANCHES, KEYWORD_BRANCHES
from memory.selectors import memory_semantic_search, passive_recall

KS = (1, 3, 5, 10, 20)
SYSTEMS = ("anima", "anima_keyword", "dense", "bm25", "passive")
BRANCHES = {"anima": ALL_BRANCHES, "anima_keyword": KEYWORD_BRANCHES, "dense": ("dense",)}
_WORD_RE = re.compile(r"\w")
# A dialogue line starts with its speaker: <Bart>:"…"
_SPEAKER_RE = re.compile(r"^<[^>]*>:")


class Command(BaseCommand):
    help = "R@1/3/5/10/20 of hybrid recall vs BM25 on MADial-Bench (zh and en), in a throwaway database."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--data", required=True, help="MADial-Bench directory, relative to the repo root")
        parser.add_argument("--json", action="store_true", help="end with one JSON line of the figures")

    def handle(self, *args, **options) -> None:
        data = Path(options["data"])
        if not data.is_absolute():
            data = Path(settings.BASE_DIR) / data
        if not data.is_dir():
            raise CommandError(f"no MADial-Bench directory at {data}")
        with throwaway_database():
            report = {lang: _bench_language(data, lang) for lang in ("zh", "en")}
        for lang, figures in report.items():
            self.stdout.write(f"{lang} (n={figures['n']})")
            for system in SYSTEMS:
                if system in figures:
                    cells = "  ".join(f"{name} {value:5.1f}" for name, value in figures[system].items())
                    self.stdout.write(f"  {system:<13} {cells}")
        if options["json"]:
            self.stdout.write(json.dumps(report))


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _tokens(text: str) -> list[str]:
    return [token.lower() for token in jieba.cut_for_search(text) if _WORD_RE.search(token)]


def _bench_language(data: Path, lang: str) -> dict[str, Any]:
    memories = [next(iter(item.items())) for item in _read_jsonl(data / f"MADial-Bench-{lang}-memory.json")]
    dialogues = _read_jsonl(data / f"MADial-Bench-{lang}-dialogue.json")
    scoped = any("user-id" in memory for _, memory in memories)
    persons = {
        user: Person.objects.create(slug=f"bench-{lang}-{user}")
        for user in sorted({str(memory.get("user-id", "all")) for _, memory in memories})
    }
    rows = [
        SemanticMemory(
            primary_component=Component.SEMANTIC_MEMORY,
            memory_type=MemoryType.EXPERIENCE,
            status=MemoryStatus.ACTIVE,
            external_id=f"bench-{lang}-{key}",
            content=memory["event"],
            fts_segmented=segment_text(memory["event"]),
            person=persons[str(memory.get("user-id", "all"))],
        )
        for key, memory in memories
    ]
    SemanticMemory.objects.bulk_create(rows)
    embedded = embed_backfill_run().available
    systems = [system for system in BRANCHES if system != "dense" or embedded]
    corpus = {str(memory.get("user-id", "all")): [] for _, memory in memories}
    for key, memory in memories:
        corpus[str(memory.get("user-id", "all"))].append((key, _tokens(memory["event"])))
    bm25 = {user: BM25Okapi([tokens for _, tokens in docs]) for user, docs in corpus.items()}
    hits = {system: dict.fromkeys(KS, 0.0) for system in [*systems, "bm25"]}
    conversations = {user: Conversation.objects.create(person=person) for user, person in persons.items()}
    passive = {"offered": 0, "relevant": 0, "memories": 0, "relevant_memories": 0}
    for dialogue in dialogues:
        user = str(dialogue["user-id"]) if scoped else "all"
        query = "\n".join(line.strip() for line in dialogue["dialogue"][1 : dialogue["test-turn"][0]])
        relevant = {str(key) for key in dialogue["relevant-id"]}
        ranked = {}
        for system in systems:
            results = memory_semantic_search(
                query=query, limit=max(KS), person=persons[user], branches=BRANCHES[system]
            )
            ranked[system] = [hit["external_id"].removeprefix(f"bench-{lang}-") for hit in results]
        scores = bm25[user].get_scores(_tokens(query))
        keys = [key for key, _ in corpus[user]]
        ranked["bm25"] = [keys[i] for i in sorted(range(len(keys)), key=lambda i: -scores[i])]
        for system, found in hits.items():
            for k in KS:
                found[k] += len(relevant.intersection(ranked[system][:k])) / len(relevant)
        message = _SPEAKER_RE.sub("", dialogue["dialogue"][dialogue["test-turn"][0] - 1]).strip().strip('"')
        offered = {
            hit["external_id"].removeprefix(f"bench-{lang}-")
            for hit in passive_recall(conversation=conversations[user], user_message=message).hits
        }
        passive["offered"] += bool(offered)
        passive["relevant"] += bool(offered & relevant)
        passive["memories"] += len(offered)
        passive["relevant_memories"] += len(offered & relevant)
    n = len(dialogues)
    return (
        {"n": n}
        | {system: {f"R@{k}": round(100 * found[k] / n, 1) for k in KS} for system, found in hits.items()}
        | {
            "passive": {
                "offered %": round(100 * passive["offered"] / n, 1),
                "relevant %": round(100 * passive["relevant"] / n, 1),
                "precision %": round(100 * passive["relevant_memories"] / max(passive["memories"], 1), 1),
                "mean offered": round(passive["memories"] / n, 2),
            }
        }
    )
