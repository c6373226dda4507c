"""A query of several lines is judged by what its first hits share.

A stretch of conversation (a dialogue pasted as the query, passive recall's window of recent turns) is about a theme
more than one thing: what its first hits have in common is that theme. Once the branches are fused, the first
FEEDBACK_POOL hits are scored again by their similarity to the centroid of the first FEEDBACK_FIRST hits' vectors,
each weighted by its score (pseudo-relevance feedback): its z-score over those hits, less the best hit's own, times
FEEDBACK_WEIGHT, is added to each hit's log-odds. The best hit keeps its score, a hit nearer the first ones gains, a
hit further from them loses, so the scores stay calibrated (of MADial's hits scored 0.5-0.6, 81 % relevant before
and 83 % after; 0.3-0.4, 52 % and 56 %). On MADial, whose queries are dialogues, R@10 rose 71.9 -> 73.9 (zh) and
70.0 -> 71.5 (en) with e5 alone in the dense branch: the memories judged related to the one a dialogue recalls share
its theme, not its words. On the local models' joint vectors, whose dense branch finds more of that theme itself, it
moves R@10 by less than the dev sets' standard error either way (docs/benchmarks.md, Fusion methods) and
passive recall by a few tenths; it is kept for a dense branch as weak as e5 alone was (an ``openai`` provider's
model may be), where it gained. A one-line question is left as it is: what its first hits share is often the lines
around its answer, not more answers (feedback on every query lost about 2 points of R@10 on LoCoMo's questions
1-4, ``bench/recall/fusion_methods.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from anima.core.embeddings import EmbeddingModel
from anima.core.vectors import vectors_fetch
from memory.search._context import _logit, _probability
from memory.search._sources import SourceSpec

FEEDBACK_FIRST = 3
FEEDBACK_POOL = 40
FEEDBACK_WEIGHT = 0.5


def feedback_apply(*, hits: list, sources: Sequence[SourceSpec], model: EmbeddingModel, using: str, top: int) -> bool:
    """Score ``hits`` (in score order) again by their similarity to their first hits (in place); True when scores
    changed. The first max(``top``, FEEDBACK_POOL) hits are compared; every hit after them counts the least
    similarity among them (it ranked below them all). One of them without a vector yet (written since the last
    backfill, or edited) keeps its score: its meaning is not known, as its words were judged alone when fused."""
    pool = hits[: max(top, FEEDBACK_POOL)]
    kinds = {source.name: source.vector_kind for source in sources if source.vector_kind}
    vectors = hit_vectors(hits=pool, kinds=kinds, model=model, using=using)
    keys = [(hit.source, hit.id) for hit in pool if (hit.source, hit.id) in vectors]
    if len(keys) < 2:
        return False
    first = keys[:FEEDBACK_FIRST]
    # Each first hit counts as much as it is likely relevant: one clear hit is not blurred by two weak ones beside
    # it (a new person's few memories). Plain Python (40 dot products of 896 numbers, a millisecond or two): numpy
    # is not loaded with Django.
    weights = {(hit.source, hit.id): hit.score for hit in pool}
    total = sum(weights[key] for key in first) or 1.0
    centroid = [
        sum(weights[key] * value for key, value in zip(first, values, strict=True)) / total
        for values in zip(*(vectors[key] for key in first), strict=True)
    ]
    similarity = [sum(a * b for a, b in zip(vectors[key], centroid, strict=True)) for key in keys]
    mean = sum(similarity) / len(similarity)
    spread = math.sqrt(sum((value - mean) ** 2 for value in similarity) / len(similarity))
    if not spread:
        return False
    z = {key: (value - mean) / spread for key, value in zip(keys, similarity, strict=True)}
    # The best hit keeps its score: what is offered beside it is measured against it (passive recall's share).
    anchor = z[first[0]]
    floor = min(z.values())
    for hit in hits:
        key = (hit.source, hit.id)
        moved = _logit(hit.score) + FEEDBACK_WEIGHT * (z.get(key, anchor if key in weights else floor) - anchor)
        hit.score = _probability(moved)
    return True


def hit_vectors(
    *, hits: Sequence, kinds: dict[str, str], model: EmbeddingModel, using: str
) -> dict[tuple[str, int], list[float]]:
    """The stored vectors of ``hits`` by (source, id), each fetched by its source's vector kind (``kinds``):
    messages and entities are numbered apart. A hit without one is left out."""
    vectors: dict[tuple[str, int], list[float]] = {}
    for kind in set(kinds.values()):
        mine = [hit for hit in hits if kinds.get(hit.source) == kind]
        found = vectors_fetch(kind=kind, model=model, row_ids=[hit.id for hit in mine], using=using)
        vectors.update({(hit.source, hit.id): found[hit.id] for hit in mine if hit.id in found})
    return vectors
