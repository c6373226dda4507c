"""A chat line is judged with the turns beside it, and by whether it says anything.

"Yes, last week!" says nothing alone; the question it answers does. Once the branches are fused, a
message hit whose previous or next turn (same conversation, by time) scored better is pulled part of the
way toward that neighbour: its calibrated log-odds move NEIGHBOUR_PULL of the gap. A line is never pushed
down by a weaker neighbour, and other sources are left as they are. On both LoCoMo splits this raised
R@10 by 3-5 points (bench/recall/fusion_methods.py); MADial searches memories, not lines, and is unchanged.

"How was Thanksgiving?" is the other way round: it matches a question about Thanksgiving by meaning and
words, yet only asks (``anima.core.segmentation.asks_only``), and what it asks about is in the turn after it. Such a
line first pulls its neighbours as any line does, then its own log-odds drop by ASKING_SHIFT.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from django.db import connections

from anima.core.segmentation import asks_only
from memory.search._sources import SourceSpec

# Halfway: a line next to a likely answer is itself likelier to be relevant, but less than that answer.
NEIGHBOUR_PULL = 0.5
# A line that only asks is an evidence turn of LoCoMo's questions 3.0 % of the time, any other line 25.7 % (12 of
# 394, 1,413 of 5,488): odds about 11 times lower, ln(0.091) = -2.4. On the sets written for this project
# (bench/recall/chats) 1 of 146 against 231 of 789. R@10 is flat from -2 to -3 on all four (docs/benchmarks.md,
# "Chats written for this project").
ASKING_SHIFT = -2.4

# The user/assistant turns just before and after each line (the timeline index, two probes a line).
_NEIGHBOURS_SQL = """
SELECT m.id, m.content,
  (SELECT p.id FROM messages p WHERE p.conversation_id = m.conversation_id AND p.role IN ('user', 'assistant')
     AND (p.created_at, p.id) < (m.created_at, m.id) ORDER BY p.created_at DESC, p.id DESC LIMIT 1),
  (SELECT n.id FROM messages n WHERE n.conversation_id = m.conversation_id AND n.role IN ('user', 'assistant')
     AND (n.created_at, n.id) > (m.created_at, m.id) ORDER BY n.created_at, n.id LIMIT 1)
FROM messages m WHERE m.id = ANY(%s)
"""


def _logit(p: float) -> float:
    p = min(max(p, 1e-9), 1.0 - 1e-9)
    return math.log(p / (1.0 - p))


def _probability(logit: float) -> float:
    return 1.0 / (1.0 + math.exp(-logit))


def lines_judged(*, hits: list, sources: Sequence[SourceSpec], using: str, top: int) -> bool:
    """Pull each message hit toward its better-scored neighbouring turn, then lower each of the first ``top`` that
    only asks (in place); True when a score changed.

    ``hits`` are in score order, and the first ``top`` of them come out as a pull of every hit would order them:
    a pull moves a line only toward a better neighbour and scores only rise, so a line ends among the first
    ``top`` only beside one that was there already. Only those lines' neighbours are looked up (two probes a line:
    30 lines rather than the 200 candidates of a search with the dense branch). Lowering a line that only asks
    can leave room among them for a line from further down, ordered by its score without a pull: a pull needs a
    better neighbour, which such a line seldom has (its neighbours are further down too)."""
    lines = {source.name for source in sources if source.table == "messages"}
    ids = [hit.id for hit in hits[:top] if hit.source in lines]
    if not ids:
        return False
    beside: dict[int, list[int]] = {}
    with connections[using].cursor() as cursor:
        cursor.execute(_NEIGHBOURS_SQL, [ids])
        rows = cursor.fetchall()
    asking = {row_id for row_id, content, *_ in rows if asks_only(content)}
    for row_id, _, *around in rows:
        # Turns are neighbours both ways: the line before a found line has it as its next.
        for other in filter(None, around):
            beside.setdefault(row_id, []).append(other)
            beside.setdefault(other, []).append(row_id)
    before_pull = {(hit.source, hit.id): _logit(hit.score) for hit in hits if hit.source in lines}
    changed = False
    for hit in hits:
        if hit.source not in lines:
            continue
        own = before_pull[(hit.source, hit.id)]
        around = [(hit.source, other) for other in beside.get(hit.id, ())]
        best = max((before_pull[key] for key in around if key in before_pull), default=own)
        judged = own + (NEIGHBOUR_PULL * (best - own) if best > own else 0.0)
        judged += ASKING_SHIFT if hit.id in asking else 0.0
        if judged != own:
            hit.score = _probability(judged)
            changed = True
    return changed
