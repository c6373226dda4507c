"""Recall of chat lines in Chinese and English: MADial's dialogues as conversations, each memory they recall as a query.

Run from the repository root (``--data``: the folder holding madial/):

    python bench/recall/madial_lines.py --data ../shared/bench

LoCoMo, the dev set of turns, is English only; this asks the same of both languages. Each MADial dialogue becomes a
conversation of its user's person (the child's lines as user turns, the companion's as assistant turns, a day apart
from the dialogue before). The memory a dialogue's test turn recalls is then asked, in its own words ("Bart在圣诞节晚会
上跳舞，感觉非常开心。"), of session recall with that person's scope, as "when did we talk about this?" would be: the
relevant lines are the test turn (the companion recalling it) and the child's reply, of every dialogue recalling that
memory. R@k as in ``bench_recall``: the share of them in the first k, averaged over queries. Rows: the default and its
branches, BM25 over the same person's lines, the default with its lines not judged by the turns beside them (no pull
toward a better neighbour, no lowering of a line that only asks: ``memory.search._context``), and the default and
dense branch with every line embedded alone (no turn it answers, no speaker's name) instead of as ``embed_backfill``
embeds it. The lines are embedded twice: about two minutes here.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anima.settings")

import django

django.setup()

from django.db import connection  # noqa: E402

import memory.embedding as embedding  # noqa: E402
import memory.search._fusion as fusion  # noqa: E402
from anima.core.db import throwaway_database  # noqa: E402
from anima.core.segmentation import segment_text  # noqa: E402
from anima.core.vectors import MESSAGE, vectors_clear  # noqa: E402
from conversations.models import Conversation, Message, Person, Role  # noqa: E402
from memory.benchmarks._common import BRANCHES, KS, Bm25, RecallTally  # noqa: E402
from memory.benchmarks.madial import _SPEAKER_RE, LANGUAGES, _read_jsonl, _turn  # noqa: E402
from memory.search import term_stats_clear  # noqa: E402
from memory.selectors import SESSION, memory_recall  # noqa: E402

_START = datetime(2024, 1, 1, tzinfo=UTC)


def _load(data: Path, lang: str) -> tuple[list[tuple[Person, str, set[str]]], dict[Person, list[tuple[str, str]]]]:
    """Store ``lang``'s dialogues; return its queries (person, memory text, relevant message ids) and each person's
    lines (message id, text) for BM25."""
    memories = {}
    for item in _read_jsonl(data / f"MADial-Bench-{lang}-memory.json"):
        key, memory = next(iter(item.items()))
        memories[str(key)] = memory["event"]
    persons: dict[str, Person] = {}
    relevant: dict[tuple[str, str], set[str]] = defaultdict(set)
    lines: dict[Person, list[tuple[str, str]]] = defaultdict(list)
    for number, dialogue in enumerate(_read_jsonl(data / f"MADial-Bench-{lang}-dialogue.json")):
        user = str(dialogue.get("user-id", "all"))
        person = persons.get(user) or persons.setdefault(user, Person.objects.create(slug=f"bench-lines-{lang}-{user}"))
        conversation = Conversation.objects.create(person=person, title=f"dialogue {number}")
        said = dialogue["dialogue"][1:-1]  # between <BOD> and <EOD>
        stored = Message.objects.bulk_create(
            Message(
                conversation=conversation,
                role=role,
                name=_SPEAKER_RE.match(line)[1] if role == Role.USER and _SPEAKER_RE.match(line) else "",
                content=text,
                created_at=_START + timedelta(days=number, seconds=30 * index),
                fts_segmented=segment_text(text),
            )
            for index, (line, (role, text)) in enumerate((line, _turn(line)) for line in said)
        )
        lines[person] += [(str(message.pk), message.content) for message in stored]
        test = dialogue["test-turn"][0] - 1  # the test turn's index among the stored lines
        relevant[(user, str(dialogue["relevant-id"][0]))] |= {str(message.pk) for message in stored[test : test + 2]}
    return [(persons[user], memories[key], found) for (user, key), found in relevant.items()], lines


def _measure(queries: list[tuple[Person, str, set[str]]], *, branches: tuple[str, ...]) -> RecallTally:
    tally = RecallTally()
    for person, text, relevant in queries:
        hits = memory_recall(query=text, person=person, memory_types=[SESSION], limit=max(KS), branches=branches)
        tally.add(ranked=[str(hit["id"]) for hit in hits], relevant=relevant)
    return tally


def _row(label: str, tally: RecallTally) -> str:
    return f"{label} | " + " / ".join(f"{value:.1f}" for value in tally.figures().values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="the folder with madial/")
    data = Path(parser.parse_args().data) / "madial"
    with throwaway_database():
        loaded = {lang: _load(data, lang) for lang in LANGUAGES}
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        embedding.embed_backfill_run()
        term_stats_clear()
        print("R@" + " / ".join(str(k) for k in KS))
        for lang, (queries, lines) in loaded.items():
            print(f"{lang}: {len(queries)} queries, {sum(len(said) for said in lines.values())} lines")
            for system, branches in BRANCHES.items():
                print(_row(f"{lang} {system}", _measure(queries, branches=branches)))
            bm25 = {person: Bm25(said) for person, said in lines.items()}
            tally = RecallTally()
            for person, text, relevant in queries:
                tally.add(ranked=bm25[person].ranked(text), relevant=relevant)
            print(_row(f"{lang} bm25", tally))
        judged = fusion.lines_judged
        fusion.lines_judged = lambda **_: False
        for lang, (queries, _) in loaded.items():
            print(_row(f"{lang} anima, lines not judged", _measure(queries, branches=BRANCHES["anima"])))
        fusion.lines_judged = judged
        table, where, _, person_sql, conversation_sql = embedding._EMBEDDABLE[MESSAGE]
        embedding._EMBEDDABLE[MESSAGE] = (table, where, "t.content", person_sql, conversation_sql)
        vectors_clear()
        embedding.embed_backfill_run()
        for lang, (queries, _) in loaded.items():
            for system in ("anima", "dense"):
                print(_row(f"{lang} {system}, lines embedded alone", _measure(queries, branches=BRANCHES[system])))


if __name__ == "__main__":
    main()
