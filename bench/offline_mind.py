"""Consolidation quality of the sleep cycle: fact extraction, change detection and duplicates.

Run from the repository root:

    python bench/offline_mind.py [--set bench/offline_mind/dev.jsonl] [--json] [--verbose]

Each line of the set is one conversation of one person on day 1 or day 2: the user's messages
(each answered by a short assistant reply), the facts they disclose (each a list of keys that
a memory stating it contains, case-insensitive), the facts of day 1 they change (`changes`:
old keys → new keys) and the facts they only restate (`restated`). In a throwaway database the
real light-sleep and deep-sleep steps run over day 1, then day 2, with whatever LLM provider is
configured (the offline one without `ANIMA_LLM_*`). Reported per language and overall:

- recall: disclosed facts stated by some memory light sleep wrote (whatever became of it later);
- precision: memories light sleep wrote that state some disclosed fact of their person;
- changes: day-1 memories of a changed fact expired (themselves or what they were merged into) with
  reason "changed", superseded (through merges, if any) by an active memory stating the new value;
- duplicates: disclosed facts stated by two or more active memories at the end;
- first-person leaks: memories still speaking as 我 / I instead of naming the person;
- idempotent: re-running both steps over day 2 changes no memory.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from datetime import date, datetime, time, timedelta
from itertools import combinations
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anima.settings")

import django

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from anima.core.embeddings import EmbeddingsUnavailable, embed_texts  # noqa: E402
from anima.core.models import MemoryStatus  # noqa: E402
from anima.core.text import is_chinese  # noqa: E402
from conversations.models import Conversation, Message, Person, Role  # noqa: E402
from memory.models import SemanticMemory  # noqa: E402
from sleep.context import StepContext  # noqa: E402
from sleep.steps import deep_sleep, light_sleep  # noqa: E402

DAYS = {1: date(2026, 11, 2), 2: date(2026, 11, 3)}
DEFAULT_SET = Path(__file__).resolve().parent / "offline_mind" / "dev.jsonl"
_FIRST_PERSON = re.compile(r"我(?!们)|\bI\b|\bmy\b|\bI'm\b", re.I)


def _load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _seed(rows: list[dict]) -> dict[str, Person]:
    persons: dict[str, Person] = {}
    for number, row in enumerate(rows):
        person = persons.get(row["person"])
        if person is None:
            person = persons[row["person"]] = Person.objects.create(slug=row["person"], display_name=row["name"])
        conversation = Conversation.objects.create(
            external_id=f"bench-{number}", platform="web", person=person, title=""
        )
        start = timezone.make_aware(datetime.combine(DAYS[row["day"]], time(9, 0)))
        reply = "好的。" if is_chinese(" ".join(row["user"])) else "Got it."
        messages = []
        for i, text in enumerate(row["user"]):
            at = start + timedelta(minutes=10 * i)
            messages.append(Message(conversation=conversation, role=Role.USER, content=text, created_at=at))
            messages.append(
                Message(
                    conversation=conversation, role=Role.ASSISTANT, content=reply, created_at=at + timedelta(minutes=1)
                )
            )
        Message.objects.bulk_create(messages)
    return persons


def _sleep(day: date) -> None:
    ctx = StepContext(run_id=0, day=day, mode="full", force=False, run_key="bench", token_budget=None)
    light_sleep(ctx)
    deep_sleep(ctx)


def _states(keys: list[str], text: str) -> bool:
    text = text.casefold()
    return all(key.casefold() in text for key in keys)


def _final(memory: SemanticMemory, by_id: dict[int, SemanticMemory]) -> SemanticMemory:
    """Follow merges (and splits) to the memory that now carries what ``memory`` said."""
    seen = set()
    while memory.status == MemoryStatus.EXPIRED and memory.superseded_by_id and memory.pk not in seen:
        seen.add(memory.pk)
        memory = by_id[memory.superseded_by_id]
    return memory


def _changed_to(memory: SemanticMemory, keys: list[str], by_id: dict[int, SemanticMemory]) -> bool:
    """``memory`` (or what it was merged into) expired as "changed", superseded by an active memory stating ``keys``."""
    seen = set()
    while memory.expired_reason.startswith("merged into") and memory.superseded_by_id and memory.pk not in seen:
        seen.add(memory.pk)
        memory = by_id[memory.superseded_by_id]
    if memory.status != MemoryStatus.EXPIRED or memory.expired_reason != "changed" or not memory.superseded_by_id:
        return False
    successor = _final(by_id[memory.superseded_by_id], by_id)
    return successor.status == MemoryStatus.ACTIVE and _states(keys, successor.content)


def _fingerprint() -> list[tuple]:
    return list(SemanticMemory.objects.order_by("id").values_list("id", "status", "content", "superseded_by_id"))


def _measure(rows: list[dict], *, verbose: bool) -> dict:
    persons = _seed(rows)
    _sleep(DAYS[1])
    _sleep(DAYS[2])
    before = _fingerprint()
    _sleep(DAYS[2])
    idempotent = before == _fingerprint()
    everything = list(SemanticMemory.objects.select_related("person"))
    by_id = {m.pk: m for m in everything}
    stats = {
        lang: dict.fromkeys(("facts", "found", "written", "right", "changes", "changed", "dups", "leaks"), 0)
        for lang in ("zh", "en")
    }
    misses: list[str] = []
    for slug, person in persons.items():
        lines = [r for r in rows if r["person"] == slug]
        lang = "zh" if is_chinese(" ".join(r["user"][0] for r in lines)) else "en"
        s = stats[lang]
        mine = [m for m in everything if m.person_id == person.pk]
        written = [m for m in mine if (m.external_id or "").startswith("ls:")]
        active = [m for m in mine if m.status == MemoryStatus.ACTIVE]
        gold = [keys for r in lines for keys in r["facts"]]
        for keys in gold:
            s["facts"] += 1
            if any(_states(keys, m.content) for m in written):
                s["found"] += 1
            else:
                misses.append(f"{slug}: missed {keys}")
            stating = [m for m in active if _states(keys, m.content)]
            # Two memories that state exactly the same disclosed facts say the same thing twice.
            signatures = [frozenset(i for i, other in enumerate(gold) if _states(other, m.content)) for m in stating]
            if len(signatures) != len(set(signatures)):
                s["dups"] += 1
                misses.append(f"{slug}: duplicated {keys}")
        for m in written:
            s["written"] += 1
            if any(_states(keys, m.content) for keys in gold):
                s["right"] += 1
            else:
                misses.append(f"{slug}: wrong {m.content!r}")
            if _FIRST_PERSON.search(m.content):
                s["leaks"] += 1
                misses.append(f"{slug}: first person {m.content!r}")
        for change in (c for r in lines for c in r.get("changes", [])):
            s["changes"] += 1
            olds = [m for m in written if m.source_day == DAYS[1] and _states(change["old"], m.content)]
            done = bool(olds) and all(_changed_to(m, change["new"], by_id) for m in olds)
            s["changed"] += done
            if not done:
                misses.append(f"{slug}: change {change['old']} → {change['new']} not recorded")
    if verbose:
        print("\n".join(misses))
    return {"stats": stats, "idempotent": idempotent, "cosines": _cosines(rows, persons, everything)}


def _cosines(rows: list[dict], persons: dict[str, Person], memories: list[SemanticMemory]) -> dict | None:
    """Cosine of two memories of one person that state the same disclosed facts vs ones that share none.

    What the merge and contradiction thresholds of deep sleep are read against; None without embeddings.
    """
    same, different = [], []
    for slug, person in persons.items():
        gold = [keys for r in rows if r["person"] == slug for keys in r["facts"]]
        mine = [m for m in memories if m.person_id == person.pk and (m.external_id or "").startswith("ls:")]
        try:
            vectors = embed_texts([m.content for m in mine])
        except EmbeddingsUnavailable:
            return None
        signed = [
            (frozenset(i for i, keys in enumerate(gold) if _states(keys, m.content)), v)
            for m, v in zip(mine, vectors, strict=True)
        ]
        for (sa, va), (sb, vb) in combinations(signed, 2):
            cosine = sum(x * y for x, y in zip(va, vb, strict=True))
            if sa and sa == sb:
                same.append(cosine)
            elif not sa & sb:
                different.append(cosine)
    different.sort()
    return {
        "same_min": round(min(same), 3) if same else None,
        "same_pairs": len(same),
        "different_max": round(different[-1], 3) if different else None,
        "different_p99": round(different[int(len(different) * 0.99) - 1], 3) if different else None,
        "different_pairs": len(different),
    }


def _ratio(a: int, b: int) -> float:
    return round(a / b, 3) if b else 0.0


def _report(stats: dict) -> dict:
    return {
        "recall": _ratio(stats["found"], stats["facts"]),
        "precision": _ratio(stats["right"], stats["written"]),
        "changes": _ratio(stats["changed"], stats["changes"]),
        "duplicate_rate": _ratio(stats["dups"], stats["facts"]),
        "first_person_leaks": stats["leaks"],
        "facts": stats["facts"],
        "written": stats["written"],
        "change_items": stats["changes"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", type=Path, default=DEFAULT_SET)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="list every miss, wrong fact and duplicate")
    args = parser.parse_args()
    rows = _load(args.set)
    creation = connection.creation
    connection.settings_dict["TEST"]["NAME"] = f"anima_bench_{os.getpid()}"
    creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    try:
        result = _measure(rows, verbose=args.verbose)
    finally:
        creation.destroy_test_db(connection.settings_dict["NAME"], verbosity=0)
    total = {k: result["stats"]["zh"][k] + result["stats"]["en"][k] for k in result["stats"]["zh"]}
    report = {
        "provider": settings.ANIMA_LLM_PROVIDER,
        "embeddings": settings.ANIMA_EMBEDDINGS,
        "zh": _report(result["stats"]["zh"]),
        "en": _report(result["stats"]["en"]),
        "all": _report(total),
        "idempotent": result["idempotent"],
        "cosines": result["cosines"],
    }
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
        return
    print(f"provider {report['provider']}, embeddings {report['embeddings']}, idempotent {report['idempotent']}")
    if report["cosines"]:
        print("cosine of same-fact pairs vs unrelated pairs of one person:", report["cosines"])
    print("set | recall | precision | changes | duplicates | first-person | facts | written | changes")
    for key in ("zh", "en", "all"):
        r = report[key]
        print(
            f"{key:>3} | {r['recall']:>6.1%} | {r['precision']:>9.1%} | {r['changes']:>7.1%} | "
            f"{r['duplicate_rate']:>10.1%} | {r['first_person_leaks']:>12} | {r['facts']:>5} | {r['written']:>7} | "
            f"{r['change_items']:>7}"
        )


if __name__ == "__main__":
    main()
