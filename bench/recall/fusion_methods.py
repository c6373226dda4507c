"""Fusion methods compared on both dev sets: R@10 of each, over the same candidates of every branch.

Run from the repository root (``--data``: the folder holding madial/ and locomo/):

    python bench/recall/fusion_methods.py --data ../shared/bench

Each query of MADial (zh, en: dialogues over memories), LoCoMo (questions over turns, categories 1-4 and 5) and
the chats written for this project (``bench/recall/chats``, questions 1-4, as LoCoMo's) is asked once with every
branch; the branches' candidates (MIN_POOL a branch) are then ranked by each method: weighted means of z-scores (the
default's even mix and others), of min-max normalised scores, CombMNZ, reciprocal rank fusion, and the default's
calibrated score, which orders what recall returns. The default judges a query of several lines (MADial's
dialogues) by what its first hits share (``memory.search._feedback``); a row gives the default without that. Two
methods re-rank the default's fused list (before that feedback) with its first hits as feedback on every query
(their vectors' centroid): pseudo-relevance feedback adds each hit's z-scored similarity to that centroid to its
log-odds (also with only first hits scored 0.5 or more, confident ones, as feedback); Rocchio moves the dense z-score
part of the way toward it before the calibration. It also prints how often the default's first hit is relevant
(passive recall can offer no more often a relevant memory at that precision), and the dense and keyword branches as
recall ranks them alone (``bench_recall``'s rows).

Two rows are bounds, not methods: with the answers known, the better of the default's list and the dense branch's
for each query, and the best keyword weight for each query (the calibration's keyword slope × 0 to × 10, recall's
list ranked again). No keyword weight in that range that follows the query does better than the second.

Beside each method's R@10 it prints its difference to the default over the same queries, ± the standard error of
that paired difference: a set of 160 dialogues (MADial, per language) cannot tell apart methods a point or so apart.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anima.settings")

import django

django.setup()

import numpy as np  # noqa: E402
from django.db import DEFAULT_DB_ALIAS  # noqa: E402

import memory.search._fusion as fusion  # noqa: E402
import memory.selectors as selectors  # noqa: E402
from anima.core.embeddings import embedding_model  # noqa: E402
from anima.core.vectors import ENTITY, MESSAGE  # noqa: E402
from bench.recall._dev_sets import dev_sets_loaded  # noqa: E402
from memory.benchmarks._common import BRANCHES, paired_difference  # noqa: E402
from memory.search import query_fit  # noqa: E402
from memory.search._context import _logit  # noqa: E402
from memory.search._feedback import hit_vectors  # noqa: E402
from memory.selectors import memory_recall  # noqa: E402

K = 10
DEFAULT = "calibrated score (the default)"
FIRST = "the default's first hit is relevant (%)"
SETS = ("madial-zh", "madial-en", "locomo 1-4", "locomo 5", "chats-zh 1-4", "chats-en 1-4")
# A keyword weight that follows the query, chosen query by query with the answers known: a bound, not a method.
SLOPES = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0)
BOUND_SWITCH = "bound: the better of the default and the dense branch, query by query"
BOUND_SLOPE = "bound: the best keyword weight (× 0 to × 10), query by query"
_rows: list[list] = []
_original = fusion.score_fuse


def _spy(**kwargs):
    _rows.append(list(kwargs["rows"]))
    return _original(**kwargs)


fusion.score_fuse = _spy  # the branches' candidates of each recall
_hits: list[list] = []
_original_search = selectors.hybrid_search


def _search_spy(**kwargs):
    hits = _original_search(**kwargs)
    _hits.append(hits)
    return hits


selectors.hybrid_search = _search_spy  # the default's whole ordered list, each hit's calibration inputs with it
_unfed: list[list] = []
_original_feedback = fusion.feedback_apply


def _feedback_spy(**kwargs):
    _unfed.append([dataclasses.replace(hit) for hit in kwargs["hits"]])
    return _original_feedback(**kwargs)


fusion.feedback_apply = _feedback_spy  # a query of several lines: its fused list before the feedback


def _normalised(scores: dict, how: str) -> tuple[dict, float]:
    """Each candidate's normalised score, and what a candidate the branch did not find counts."""
    values = list(scores.values())
    if how == "z":
        mean = sum(values) / len(values)
        spread = math.sqrt(sum((value - mean) ** 2 for value in values) / len(values))
        if not spread:
            return dict.fromkeys(scores, 1.0), -1.0
        normalised = {key: (value - mean) / spread for key, value in scores.items()}
        return normalised, min(normalised.values())
    low, high = min(values), max(values)
    return {key: (value - low) / (high - low) if high > low else 1.0 for key, value in scores.items()}, 0.0


