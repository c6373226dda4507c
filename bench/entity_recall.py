"""Recall through entities: questions that name a relative, pet or place only by a relation word or another
name, R@5 with and without the entity expansion.

Run from the repository root:

    python bench/entity_recall.py [--json] [--verbose] [--facts]

In a throwaway database, the conversations of ``bench/entities/conversations.jsonl`` (several people, each
telling about their family, pets and places over two days) go through the real nightly steps (light sleep,
deep sleep, subjects with their profiles) with whatever LLM provider is configured (the offline one without
``ANIMA_LLM_*``); with embeddings on, the rows are embedded as ``embed_backfill`` would. Then each question of
``bench/entities/questions.jsonl`` is recalled for its person (``memory_recall``, every source, 5 results),
once as recall runs (with the expansion) and once with ``entities=False``. A question is answered at k when
one of the first k results is an active fact of its person stating every one of its ``keys``
(case-insensitive); profiles are not facts (``answer@k`` also counts a profile stating the keys). Questions
whose keys no fact states after the night (the night did not learn it) are counted apart and left out.

Each question is also sent as a chat message after its person's latest conversation (``passive_recall``, as a turn
is assembled): ``passive answered`` is the share of questions offered a memory stating the keys, ``offered`` the
memories offered a question, ``off-subject`` the share of those that are about a subject of the person (its
profile, or a fact naming it) other than every one the question names: a subject talked about before, not asked.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anima.settings")

import django

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from offline_mind import DAYS, _load, _seed  # noqa: E402

from anima.core.models import MemoryStatus  # noqa: E402
from conversations.models import Conversation, Person  # noqa: E402
from memory.embedding import embed_backfill_run  # noqa: E402
from memory.models import SemanticMemory, Subject, SubjectKind, SubjectMention  # noqa: E402
from memory.passive import passive_recall  # noqa: E402
from memory.search import dense_status  # noqa: E402
from memory.selectors import memory_recall  # noqa: E402
from memory.subjects.recall import subjects_mentioned  # noqa: E402
from memory.subjects.selectors import active_facts, profile_q, subjects_of_person  # noqa: E402
from sleep.context import StepContext  # noqa: E402
from sleep.steps import deep_sleep, light_sleep, subjects  # noqa: E402

HERE = Path(__file__).resolve().parent / "entities"
KS = (1, 5)
# Each question counts in its language's row and in its group's (about the asker themself, or a subject of theirs).
SETS = ("zh", "en", "self", "subject")
ROWS = ("zh", "en", "all", "self", "subject")


def _night(day) -> None:
    ctx = StepContext(run_id=0, day=day, mode="full", force=False, run_key="bench", token_budget=None)
    light_sleep(ctx)
    deep_sleep(ctx)
    subjects(ctx)


def _states(keys: list[str], text: str) -> bool:
    return all(key.casefold() in text.casefold() for key in keys)


def _group(item: dict) -> str:
    """A question about the asker themself (``refers`` "self") or about one of their subjects."""
    return "self" if item.get("refers") == "self" else "subject"


def _measure(questions: list[dict], persons: dict[str, Person], *, verbose: bool) -> dict:
    stats = {
        mode: {key: {"n": 0, **{f"R@{k}": 0 for k in KS}, "answer@1": 0, "answer@5": 0} for key in SETS}
        for mode in ("with", "without")
    }
    passive = {key: {"n": 0, "answered": 0, "offered": 0, "off_subject": 0} for key in SETS}
    latest = {
        person.pk: Conversation.objects.filter(person=person).order_by("-id").first() for person in persons.values()
    }
    unlearnt: list[str] = []
    for item in questions:
        person = persons[item["person"]]
        facts = active_facts().filter(person=person)
        gold = {m.pk for m in facts if _states(item["keys"], m.content)}
        if not gold:
            unlearnt.append(f"{item['person']}: {item['question']} {item['keys']}")
            continue
        profiles = {
            m.pk
            for m in SemanticMemory.objects.filter(profile_q(), person=person, status=MemoryStatus.ACTIVE)
            if _states(item["keys"], m.content)
        }
        for mode, expand in (("with", True), ("without", False)):
            results = memory_recall(query=item["question"], person=person, limit=5, entities=expand)
            ids = [r["id"] for r in results if r["memory_type"] == "semantic"]
            ranked = [r["id"] if r["memory_type"] == "semantic" else None for r in results]
            for s in (stats[mode][item["lang"]], stats[mode][_group(item)]):
                s["n"] += 1
                for k in KS:
                    s[f"R@{k}"] += bool(gold & set(ranked[:k]))
                s["answer@1"] += bool((gold | profiles) & set(ranked[:1]))
                s["answer@5"] += bool((gold | profiles) & set(ids[:5]))
            if verbose and mode == "with" and not gold & set(ranked[:5]):
                print(f"miss ({item['person']}): {item['question']} -> {[r['snippet'][:60] for r in results]}")
        for tally in (passive[item["lang"]], passive[_group(item)]):
            _passive_measure(item, person, latest[person.pk], gold | profiles, tally)
    report = {}
    for mode, by_lang in stats.items():
        total = {key: by_lang["zh"][key] + by_lang["en"][key] for key in by_lang["zh"]}
        report[mode] = {lang: _rates(s) for lang, s in (*by_lang.items(), ("all", total))}
    total = {key: passive["zh"][key] + passive["en"][key] for key in passive["zh"]}
    report["passive"] = {lang: _passive_rates(p) for lang, p in (*passive.items(), ("all", total))}
    return {"report": report, "unlearnt": unlearnt}


def _passive_measure(item: dict, person: Person, conversation: Conversation, answers: set[int], tally: dict) -> None:
    """The question as the next message of ``person``'s latest ``conversation``: what passive recall offers."""
    offered = [hit["id"] for hit in passive_recall(conversation=conversation, user_message=item["question"]).hits]
    asked = {subject.pk for subject in subjects_mentioned(person=person, text=item["question"])}
    if _group(item) == "self":  # what the person's own subject holds is what the question asks about
        asked |= set(subjects_of_person(person=person).filter(kind=SubjectKind.SELF).values_list("pk", flat=True))
    about: dict[int, set[int]] = {}
    for subject_id, profile_id in Subject.objects.filter(profile_id__in=offered).values_list("pk", "profile_id"):
        about.setdefault(profile_id, set()).add(subject_id)
    for subject_id, memory_id in SubjectMention.objects.filter(memory_id__in=offered).values_list(
        "subject_id", "memory_id"
    ):
        about.setdefault(memory_id, set()).add(subject_id)
    tally["n"] += 1
    tally["answered"] += bool(answers & set(offered))
    tally["offered"] += len(offered)
    tally["off_subject"] += sum(1 for memory in offered if about.get(memory) and not about[memory] & asked)


