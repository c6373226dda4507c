"""LoCoMo (en): the turns that answer a question, recalled from long two-person conversations.

Each of the ten conversations belongs to one person; each dated session is a conversation of theirs, its turns
messages named by their speaker (the first speaker's as user turns, the second's as assistant turns), a shared
photo's caption kept in the text as ``[shares …]``. A question is asked of session recall with the person's
scope; its evidence (dialogue ids such as ``D3:12``) is found at k when among the first k turns, R@k the share
found averaged over questions (the four without evidence are left out), categories 1-4 together and 5
(adversarial: a false premise, its evidence still given) apart. BM25 ranks the same person's turns.

The sessions' observations (one fact each, with the turn it came from) are stored as the person's semantic
memories: ``passive`` is what passive recall offers for each question (asked in a conversation of its own),
relevant when the fact came from an evidence turn; ``smalltalk`` what it offers for the small-talk lines, each
after the first two turns of one of the first five persons' first session.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from anima.core.models import Component, MemoryStatus, MemoryType
from anima.core.segmentation import segment_text
from conversations.models import Conversation, Message, Person, Role
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
from memory.selectors import SESSION, memory_recall

FILE = "locomo10.json"
ADVERSARIAL = 5
GROUPS = {"1-4": lambda category: category != ADVERSARIAL, "5": lambda category: category == ADVERSARIAL}
# Turns of a session are a few seconds apart on its date: the order is the conversation's.
_TURN_SECONDS = 30


def locomo_found(data: Path) -> bool:
    return (data / FILE).is_file()


@dataclass
class _Sample:
    person: Person
    turns: list[tuple[str, str]]  # (dialogue id, text)
    message_key: dict[int, str]  # message id -> dialogue id
    fact_sources: dict[int, set[str]]  # memory id -> the dialogue ids it came from
    questions: list[dict[str, Any]]
    opening: list[tuple[str, str]]  # (role, text) of the first session's first two turns


def _turn_text(turn: dict[str, Any]) -> str:
    caption = turn.get("blip_caption")
    return f"{turn['text']} [shares {caption}]" if caption else turn["text"]


def _sessions(conversation: dict[str, Any]):
    number = 1
    while f"session_{number}" in conversation:
        when = datetime.strptime(conversation[f"session_{number}_date_time"], "%I:%M %p on %d %B, %Y")
        yield number, when.replace(tzinfo=UTC), conversation[f"session_{number}"]
        number += 1


def _load_sample(sample: dict[str, Any]) -> _Sample:
    dialogue = sample["conversation"]
    person = Person.objects.create(slug=f"bench-locomo-{sample['sample_id']}", display_name=dialogue["speaker_a"])
    messages: list[Message] = []
    for number, when, turns in _sessions(dialogue):
        conversation = Conversation.objects.create(
            person=person, external_id=f"bench-locomo-{sample['sample_id']}-{number}", title=f"session {number}"
        )
        for index, turn in enumerate(turns):
            text = _turn_text(turn)
            messages.append(
                Message(
                    conversation=conversation,
                    role=Role.USER if turn["speaker"] == dialogue["speaker_a"] else Role.ASSISTANT,
                    name=turn["speaker"],
                    content=text,
                    external_id=turn["dia_id"],
                    created_at=when + timedelta(seconds=_TURN_SECONDS * index),
                    fts_segmented=segment_text(text),
                )
            )
    stored = Message.objects.bulk_create(messages)
    facts: list[tuple[SemanticMemory, set[str]]] = []
    for observations in sample.get("observation", {}).values():
        for items in observations.values():
            for text, source in items:
                sources = {source} if isinstance(source, str) else set(source)
                facts.append(
                    (
                        SemanticMemory(
                            primary_component=Component.SEMANTIC_MEMORY,
                            memory_type=MemoryType.EXPERIENCE,
                            status=MemoryStatus.ACTIVE,
                            content=text,
                            fts_segmented=segment_text(text),
                            person=person,
                        ),
                        sources,
                    )
                )
    rows = SemanticMemory.objects.bulk_create(fact for fact, _ in facts)
    return _Sample(
        person=person,
        turns=[(message.external_id, message.content) for message in stored],
        message_key={message.pk: message.external_id for message in stored},
        fact_sources={row.pk: sources for row, (_, sources) in zip(rows, facts, strict=True)},
        questions=[question for question in sample["qa"] if question.get("evidence")],
        opening=[(message.role, message.content) for message in stored[:2]],
    )


def locomo_load(*, data: Path) -> list[_Sample]:
    """The samples of LoCoMo in folder ``data``, or of ``data`` itself: a file in LoCoMo's format."""
    with (data if data.is_file() else data / FILE).open(encoding="utf-8") as handle:
        return [_load_sample(sample) for sample in json.load(handle)]


def locomo_run(*, samples: list[_Sample], dense: bool, recall: bool = True, lang: str = "en") -> dict[str, Any]:
    """Figures of every system, by question group (``samples`` stored by ``locomo_load``, embedded when ``dense``);
    without ``recall``, only passive recall's and small talk's (the small-talk lines of ``lang``)."""
    systems = [system for system in BRANCHES if system != "dense" or dense] if recall else []
    tallies = {group: {system: RecallTally() for system in [*systems, "bm25"]} for group in GROUPS} if recall else {}
    passive = PassiveTally()
    topical = []
    for sample in samples:
        bm25 = Bm25(sample.turns) if recall else None
        # A question is asked out of the blue: in a conversation of its own, nothing before it.
        conversation = Conversation.objects.create(person=sample.person)
        if len(topical) < 5:
            # Small talk after a topical exchange: the first two turns of the person's first session.
            topical.append(conversation_holding(person=sample.person, turns=sample.opening))
        for question in sample.questions:
            group = next(name for name, test in GROUPS.items() if test(question["category"]))
            relevant = set(question["evidence"])
            for system in systems:
                results = memory_recall(
                    query=question["question"],
                    memory_types=[SESSION],
                    limit=20,
                    person=sample.person,
                    branches=BRANCHES[system],
                )
                ranked = [sample.message_key.get(hit["id"], "") for hit in results]
                tallies[group][system].add(ranked=ranked, relevant=relevant)
            if bm25 is not None:
                tallies[group]["bm25"].add(ranked=bm25.ranked(question["question"]), relevant=relevant)
            # A fact is relevant when it came from an evidence turn.
            facts = {str(pk) for pk, sources in sample.fact_sources.items() if sources & relevant}
            passive.add(
                offered=passive_offered(conversation=conversation, message=question["question"], key_of={}),
                relevant=facts,
            )
    return (
        {"n": sum(len(sample.questions) for sample in samples)}
        | {
            group: {system: tally.figures() for system, tally in group_tallies.items()}
            | {"lead": lead_figures(group_tallies)}
            for group, group_tallies in tallies.items()
        }
        | {"passive": passive.figures()}
        | {"smalltalk": smalltalk_figures(conversations=topical, lang=lang)}
    )