def _ranked(rows: list, method: str, weights: dict[str, float]) -> list[int]:
    branches: dict[str, dict] = defaultdict(dict)
    for source, branch, row_id, _, score in rows:
        branches[branch][(source, row_id)] = float(score)
    keys = {key for scores in branches.values() for key in scores}
    total: dict = defaultdict(float)
    if method == "rrf":
        for branch, scores in branches.items():
            for rank, key in enumerate(sorted(scores, key=lambda key: -scores[key]), 1):
                total[key] += weights.get(branch, 0.0) / (60 + rank)
    else:
        how, mnz = method.split("-")[0], method.endswith("mnz")
        normalised = {branch: _normalised(scores, how) for branch, scores in branches.items()}
        for key in keys:
            found = sum(key in branches[branch] for branch in weights if branch in branches)
            mixed = sum(
                weight * normalised[branch][0].get(key, normalised[branch][1])
                for branch, weight in weights.items()
                if branch in branches
            )
            total[key] = mixed * (found if mnz else 1)
    return [row_id for _, row_id in sorted(keys, key=lambda key: -total[key])]


def _feedback(
    hits: list, method: str, *, top: int = 3, weight: float, gate: float = 0.0, fit: str = "dense"
) -> list[int]:
    """The default's ``hits`` re-ranked with their first ``top`` hits' centroid as feedback (see the docstring);
    with a ``gate``, only those of the first hits scored at least that are feedback (none: the default's order).
    ``fit``: the calibration the query's hits are scored by (``memory.search.query_fit``)."""
    kinds = {hit.source: MESSAGE if hit.source == selectors.SESSION else ENTITY for hit in hits}
    found = hit_vectors(hits=hits, kinds=kinds, model=embedding_model(), using=DEFAULT_DB_ALIAS)
    vectors = {key: np.array(vector) for key, vector in found.items()}
    first = [
        vectors[(hit.source, hit.id)] for hit in hits[:top] if (hit.source, hit.id) in vectors and hit.score >= gate
    ]
    if not first:
        return [hit.id for hit in hits]
    centroid = np.mean(first, axis=0)
    keys = [key for key in ((hit.source, hit.id) for hit in hits) if key in vectors]
    similarity = np.array([vectors[key] @ centroid for key in keys])
    z = dict(zip(keys, (similarity - similarity.mean()) / (similarity.std() or 1.0), strict=True))
    floor = min(z.values())
    mixed = {}
    for hit in hits:
        toward = z.get((hit.source, hit.id), floor)
        if method == "prf":
            mixed[hit.id] = _logit(hit.score) + weight * toward
        else:
            dense_z = hit.keyword_z if hit.dense_z is None else hit.dense_z
            moved = (1.0 - weight) * dense_z + weight * toward
            mixed[hit.id] = fusion._calibrated(keyword_z=hit.keyword_z, dense_z=moved, dense=True, fit=fit)
    return sorted(mixed, key=lambda row_id: -mixed[row_id])


DENSE_ROW = "the dense branch, as recall ranks it"
BRANCH_ROWS = (
    (DENSE_ROW, BRANCHES["dense"]),
    ("the keyword branches, as recall ranks them", BRANCHES["anima_keyword"]),
)


def _reweighed(hits: list, *, slope: float, fit: str) -> list[int]:
    """``hits`` (recall's list) ranked again with the calibration's keyword slope × ``slope``: each hit's log-odds
    moved by what the change of slope moves, whatever else recall added to it (feedback, a neighbour's pull)."""
    slope_keyword = fusion.CALIBRATION[fit][0]
    moved = {
        hit.id: _logit(hit.score) + (slope - 1.0) * slope_keyword * min(hit.keyword_z, fusion.Z_CAP) for hit in hits
    }
    return sorted(moved, key=lambda row_id: -moved[row_id])


# (label, method, weight, gate)
FEEDBACK = (
    ("pseudo-relevance feedback, first 3 hits, weight 0.5", "prf", 0.5, 0.0),
    ("pseudo-relevance feedback, first 3 hits, weight 0.2", "prf", 0.2, 0.0),
    ("pseudo-relevance feedback, weight 0.5, first 3 hits scored 0.5 or more", "prf", 0.5, 0.5),
    ("Rocchio, dense moved 0.3 toward the first 3 hits", "rocchio", 0.3, 0.0),
)

