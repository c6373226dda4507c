"""MADial-Bench (zh and en): memories recalled for a dialogue, R@k beside BM25, and passive recall.

Each language's memories become semantic memories, one person per ``user-id``, as its dialogues are: the child
whose memories they are. The English memories carry none; they are the Chinese ones translated, under the same ids,
and take the Chinese memory's user (a set with neither is one person).
Each dialogue is queried with its turns before the test turn (``dialogue[1:test_turn]``, as written); R@k is
the share of its relevant memories found in the first k, averaged over dialogues (this reproduces the published
BM25 figures); ``recalled`` is the default's R@k of the one memory the test turn recalls (the first relevant id;
the others are judged related to it). BM25 ranks the same user's memories by jieba search tokens. ``passive``:
what passive recall offers for the user's last message before the test turn, in a conversation of the dialogue's
user holding the dialogue's turns before that message (as a real conversation would); ``smalltalk``: what it
offers for the small-talk lines, each after the first two turns of one of the first five users' dialogues.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anima.core.models import Component, MemoryStatus, MemoryType
from anima.core.segmentation import segment_text
from conversations.models import Person, Role
from memory.benchmarks._common import (
    BRANCHES,
    Bm25,
    PassiveTally,
    RecallTally,
    conversation_holding,
    lead_figures,
    passive_offered,
    smalltalk_figures,
)
from memory.models import SemanticMemory
from memory.selectors import memory_semantic_search

LANGUAGES = ("zh", "en")
# A dialogue line starts with its speaker: <Bart>:"…"
_SPEAKER_RE = re.compile(r"^<([^>]*)>:")
_ASSISTANT = "Assistant"


def madial_found(data: Path) -> bool:
    return (data / "MADial-Bench-en-memory.json").is_file()


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def madial_load(*, data: Path, lang: str) -> tuple[list[tuple[str, dict]], dict[str, Person], dict[int, str]]:
    """Store ``lang``'s memories: (key, memory) pairs, the person of each user, and each stored memory's key."""
    memories = [next(iter(item.items())) for item in _read_jsonl(data / f"MADial-Bench-{lang}-memory.json")]
    owners = _owners(data=data, lang=lang)
    memories = [(key, {"user-id": owners.get(str(key), "all"), **memory}) for key, memory in memories]
    persons = {
        user: Person.objects.create(slug=f"bench-madial-{lang}-{user}")
        for user in sorted({str(memory["user-id"]) for _, memory in memories})
    }
    rows = SemanticMemory.objects.bulk_create(
        SemanticMemory(
            primary_component=Component.SEMANTIC_MEMORY,
            memory_type=MemoryType.EXPERIENCE,
            status=MemoryStatus.ACTIVE,
            external_id=f"bench-madial-{lang}-{key}",
            content=memory["event"],
            fts_segmented=segment_text(memory["event"]),
            person=persons[str(memory["user-id"])],
        )
        for key, memory in memories
    )
    return memories, persons, {row.pk: str(key) for row, (key, _) in zip(rows, memories, strict=True)}


def _owners(*, data: Path, lang: str) -> dict[str, str]:
    """The user of each memory of the other languages' files that names one, by its id.

    A memory without a ``user-id`` of its own (MADial's English ones) takes it from there: a language's dialogues
    name their user, and searching another child's memories for them would measure what a person's own scope
    never holds.
    """
    owners: dict[str, str] = {}
    for other in LANGUAGES:
        path = data / f"MADial-Bench-{other}-memory.json"
        if other != lang and path.is_file():
            for item in _read_jsonl(path):
                for key, memory in item.items():
                    if "user-id" in memory:
                        owners.setdefault(str(key), str(memory["user-id"]))
    return owners


@dataclass(frozen=True)
class Dialogue:
    person: Person  # its user's
    query: str  # its turns before the test turn, as written
    last: str  # the user's last message before the test turn
    before: list[tuple[str, str]]  # (role, text) of the turns before that message
    relevant: set[str]  # its relevant memories' keys
    recalled: str  # the first of them: the memory its test turn recalls (the others are judged related to it)


def _turn(line: str) -> tuple[str, str]:
    speaker = _SPEAKER_RE.match(line)
    text = _SPEAKER_RE.sub("", line).strip().strip('"')
    return (Role.ASSISTANT if speaker and speaker[1] == _ASSISTANT else Role.USER), text


def madial_read(*, data: Path, lang: str, persons: dict[str, Person]) -> list[Dialogue]:
    """Each dialogue of ``lang`` with its user's person."""
    read = []
    for dialogue in _read_jsonl(data / f"MADial-Bench-{lang}-dialogue.json"):
        user = str(dialogue.get("user-id", "all")) if len(persons) > 1 else next(iter(persons))
        turn = dialogue["test-turn"][0]
        lines = dialogue["dialogue"][1:turn]
        turns = [_turn(line) for line in lines]
        read.append(
            Dialogue(
                person=persons[user],
                query="\n".join(line.strip() for line in lines),
                last=turns[-1][1],
                before=turns[:-1],
                relevant={str(key) for key in dialogue["relevant-id"]},
                recalled=str(dialogue["relevant-id"][0]),
            )
        )
    return read


def madial_run(
    *,
    data: Path,
    lang: str,
    loaded: tuple[list[tuple[str, dict]], dict[str, Person], dict[int, str]],
    dense: bool,
    recall: bool = True,
) -> dict[str, Any]:
    """Figures of every system for ``lang`` (``loaded`` by ``madial_load``, embedded when ``dense``); without
    ``recall``, only passive recall's and small talk's."""
    memories, persons, key_of = loaded
    dialogues = madial_read(data=data, lang=lang, persons=persons)
    systems = [system for system in BRANCHES if system != "dense" or dense] if recall else []
    corpus: dict[str, list[tuple[str, str]]] = {user: [] for user in persons}
    for key, memory in memories:
        corpus[str(memory["user-id"])].append((str(key), memory["event"]))
    bm25 = {user: Bm25(documents) for user, documents in corpus.items()} if recall else {}
    tallies = {system: RecallTally() for system in [*systems, "bm25", "recalled"]} if recall else {}
    passive = PassiveTally()
    users = {person.pk: user for user, person in persons.items()}
    for dialogue in dialogues:
        user = users[dialogue.person.pk]
        for system in systems:
            results = memory_semantic_search(
                query=dialogue.query, limit=20, person=dialogue.person, branches=BRANCHES[system]
            )
            ranked = [key_of.get(hit["id"], "") for hit in results]
            tallies[system].add(ranked=ranked, relevant=dialogue.relevant)
            if system == "anima":
                tallies["recalled"].add(ranked=ranked, relevant={dialogue.recalled})
        if recall:
            tallies["bm25"].add(ranked=bm25[user].ranked(dialogue.query), relevant=dialogue.relevant)
        conversation = conversation_holding(person=dialogue.person, turns=dialogue.before)
        passive.add(
            offered=passive_offered(conversation=conversation, message=dialogue.last, key_of=key_of),
            relevant=dialogue.relevant,
        )
    # Small talk after a topical exchange: each of the first five users' first dialogue's first two turns.
    topical = {}
    for dialogue in dialogues:
        if dialogue.person.pk not in topical and len(topical) < 5:
            topical[dialogue.person.pk] = conversation_holding(person=dialogue.person, turns=dialogue.before[:2])
    return (
        {"n": len(dialogues)}
        | {system: tally.figures() for system, tally in tallies.items()}
        | ({"lead": lead_figures(tallies)} if recall else {})
        | {"passive": passive.figures()}
        | {"smalltalk": smalltalk_figures(conversations=list(topical.values()), lang=lang)}
    )
