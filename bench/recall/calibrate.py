"""Fit recall's score calibration (memory.search._fusion.CALIBRATION) on both dev sets, both languages.

Run from the repository root (``--data``: the folder holding madial/ and locomo/):

    python bench/recall/calibrate.py --data ../shared/bench

Into a throwaway database it loads the sets as ``bench_recall`` does, embeds them, and asks: every MADial
dialogue (its turns before the test turn) and its last user message (as passive recall reads it), every LoCoMo
question of session recall and of its facts, and the small-talk lines of bench/recall/smalltalk.jsonl (relevant
to nothing). Each query's first 20 hits are examples: the calibration's inputs (the hit's best keyword z-score and
its dense one, each capped) and whether it is relevant. A logistic regression is fitted with each set weighing
the same, once with the dense branch and once keyword-only; it prints both fits and how well each is calibrated
(of the hits scored in each tenth, the share relevant).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anima.settings")

import django

django.setup()

import numpy as np  # noqa: E402
from django.db import connection  # noqa: E402

import memory.search._fusion as fusion  # noqa: E402
from anima.core.db import throwaway_database  # noqa: E402
from memory.benchmarks._common import smalltalk_lines  # noqa: E402
from memory.benchmarks.locomo import locomo_load  # noqa: E402
from memory.benchmarks.madial import LANGUAGES, madial_load, madial_read  # noqa: E402
from memory.embedding import embed_backfill_run  # noqa: E402
from memory.search import ALL_BRANCHES, KEYWORD_BRANCHES, search_text_plain, term_stats_clear  # noqa: E402
from memory.selectors import SEMANTIC, SESSION, memory_recall  # noqa: E402

TOP = 20
_fused: list[list] = []


def _spy(**kwargs):
    hits = _original(**kwargs)
    _fused.append(hits)
    return hits


_original = fusion.score_fuse
fusion.score_fuse = _spy  # what recall fused, with each hit's calibration inputs


def _examples(*, query: str, person, types: list[str], branches, relevant, passive: bool = False) -> list[tuple]:
    """(keyword z, dense z or None, relevant) of the first TOP hits of ``query``; ``relevant(hit id)``."""
    _fused.clear()
    memory_recall(
        query=search_text_plain(query) if passive else query,
        memory_types=types,
        limit=TOP,
        person=person,
        branches=branches,
        keyword_gate=passive,
        global_only=passive,
    )
    hits = _fused[0][:TOP] if _fused else []
    return [(hit.keyword_z, hit.dense_z, relevant(hit.id)) for hit in hits]


def _collect(branches) -> dict[str, list[tuple]]:
    sets: dict[str, list[tuple]] = defaultdict(list)
    for lang, (loaded, dialogues) in _MADIAL.items():
        _, persons, key_of = loaded
        for person, query, last, relevant in dialogues:

            def is_relevant(pk, relevant=relevant, key_of=key_of):
                return key_of.get(pk) in relevant

            sets[f"madial-{lang}"] += _examples(
                query=query, person=person, types=[SEMANTIC], branches=branches, relevant=is_relevant
            )
            sets[f"madial-{lang}-last"] += _examples(
                query=last, person=person, types=[SEMANTIC], branches=branches, relevant=is_relevant, passive=True
            )
        for line in smalltalk_lines(lang=lang):
            for person in list(persons.values())[:5]:
                sets[f"smalltalk-{lang}"] += _examples(
                    query=line,
                    person=person,
                    types=[SEMANTIC],
                    branches=branches,
                    relevant=lambda pk: False,
                    passive=True,
                )
    for sample in _LOCOMO:
        for question in sample.questions:
            evidence = set(question["evidence"])
            sets["locomo"] += _examples(
                query=question["question"],
                person=sample.person,
                types=[SESSION],
                branches=branches,
                relevant=lambda pk, evidence=evidence, keys=sample.message_key: keys.get(pk) in evidence,
            )
            sets["locomo-facts"] += _examples(
                query=question["question"],
                person=sample.person,
                types=[SEMANTIC],
                branches=branches,
                relevant=lambda pk, evidence=evidence, facts=sample.fact_sources: bool(facts.get(pk, set()) & evidence),
            )
    return sets


def _fit(sets: dict[str, list[tuple]], *, dense: bool) -> tuple[np.ndarray, list[tuple]]:
    rows, weights = [], []
    for examples in sets.values():
        for keyword_z, dense_z, relevant in examples:
            dense_z = keyword_z if dense_z is None else dense_z
            features = [min(keyword_z, fusion.Z_CAP)] + ([min(dense_z, fusion.Z_CAP)] if dense else [])
            rows.append((features, float(relevant)))
            weights.append(1.0 / len(examples))
    x = np.array([[*features, 1.0] for features, _ in rows])
    y = np.array([label for _, label in rows])
    w = np.array(weights) * len(rows) / sum(weights)
    beta = np.zeros(x.shape[1])
    for _ in range(100):  # Newton's method on the weighted log-loss
        p = 1.0 / (1.0 + np.exp(-x @ beta))
        gradient = x.T @ (w * (p - y)) + 1e-3 * beta
        hessian = (x * (w * p * (1 - p))[:, None]).T @ x + 1e-3 * np.eye(len(beta))
        beta -= np.linalg.solve(hessian, gradient)
    p = 1.0 / (1.0 + np.exp(-x @ beta))
    table = []
    for tenth in range(10):
        chosen = (p >= tenth / 10) & (p < (tenth + 1) / 10)
        if chosen.any():
            table.append((tenth / 10, int(chosen.sum()), round(float(y[chosen].mean()), 2)))
    return beta, table


_MADIAL: dict = {}
_LOCOMO: list = []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="the folder with madial/ and locomo/")
    args = parser.parse_args()
    data = Path(args.data)
    with throwaway_database():
        for lang in LANGUAGES:
            loaded = madial_load(data=data / "madial", lang=lang)
            _MADIAL[lang] = (loaded, madial_read(data=data / "madial", lang=lang, persons=loaded[1]))
        _LOCOMO.extend(locomo_load(data=data / "locomo"))
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        print("embedding …", flush=True)
        embed_backfill_run()
        term_stats_clear()
        for name, branches, dense in (("dense", ALL_BRANCHES, True), ("keyword", KEYWORD_BRANCHES, False)):
            sets = _collect(branches)
            beta, table = _fit(sets, dense=dense)
            print(
                f"{name}: {tuple(round(float(b), 3) for b in beta)}  (examples per set:",
                {set_name: len(examples) for set_name, examples in sets.items()},
                ")",
            )
            print("  of the hits scored in each tenth, relevant:", table, flush=True)


if __name__ == "__main__":
    main()