METHODS = (
    ("z-scores, dense 0.5 / full-text 0.5 / trigram 0.1", "z", {"dense": 0.5, "fts": 0.5, "trigram": 0.1}),
    ("z-scores, dense 0.7 / full-text 0.3 / trigram 0.1", "z", {"dense": 0.7, "fts": 0.3, "trigram": 0.1}),
    ("z-scores, dense 0.4 / full-text 0.6", "z", {"dense": 0.4, "fts": 0.6}),
    ("z-scores, dense 0.6 / full-text 0.4", "z", {"dense": 0.6, "fts": 0.4}),
    ("min-max, dense 0.5 / full-text 0.5", "mm", {"dense": 0.5, "fts": 0.5}),
    ("min-max, dense 0.6 / full-text 0.4 / trigram 0.1", "mm", {"dense": 0.6, "fts": 0.4, "trigram": 0.1}),
    ("CombMNZ over z-scores, 0.5 / 0.5", "z-mnz", {"dense": 0.5, "fts": 0.5}),
    ("CombMNZ over min-max, 0.5 / 0.5", "mm-mnz", {"dense": 0.5, "fts": 0.5}),
    ("RRF (k 60), dense + full-text", "rrf", {"dense": 1.0, "fts": 1.0}),
    ("RRF (k 60), every branch", "rrf", {"dense": 1.0, "fts": 1.0, "trigram": 1.0}),
    ("full-text alone", "z", {"fts": 1.0}),
    ("dense alone", "z", {"dense": 1.0}),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="the folder with madial/ and locomo/")
    args = parser.parse_args()
    found: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    with dev_sets_loaded(Path(args.data), chats=True) as queries:
        for query in queries:
            if query.set_name not in ("madial-zh", "madial-en", "locomo", "chats-zh", "chats-en"):
                continue
            name = query.set_name
            if not name.startswith("madial"):
                name = f"{name} {'5' if query.category == 5 else '1-4'}"
            _rows.clear()
            _hits.clear()
            _unfed.clear()
            returned = memory_recall(limit=K, **query.recall)
            rows = _rows[0] if _rows else []
            hits = _unfed[0] if _unfed else _hits[0] if _hits else []  # fused, before any feedback
            relevant = {row_id for _, _, row_id, _, _ in rows if query.relevant(row_id)}
            wanted = query.wanted  # a relevant row no branch found is missed by every method
            found[DEFAULT][name].append(len(relevant & {hit["id"] for hit in returned}) / wanted)
            found[FIRST][name].append(float(bool(returned) and returned[0]["id"] in relevant))
            unfed = [hit.id for hit in sorted(hits, key=fusion.hit_order)]
            found["the default without feedback (every query as one of one line)"][name].append(
                len(relevant & set(unfed[:K])) / wanted
            )
            fit = query_fit(query.recall["query"])  # the calibration recall scored this query by
            for label, method, weight, gate in FEEDBACK:
                ranked = _feedback(hits, method, weight=weight, gate=gate, fit=fit)
                found[label][name].append(len(relevant & set(ranked[:K])) / wanted)
            for label, method, weights in METHODS:
                found[label][name].append(len(relevant & set(_ranked(rows, method, weights)[:K])) / wanted)
            final = _hits[0] if _hits else []  # as recall ranks them: feedback, pulls and lowering included
            for label, branches in BRANCH_ROWS:
                only = {hit["id"] for hit in memory_recall(limit=K, branches=branches, **query.recall)}
                found[label][name].append(len(relevant & only) / wanted)
            found[BOUND_SWITCH][name].append(max(found[DEFAULT][name][-1], found[DENSE_ROW][name][-1]))
            by_slope = [len(relevant & set(_reweighed(final, slope=slope, fit=fit)[:K])) / wanted for slope in SLOPES]
            found[BOUND_SLOPE][name].append(max(by_slope))
    print(f"R@{K} (difference to the default ± its standard error) | " + " | ".join(SETS))
    for label, figures in found.items():
        cells = (_cell(figures[name], None if label in (DEFAULT, FIRST) else found[DEFAULT][name]) for name in SETS)
        print(f"{label} | " + " | ".join(cells))


def _cell(values: list[float], default: list[float] | None) -> str:
    """A method's mean over a set's queries (%), and with ``default`` (the default's, query by query) the paired
    difference to it ± that difference's standard error."""
    if not values:
        return "—"
    mean = 100 * float(np.mean(values))
    if default is None:
        return f"{mean:.1f}"
    difference, error = paired_difference(values=values, baseline=default)
    return f"{mean:.1f} ({100 * difference:+.1f} ± {100 * error:.1f})"


if __name__ == "__main__":
    main()
