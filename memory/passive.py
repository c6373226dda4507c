"""Passive recall: the memories a turn is offered unasked, for the latest user message.

A message that names nothing is offered nothing; otherwise it is read alone and after the conversation's latest
messages, and what a keyword branch found is offered when its calibrated score says it is likely relevant.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from anima.core.config import config_get
from anima.core.segmentation import text_asks, text_in_script_of, text_naming_words, text_word_count
from conversations.models import Conversation, Person, Role
from conversations.selectors import conversation_language, conversation_script, messages_latest
from memory.citations import cited_ids
from memory.models import SemanticMemory
from memory.search import KEYWORD_BRANCHES, SearchTimeout, search_text_plain
from memory.selectors import memory_line, memory_semantic_search
from memory.subjects import ENTITY_BRANCH
from memory.subjects.selectors import profile_q

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PassiveRecall:
    """Semantic hits for the latest user message, as the runtime-only ``passive_memory_context`` message."""

    hits: list[dict[str, Any]]
    text: str

    NAME = "passive_memory_context"

    def as_message(self) -> dict[str, str] | None:
        if not self.text:
            return None
        return {"role": "assistant", "name": self.NAME, "content": self.text}


# What the passive_memory_context message says its lines are, in the conversation's language.
PASSIVE_HEADING = {"en": "Possibly relevant memories:", "zh": "可能相关的记忆："}


# The most words a reaction has (a Chinese word counted every two characters): "sounds like a plan", 「晓得了」.
REACTION_WORDS = 4


def passive_recall(
    *,
    conversation: Conversation,
    user_message: str,
    person: Person | None = None,
    language: str | None = None,
    script: str | None = None,
) -> PassiveRecall:
    """Semantic memories relevant to ``user_message``, cut by score; never persisted.

    ``person`` is the human behind the conversation (default: ``conversation.person``); with none, only
    global memories are candidates. ``language`` frames the message (``conversation_language``, read when
    not given), its Chinese in ``script``'s characters (``conversation_script``, read when not given). The
    candidates are ``passive_candidates``'s, offered as ``passive_chosen`` cuts them, at most ``limit`` and
    ``max_chars``. Skipped for cron conversations.
    """
    config = config_get(section="memory.passive_recall")
    if not config["enabled"] or conversation.is_cron:
        return PassiveRecall(hits=[], text="")
    found = passive_candidates(conversation=conversation, user_message=user_message, person=person)
    chosen = passive_chosen(
        found=found,
        min_score=config["min_score"],
        min_share_of_best=config["min_share_of_best"],
        min_relative_score=config["min_relative_score"],
    )
    hits, lines, used = [], [], 0
    for hit in chosen[: config["limit"]]:
        line = memory_line(content=hit["snippet"], entity_id=hit["id"])
        if used + len(line) + 1 > config["max_chars"]:
            break
        hits.append(hit)
        lines.append(line)
        used += len(line) + 1
    if not lines:
        return PassiveRecall(hits=hits, text="")
    heading = PASSIVE_HEADING[language or conversation_language(conversation=conversation, pending=user_message)]
    if script is None:
        script = conversation_script(conversation=conversation, pending=user_message)
    return PassiveRecall(hits=hits, text=text_in_script_of(heading, like=script) + "\n" + "\n".join(lines))


def passive_candidates(
    *, conversation: Conversation, user_message: str, person: Person | None = None
) -> list[list[dict[str, Any]]]:
    """The memories passive recall may offer for ``user_message``: for each reading of it, those a keyword branch
    found, best first (none when it names nothing).

    A message that names nothing (``text_informative``: greetings, thanks, "lol ok") is offered nothing, whatever
    came before it. Otherwise the message is read twice: alone, and after the conversation's latest messages
    (``memory.passive_recall``'s ``context_messages``, the turn it answers among them: "I'm looking forward to that
    evening" says which evening only there). A short reaction that names one word and asks nothing ("nailed it",
    「稳」) is read alone. What the system prompt snapshot cites already is left out (``exclude_resident``).
    """
    config = config_get(section="memory.passive_recall")
    naming = text_naming_words(user_message or "")
    if not naming:
        return []
    person = person or conversation.person
    readings = [user_message]
    # A short reaction naming one word ("nailed it", "that's insane", 「稳」, "nite nite": a word said twice is one)
    # adds nothing to the exchange before it: read after it, it would be offered that exchange's memories again. A
    # question, a longer message or one naming two things goes on from there.
    if len(set(naming)) > 1 or text_asks(user_message) or text_word_count(user_message) > REACTION_WORDS:
        recent = passive_context(conversation=conversation, user_message=user_message, count=config["context_messages"])
        if recent:
            readings.append("\n".join([*recent, user_message]))
    try:
        found = _found_by_words(readings=readings, person=person, pool=max(config["limit"] * 4, 20))
    except ValueError:
        # A chat message is not a search query: operator slips must not break the turn.
        return []
    except SearchTimeout:
        # Nor may a slow search: the turn goes on without passive memories.
        logger.warning(
            "passive recall timed out for conversation %s; the turn has no passive memories", conversation.pk
        )
        return []
    if not config["exclude_resident"]:
        return found
    # What the system prompt snapshot shows (resident and person memory, cited there) is not repeated; a memory
    # pinned since is not in it, so it may come here until the next snapshot shows it.
    shown = cited_ids(conversation.system_prompt or "")
    return [[hit for hit in reading if hit["id"] not in shown] for reading in found]


def passive_chosen(
    *, found: Sequence[Sequence[dict[str, Any]]], min_score: float, min_share_of_best: float, min_relative_score: float
) -> list[dict[str, Any]]:
    """What passive recall offers of ``found`` (``passive_candidates``), likeliest first, a memory scoring the better
    of its readings.

    With vectors, the memories whose calibrated score (the chance that it is relevant) for a reading is at least
    ``min_score`` and ``min_share_of_best`` of that reading's best: by default the likeliest memory of each reading,
    beside any as likely. Without (keyword-only recall, whose scores are not that telling), those within
    ``min_relative_score`` of the best.
    """
    best: dict[int, dict[str, Any]] = {}
    for hit in (hit for reading in found for hit in reading):
        if hit["score"] > best.get(hit["id"], {}).get("score", -1):
            best[hit["id"]] = hit
    candidates = sorted(best.values(), key=lambda hit: -hit["score"])
    if not candidates:
        return []
    if any("dense" in hit["scores"] for hit in candidates):
        # Scores are calibrated (memory.search.score_fuse): a memory is offered when it is likely enough relevant,
        # and (by default) the likeliest of a reading: a second, slightly weaker memory mostly joined a turn that had
        # a relevant one already; left out, the dev sets keep their precision at a looser cut-off, and a relevant
        # memory is offered in more turns on every one. The message alone and the exchange it ends may be about
        # different things (the cinema a reply names, the knee surgery the question before it asked about), and each
        # reading's likeliest memory is offered (docs/benchmarks.md).
        chosen = {
            hit["id"]
            for reading in found
            for hit in reading
            if hit["score"] >= max(min_score, reading[0]["score"] * min_share_of_best)
        }
    else:
        # Keyword-only recall (no vectors here) cannot tell a relevant memory from one sharing a word with the
        # message (on the dev sets none of its scores means better than 1 in 3): it offers the best keyword hits,
        # and what a subject the message names brought.
        by_words = [hit["score"] for hit in candidates if set(hit["scores"]) & set(KEYWORD_BRANCHES)]
        cutoff = max(by_words, default=candidates[0]["score"]) * min_relative_score
        chosen = {hit["id"] for hit in candidates if hit["score"] >= cutoff}
    return [hit for hit in candidates if hit["id"] in chosen]


def passive_context(*, conversation: Conversation, user_message: str, count: int) -> list[str]:
    """The texts of the conversation's ``count`` latest messages before ``user_message``, oldest first.

    A turn is assembled before its message is stored, but a tool round resends a message stored already: a latest
    user message equal to it is the message itself, not its context.
    """
    latest = messages_latest(conversation=conversation, count=count + 1)
    if latest and latest[-1].role == Role.USER and latest[-1].content == user_message:
        latest.pop()
    return [message.content for message in latest[-count:]] if count else []


def _found_by_words(*, readings: Sequence[str], person: Person | None, pool: int) -> list[list[dict[str, Any]]]:
    """For each of ``readings`` (the message alone first), the memories a keyword branch found for it, best first."""
    by_reading = []
    for index, reading in enumerate(readings):
        # Only what a keyword branch found is offered: small talk no word of which matches costs no model call.
        # A subject is brought in (at its prior, above most direct hits) only when the message itself names it: one
        # named a few turns back would otherwise be offered on every turn after, whatever the message is about, in
        # place of what it asks (the cat's profile for "should I get the satay?" beside a peanut allergy). The turns
        # before still count by their words.
        found = memory_semantic_search(
            query=search_text_plain(reading),
            limit=pool,
            person=person,
            global_only=True,
            keyword_gate=True,
            entities=index == 0,
        )
        # Unasked, a memory needs a word of the message (or of the turns it follows) behind it: the dense branch
        # ranks every memory by meaning, so any message has a nearest one. A subject the message names is such a word.
        by_reading.append([hit for hit in found if set(hit["scores"]) & {*KEYWORD_BRANCHES, ENTITY_BRANCH}])
    # A profile says again what its subject's facts say, and the person's facts are in the system prompt already: it
    # is offered when the message names its subject (it then gathers them), not for a word it shares with the
    # message. The person's own profile holds every word of their life and would otherwise come with any message.
    words_only = {hit["id"] for found in by_reading for hit in found if ENTITY_BRANCH not in hit["scores"]}
    profiles = set(SemanticMemory.objects.filter(profile_q(), pk__in=words_only).values_list("pk", flat=True))
    return [
        sorted(
            (hit for hit in found if hit["id"] not in profiles or ENTITY_BRANCH in hit["scores"]),
            key=lambda hit: -hit["score"],
        )
        for found in by_reading
    ]