def _passive_rates(p: dict) -> dict:
    return {
        "n": p["n"],
        "answered": round(p["answered"] / p["n"], 3) if p["n"] else 0.0,
        "offered": round(p["offered"] / p["n"], 2) if p["n"] else 0.0,
        "off_subject": round(p["off_subject"] / p["offered"], 3) if p["offered"] else 0.0,
    }


def _rates(s: dict) -> dict:
    n = s["n"]
    return {"n": n, **{key: round(value / n, 3) if n else 0.0 for key, value in s.items() if key != "n"}}


def _facts_listing(persons: dict[str, Person]) -> None:
    for slug, person in persons.items():
        print(f"== {slug}")
        for memory in active_facts().filter(person=person).order_by("id"):
            print(f"  fact #{memory.pk}: {memory.content}")
        for subject in subjects_of_person(person=person):
            profile = subject.profile.content if subject.profile_id else "-"
            print(f"  subject {subject.key} ({subject.kind}) aliases={subject.aliases} profile={profile}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=Path, default=HERE / "conversations.jsonl")
    parser.add_argument("--questions", type=Path, default=HERE / "questions.jsonl")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="list the questions missed with the expansion")
    parser.add_argument("--facts", action="store_true", help="list what the night learnt: facts, subjects, profiles")
    args = parser.parse_args()
    rows = _load(args.conversations)
    questions = _load(args.questions)
    creation = connection.creation
    connection.settings_dict["TEST"]["NAME"] = f"anima_bench_{os.getpid()}"
    creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        persons = _seed(rows)
        for day in sorted({row["day"] for row in rows}):
            _night(DAYS[day])
        model, _ = dense_status()
        if model is not None:
            embed_backfill_run()
        if args.facts:
            _facts_listing(persons)
        result = _measure(questions, persons, verbose=args.verbose)
    finally:
        creation.destroy_test_db(connection.settings_dict["NAME"], verbosity=0)
    output = {
        "provider": settings.ANIMA_LLM_PROVIDER,
        "embeddings": settings.ANIMA_EMBEDDINGS if model is not None else "off",
        "questions": len(questions),
        "unlearnt": len(result["unlearnt"]),
        **result["report"],
    }
    if args.json:
        print(json.dumps(output, ensure_ascii=False))
        return
    print(f"provider {output['provider']}, embeddings {output['embeddings']}, {len(questions)} questions")
    if result["unlearnt"]:
        print(f"left out, no fact states their keys after the night ({len(result['unlearnt'])}):")
        print("\n".join(f"  {line}" for line in result["unlearnt"]))
    print("expansion |     set |  n  |  R@1  |  R@5  | answer@1 | answer@5")
    for mode in ("without", "with"):
        for lang in ROWS:
            r = output[mode][lang]
            print(
                f"{mode:>9} | {lang:>7} | {r['n']:>3} | {r['R@1']:.3f} | {r['R@5']:.3f} | {r['answer@1']:>8.3f} | "
                f"{r['answer@5']:>8.3f}"
            )
    print("passive |     set |  n  | answered | offered | off-subject")
    for lang in ROWS:
        r = output["passive"][lang]
        print(
            f"passive | {lang:>7} | {r['n']:>3} | {r['answered']:>8.3f} | {r['offered']:>7.2f} | "
            f"{r['off_subject']:>11.3f}"
        )


if __name__ == "__main__":
    main()
