"""Passive recall's gate on every dev set, fast: query constructions and score cut-offs side by side.

Run from the repository root (``--data``: the folder holding madial/ and locomo/):

    python bench/recall/passive_gate.py --data ../shared/bench [--variants passive,last] [--cutoffs 0.3,0.35,0.4] \
        [--shares 0,0.9] [--limits 5,1] [--sets madial-zh,locomo] [--dump candidates.json]

Into a throwaway database it loads MADial (zh, en), LoCoMo and the chats written for this project
(bench/recall/chats, ``chats-<lang>``) as ``bench_recall`` does and embeds the memories (only they: passive recall
offers semantic memories, so the conversations' turns are stored but not embedded). Each turn is a last message and
the turns before it: a MADial dialogue's user line before the test turn after the dialogue's earlier turns, a
LoCoMo or chats question on its own, a small-talk line of bench/recall/smalltalk.jsonl on its own and after a
topical exchange (a MADial dialogue's or a LoCoMo session's first two turns). For each query construction
(``VARIANTS``: the last message alone, the window and the message as one query, and ``passive``, passive recall's
candidates in a conversation holding the turns before, ``passive_candidates``) each turn's candidates are searched
once; passive recall's gate (``passive_chosen``) is then applied to them at every cut-off and share of a reading's
best score, and for each set it prints offered / relevant offered / precision, as ``bench_recall``'s ``passive``
reads them. ``--dump`` writes every turn's candidates by reading for other combinations, with each candidate's
text.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anima.settings")

import django

django.setup()

from django.db import connection  # noqa: E402

import memory.embedding as embedding  # noqa: E402
from anima.core.config import config_get  # noqa: E402
from anima.core.db import throwaway_database  # noqa: E402
from anima.core.segmentation import text_informative  # noqa: E402
from conversations.models import Role  # noqa: E402
from memory.benchmarks._common import CHATS, conversation_holding, smalltalk_lines  # noqa: E402
from memory.benchmarks.locomo import locomo_load  # noqa: E402
from memory.benchmarks.madial import LANGUAGES, madial_load, madial_read  # noqa: E402
from memory.models import SemanticMemory  # noqa: E402
from memory.passive import passive_candidates, passive_chosen  # noqa: E402
from memory.search import KEYWORD_BRANCHES, search_text_plain, term_stats_clear  # noqa: E402
from memory.selectors import memory_semantic_search  # noqa: E402

POOL = 20
# A turn's candidates, by reading (the message alone, then after the turns before it), each best first.
Found = list[list[dict]]


@dataclass(frozen=True)
class Turn:
    set_name: str
    person: object
    before: tuple[str, ...]  # the turns before the last message, oldest first
    last: str
    relevant: frozenset[int]


def _madial_turns(data: Path, lang: str, persons, key_of) -> list[Turn]:
    """Each dialogue of ``lang`` (``madial_read``) as the turn of its last user message."""
    ids = defaultdict(set)
    for pk, key in key_of.items():
        ids[key].add(pk)
    return [
        Turn(
            f"madial-{lang}",
            dialogue.person,
            tuple(text for _, text in dialogue.before),
            dialogue.last,
            frozenset(pk for key in dialogue.relevant for pk in ids[key]),
        )
        for dialogue in madial_read(data=data, lang=lang, persons=persons)
    ]


def _turns(data: Path) -> list[Turn]:
    turns: list[Turn] = []
    for lang in LANGUAGES:
        _, persons, key_of = madial_load(data=data / "madial", lang=lang)
        dialogues = _madial_turns(data / "madial", lang, persons, key_of)
        turns += dialogues
        people = list(persons.values())[:5]
        for index, line in enumerate(smalltalk_lines(lang=lang)):
            for n, person in enumerate(people):
                turns.append(Turn(f"smalltalk-{lang}", person, (), line, frozenset()))
                # After a topical exchange: the first two turns of one of the person's dialogues.
                own = [turn for turn in dialogues if turn.person == person] or dialogues
                topical = own[(index + n) % len(own)].before[:2]
                turns.append(Turn(f"smalltalk-{lang}-after", person, topical, line, frozenset()))
    samples = locomo_load(data=data / "locomo")
    turns += _questions("locomo", samples)
    for path in sorted(CHATS.glob("*.json")):
        turns += _questions(f"chats-{path.stem}", locomo_load(data=path))
    for n, sample in enumerate(samples[:5]):
        for index, line in enumerate(smalltalk_lines(lang="en")):
            turns.append(Turn("smalltalk-locomo", sample.person, (), line, frozenset()))
            start = (7 * index + n) % (len(sample.turns) - 1)
            topical = tuple(text for _, text in sample.turns[start : start + 2])
            turns.append(Turn("smalltalk-locomo-after", sample.person, topical, line, frozenset()))
    return turns


def _questions(set_name: str, samples) -> list[Turn]:
    """Each question of LoCoMo-format ``samples``, asked out of the blue; a fact is relevant when it came from an
    evidence turn."""
    turns = []
    for sample in samples:
        for question in sample.questions:
            evidence = set(question["evidence"])
            facts = frozenset(pk for pk, sources in sample.fact_sources.items() if sources & evidence)
            turns.append(Turn(set_name, sample.person, (), question["question"], facts))
    return turns


def _search(person, text: str) -> Found:
    """What passive recall's search finds for ``text``, as one reading: only hits a keyword branch found."""
    if not text.strip():
        return []
    hits = memory_semantic_search(
        query=search_text_plain(text), limit=POOL, person=person, global_only=True, keyword_gate=True
    )
    return [sorted((hit for hit in hits if set(hit["scores"]) & set(KEYWORD_BRANCHES)), key=lambda hit: -hit["score"])]


