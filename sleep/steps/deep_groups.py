"""Which memories deep sleep looks at together: one owner's memories sharing a subject, or saying the same.

Groups only decide what a round shows the model side by side; what it may change is checked
in ``sleep.checks``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain, combinations

from anima.core.embeddings import EmbeddingsUnavailable
from anima.core.segmentation import text_simplified, words_cut
from anima.core.text import FUNCTION_WORDS
from memory.embedding import memory_vectors
from memory.models import SemanticMemory
from sleep.slots import Slot, memory_slot, same_slot

# Cosine from which two memories of one person are asked about together (contradiction) or offered as merge
# candidates. Measured with bench/offline_mind.py on the bundled local models: facts stating the same thing
# score 0.87-1.0, but unrelated facts of one person reach 0.965 (p99 0.93), so closeness alone never merges
# anything; it only adds the closest pairs (about 1 in 100) to what keywords and slots already group.
CONTRADICTION_COSINE = 0.93
DUPLICATE_COSINE = 0.93

# Relation and time words (and function words): sharing one says nothing about sharing a subject.
_GROUP_STOPWORDS = FUNCTION_WORDS | frozenset(
    "喜欢 更喜欢 以前 今年 周末 一名 最近 经常 很多 就是 认为 now really likes like loves love prefers prefer works "
    "lives used any some more most".split()
)


def subject_keywords(memory: SemanticMemory) -> set[str]:
    """Content words of a memory, without its person's name: two memories sharing one share a subject."""
    names = set()
    if memory.person:
        names = {memory.person.slug.casefold(), text_simplified(memory.person.display_name or "").casefold()}
    words = set()
    # Read in simplified characters, as the stop words are written (喜歡 is 喜欢).
    for token in words_cut(text_simplified(memory.content)):
        word = token.strip().casefold()
        if word in names or word in _GROUP_STOPWORDS or not any(ch.isalnum() for ch in word):
            continue
        if len(word) >= 2 if not word.isascii() else len(word) >= 3:
            words.add(word.rstrip("s") if word.isascii() and len(word) > 3 else word)
    return words


def memory_owner(memory: SemanticMemory) -> str:
    """Whose fact this is: a person, else the one conversation it came from (unknown humans never mix)."""
    if memory.person_id:
        return f"person:{memory.person_id}"
    if memory.source_conversation_id:
        return f"conversation:{memory.source_conversation_id}"
    return "global"


def _union_groups(memories: list[SemanticMemory], links: Iterable[tuple[int, int]]) -> list[list[SemanticMemory]]:
    """Connected components (size ≥ 2) of ``memories`` under the id pairs ``links``."""
    parent = {m.pk: m.pk for m in memories}

    def find(pk: int) -> int:
        while parent[pk] != pk:
            parent[pk] = parent[parent[pk]]
            pk = parent[pk]
        return pk

    for a, b in links:
        parent[find(a)] = find(b)
    groups: dict[int, list[SemanticMemory]] = {}
    for memory in memories:
        groups.setdefault(find(memory.pk), []).append(memory)
    return [group for group in groups.values() if len(group) >= 2]


def _keyword_links(memories: list[SemanticMemory]) -> Iterator[tuple[int, int]]:
    owners: dict[tuple[str, str], int] = {}
    for memory in memories:
        for word in subject_keywords(memory):
            key = (memory_owner(memory), word)
            if key in owners:
                yield memory.pk, owners[key]
            else:
                owners[key] = memory.pk


def _slot_links(memories: list[SemanticMemory]) -> Iterator[tuple[int, int]]:
    # The slot stored with a fact or read from it: grouping only shows the model two facts side by side.
    slotted = [(m, Slot.from_body(m.body) or memory_slot(m)) for m in memories]
    slotted = [(m, slot) for m, slot in slotted if slot is not None]
    for (a, slot_a), (b, slot_b) in combinations(slotted, 2):
        if memory_owner(a) == memory_owner(b) and same_slot(slot_a, slot_b):
            yield a.pk, b.pk


def similar_pairs(memories: list[SemanticMemory], *, threshold: float) -> list[tuple[int, int, float]]:
    """Pairs of one owner's memories whose embeddings' cosine is at least ``threshold``; [] without embeddings.

    The vectors are the backfill's stored ones where they exist (``memory_vectors``): a night embeds only
    what changed since, and compares each owner's memories among themselves only.
    """
    by_owner: dict[str, list[SemanticMemory]] = {}
    for memory in memories:
        by_owner.setdefault(memory_owner(memory), []).append(memory)
    compared = [group for group in by_owner.values() if len(group) >= 2]
    if not compared:
        return []
    try:
        vectors = memory_vectors(memories=[memory for group in compared for memory in group])
    except EmbeddingsUnavailable:
        return []
    import numpy as np  # here, not at start-up: only the night's deep sleep compares vectors

    pairs = []
    for group in compared:
        group = [memory for memory in group if memory.pk in vectors]  # one deleted meanwhile has none
        if len(group) < 2:
            continue
        matrix = np.array([vectors[memory.pk] for memory in group], dtype=np.float64)
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)  # stored ones are half floats
        cosines = matrix @ matrix.T
        for i, j in combinations(range(len(group)), 2):
            if cosines[i, j] >= threshold:
                pairs.append((group[i].pk, group[j].pk, float(cosines[i, j])))
    return pairs


def subject_groups(memories: list[SemanticMemory]) -> list[list[SemanticMemory]]:
    """Memories of one person about one subject: a shared keyword, the same slot or close embeddings."""
    similar = ((a, b) for a, b, _ in similar_pairs(memories, threshold=CONTRADICTION_COSINE))
    return _union_groups(memories, chain(_keyword_links(memories), _slot_links(memories), similar))


def merge_candidates(memories: list[SemanticMemory]) -> list[list[int]]:
    """Groups of one owner's memories whose embeddings are close enough to say the same thing."""
    pairs = [(a, b) for a, b, _ in similar_pairs(memories, threshold=DUPLICATE_COSINE)]
    return [sorted(m.pk for m in group) for group in _union_groups(memories, pairs)]
