"""Fit recall's score calibration (memory.search._fusion.CALIBRATION) on both dev sets, both languages.

Run from the repository root (``--data``: the folder holding madial/ and locomo/):

    python bench/recall/calibrate.py --data ../shared/bench

Into a throwaway database it loads the sets as ``bench_recall`` does, embeds them, and asks: every MADial
dialogue (its turns before the test turn) and its last user message (as passive recall reads it), every LoCoMo
question of session recall and of its facts, and the small-talk lines of bench/recall/smalltalk.jsonl (relevant
to nothing). Each query's first 20 hits are examples: the calibration's inputs (the hit's best keyword z-score and
its dense one, each capped) and whether it is relevant. A logistic regression is fitted with each set weighing
the same: with the dense branch on every set (``dense``) and on the Chinese ones alone (``dense-zh``, the fit a
Chinese query is scored by), and keyword-only; it prints each fit and how well it is calibrated (of the hits scored
in each tenth, the share relevant), and the same for the calibration in use.
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

import memory.search._fusion as fusion  # noqa: E402
from bench.recall._dev_sets import DevQuery, dev_sets_loaded  # noqa: E402
from memory.search import ALL_BRANCHES, KEYWORD_BRANCHES  # noqa: E402
from memory.selectors import memory_recall  # noqa: E402

TOP = 20
_fused: list[list] = []
_original = fusion.score_fuse


def _spy(**kwargs):
    hits = _original(**kwargs)
    _fused.append(hits)
    return hits


fusion.score_fuse = _spy  # what recall fused, with each hit's calibration inputs


def _collect(queries: list[DevQuery], branches) -> dict[str, list[tuple]]:
    """Per set, (keyword z, dense z or None, relevant) of each query's first TOP hits."""
    sets: dict[str, list[tuple]] = defaultdict(list)
    for query in queries:
        _fused.clear()
        memory_recall(limit=TOP, branches=branches, **query.recall)
        hits = _fused[0][:TOP] if _fused else []
        sets[query.set_name] += [(hit.keyword_z, hit.dense_z, query.relevant(hit.id)) for hit in hits]
    return sets


def _examples(sets: dict[str, list[tuple]], *, dense: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The features (capped z-scores and a constant), labels and weights (each set weighing the same) of ``sets``."""
    rows, weights = [], []
    for examples in sets.values():
        for keyword_z, dense_z, relevant in examples:
            dense_z = keyword_z if dense_z is None else dense_z
            features = [min(keyword_z, fusion.Z_CAP)] + ([min(dense_z, fusion.Z_CAP)] if dense else [])
            rows.append((features, float(relevant)))
            weights.append(1.0 / len(examples))
    x = np.array([[*features, 1.0] for features, _ in rows])
    y = np.array([label for _, label in rows])
    return x, y, np.array(weights) * len(rows) / sum(weights)


def _table(p: np.ndarray, y: np.ndarray) -> list[tuple]:
    """Of the hits scored in each tenth: (tenth, how many, the share relevant)."""
    table = []
    for tenth in range(10):
        chosen = (p >= tenth / 10) & (p < (tenth + 1) / 10)
        if chosen.any():
            table.append((tenth / 10, int(chosen.sum()), round(float(y[chosen].mean()), 2)))
    return table


def _scored(x: np.ndarray, beta: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x @ beta))


def _fit(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The coefficients of the logistic regression of ``y`` on ``x``, each example weighing ``w``."""
    beta = np.zeros(x.shape[1])
    for _ in range(100):  # Newton's method on the weighted log-loss
        p = _scored(x, beta)
        gradient = x.T @ (w * (p - y)) + 1e-3 * beta
        hessian = (x * (w * p * (1 - p))[:, None]).T @ x + 1e-3 * np.eye(len(beta))
        beta -= np.linalg.solve(hessian, gradient)
    return beta


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="the folder with madial/ and locomo/")
    args = parser.parse_args()
    with dev_sets_loaded(Path(args.data)) as queries:
        for branches, dense in ((ALL_BRANCHES, True), (KEYWORD_BRANCHES, False)):
            collected = _collect(queries, branches)
            chinese = {set_name: examples for set_name, examples in collected.items() if "-zh" in set_name}
            fits = (("dense", collected), ("dense-zh", chinese)) if dense else (("keyword", collected),)
            for name, sets in fits:
                _report(name, sets, dense=dense)


def _report(name: str, sets: dict[str, list[tuple]], *, dense: bool) -> None:
    """Fit calibration ``name`` on ``sets`` and print it beside the one in use."""
    x, y, w = _examples(sets, dense=dense)
    beta, in_use = _fit(x, y, w), np.array(fusion.CALIBRATION[name])
    counts = {set_name: len(examples) for set_name, examples in sets.items()}
    print(f"{name}: {tuple(round(float(b), 3) for b in beta)}  examples per set: {counts}", flush=True)
    print("  of the hits scored in each tenth, relevant:", _table(_scored(x, beta), y))
    print(f"  the same by the calibration in use {fusion.CALIBRATION[name]}:", _table(_scored(x, in_use), y))


if __name__ == "__main__":
    main()