def _passive(turn: Turn) -> Found:
    """Every candidate passive recall has for ``turn``, by reading (``passive_candidates``), in a conversation
    holding the turns before it: the turn it answers is the assistant's, the one before the user's, and so on."""
    roles = [Role.ASSISTANT if (len(turn.before) - index) % 2 else Role.USER for index in range(len(turn.before))]
    conversation = conversation_holding(person=turn.person, turns=list(zip(roles, turn.before, strict=True)))
    return passive_candidates(conversation=conversation, user_message=turn.last)


def _gated(search: Callable[[Turn], Found]) -> Callable[[Turn], Found]:
    """``search`` behind the informativeness test passive recall makes first."""
    return lambda turn: search(turn) if text_informative(turn.last) else []


def _joined(*lines: str) -> str:
    return "\n".join(line for line in lines if line.strip())


VARIANTS: dict[str, Callable[[Turn], Found]] = {
    "last": lambda turn: _search(turn.person, turn.last),
    "prev1": lambda turn: _search(turn.person, _joined(*turn.before[-1:], turn.last)),
    "prev2": lambda turn: _search(turn.person, _joined(*turn.before[-2:], turn.last)),
    "prev4": lambda turn: _search(turn.person, _joined(*turn.before[-4:], turn.last)),
    "all": lambda turn: _search(turn.person, _joined(*turn.before, turn.last)),
    "last-gated": _gated(lambda turn: _search(turn.person, turn.last)),
    "passive": _passive,
}


def _tally(
    turns: list[Turn], found: list[Found], cutoff: float, share: float = 0.0, limit: int = 5
) -> dict[str, float]:
    """Offered / relevant offered / precision (%) when passive recall's gate (``passive_chosen``) offers the hits
    scoring at least ``cutoff`` and ``share`` of their reading's best, ``limit`` at most."""
    relative = config_get(section="memory.passive_recall")["min_relative_score"]
    offered = relevant = memories = relevant_memories = 0
    for turn, readings in zip(turns, found, strict=True):
        gated = passive_chosen(found=readings, min_score=cutoff, min_share_of_best=share, min_relative_score=relative)
        chosen = [hit["id"] for hit in gated][:limit]
        offered += bool(chosen)
        relevant += bool(set(chosen) & turn.relevant)
        memories += len(chosen)
        relevant_memories += len(set(chosen) & turn.relevant)
    n = max(len(turns), 1)
    return {
        "offered": round(100 * offered / n, 1),
        "relevant": round(100 * relevant / n, 1),
        "precision": round(100 * relevant_memories / max(memories, 1), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--cutoffs", default="0.3,0.35,0.4,0.45,0.5,0.55")
    parser.add_argument("--shares", default="0", help="shares of the best score a memory must reach, comma-separated")
    parser.add_argument("--limits", default="5", help="most memories offered a turn, comma-separated")
    parser.add_argument("--sets", default="", help="only these sets (comma-separated names), default all")
    parser.add_argument("--dump", help="also write every turn's candidates to this JSON file")
    args = parser.parse_args()
    cutoffs = [float(value) for value in args.cutoffs.split(",")]
    shares = [float(value) for value in args.shares.split(",")]
    limits = [int(value) for value in args.limits.split(",")]
    # Only memories are searched: embedding LoCoMo's turns would cost minutes and change nothing here.
    embedding._EMBEDDABLE = {kind: spec for kind, spec in embedding._EMBEDDABLE.items() if kind == embedding.ENTITY}
    data = Path(args.data)
    with throwaway_database():
        turns = _turns(data)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        print("embedding …", flush=True)
        embedding.embed_backfill_run()
        term_stats_clear()
        by_set: dict[str, list[Turn]] = defaultdict(list)
        for turn in turns:
            if args.sets and turn.set_name not in args.sets.split(","):
                continue
            by_set[turn.set_name].append(turn)
        dump = []
        for variant in args.variants.split(","):
            found = {name: [VARIANTS[variant](turn) for turn in group] for name, group in by_set.items()}
            dump += [
                {
                    "variant": variant,
                    "set": name,
                    "before": turn.before,
                    "last": turn.last,
                    "relevant": sorted(turn.relevant),
                    # Each reading's candidates: id -> score, best first.
                    "readings": [{hit["id"]: hit["score"] for hit in reading} for reading in readings],
                }
                for name, group in by_set.items()
                for turn, readings in zip(group, found[name], strict=True)
            ]
            for cutoff, share, limit in itertools.product(cutoffs, shares, limits):
                cells = []
                for name, group in by_set.items():
                    figures = _tally(group, found[name], cutoff, share, limit)
                    if name.startswith("smalltalk"):
                        cells.append(f"{name} {figures['offered']}")
                    else:
                        cells.append(f"{name} {figures['offered']}/{figures['relevant']}/{figures['precision']}")
                print(f"{variant} >= {cutoff}, share {share}, at most {limit}: " + " | ".join(cells), flush=True)
        if args.dump:
            texts = dict(
                SemanticMemory.objects.filter(
                    pk__in={pk for row in dump for reading in row["readings"] for pk in reading}
                ).values_list("pk", "content")
            )
            for row in dump:
                row["texts"] = {pk: texts.get(pk, "") for reading in row["readings"] for pk in reading}
            Path(args.dump).write_text(json.dumps(dump, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
