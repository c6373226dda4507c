"""Test and benchmark helpers: answers of a stand-in model for the sleep cycle, over real HTTP.

``light_sleep_responder`` answers a chat-completions request body of any light-sleep stage (found
by its instructions) with a small valid answer drawn from the request, so a ``StubLlmServer`` can
stand in for the model of worker processes. ``offline_responder`` answers any call of the night
as the offline provider would, and ``sleep_purpose`` says which call a request body is.
"""

from __future__ import annotations

import json

from anima.core.llm.offline import offline_handler_get
from sleep.steps.deep_prompts import (
    CONTRADICTION_INSTRUCTIONS,
    MERGE_INSTRUCTIONS,
    PINS_INSTRUCTIONS,
    SPLIT_INSTRUCTIONS,
)
from sleep.steps.dream import DREAM_INSTRUCTIONS
from sleep.steps.light import LIMBIC_INSTRUCTIONS, NARRATIVE_INSTRUCTIONS, SEMANTIC_INSTRUCTIONS
from sleep.steps.light_outline import OUTLINE_INSTRUCTIONS
from sleep.steps.self_layer import SELF_LAYER_INSTRUCTIONS
from sleep.steps.subject_profiles import PROFILE_INSTRUCTIONS, PROFILE_PURPOSE
from temporal.rollup import ROLLUP_INSTRUCTIONS
from temporal.services import DAY_INSTRUCTIONS, MONTH_INSTRUCTIONS, YEAR_INSTRUCTIONS
from temporal.tick import CHUNK_INSTRUCTIONS

# A request carries no purpose: its system message holds the instructions of exactly one of these.
_PURPOSES = {
    SEMANTIC_INSTRUCTIONS: "light-sleep.semantic",
    LIMBIC_INSTRUCTIONS: "light-sleep.limbic",
    NARRATIVE_INSTRUCTIONS: "light-sleep.narrative",
    OUTLINE_INSTRUCTIONS: "light-sleep.outline",
    CONTRADICTION_INSTRUCTIONS: "deep-sleep.contradiction",
    SPLIT_INSTRUCTIONS: "deep-sleep.split",
    MERGE_INSTRUCTIONS: "deep-sleep.merge",
    PINS_INSTRUCTIONS: "deep-sleep.pins",
    DREAM_INSTRUCTIONS: "dream",
    SELF_LAYER_INSTRUCTIONS: "self-layer",
    PROFILE_INSTRUCTIONS: PROFILE_PURPOSE,
    DAY_INSTRUCTIONS: "temporal.day",
    MONTH_INSTRUCTIONS: "temporal.month",
    YEAR_INSTRUCTIONS: "temporal.year",
    # Not of the night, but of the day the demo goes on to: its half-hourly chunks and peer digests.
    CHUNK_INSTRUCTIONS: "temporal.chunk",
    ROLLUP_INSTRUCTIONS: "temporal.peer-rollup",
}


def sleep_purpose(body: dict) -> str:
    """The purpose of a sleep-cycle (or temporal) call, from its chat-completions request body."""
    system = body["messages"][0]["content"]
    found = [purpose for instructions, purpose in _PURPOSES.items() if instructions in system]
    if len(found) != 1:
        raise ValueError(f"not one sleep-cycle call: {system[-200:]!r}")
    return found[0]


def offline_responder(body: dict) -> dict:
    """The offline provider's answer to a request body of any sleep-cycle call."""
    payload = json.loads(body["messages"][1]["content"])
    return offline_handler_get(purpose=sleep_purpose(body))(payload)


def light_sleep_responder(body: dict) -> dict:
    system, user = (message["content"] for message in body["messages"][:2])
    payload = json.loads(user)
    said = next((turn["content"] for turn in payload.get("dialogue", []) if turn["role"] == "user"), "")[:200]
    if SEMANTIC_INSTRUCTIONS in system:
        return {"create": [{"memory_type": "world", "content": f"They said: {said}"}]}
    if LIMBIC_INSTRUCTIONS in system:
        anchor = {"kind": "conversation_mood", "content": f"I feel close after: {said}"}
        return {"anchors": [{**anchor, "valence": 0.4, "arousal": 0.3, "intensity": 0.6}]}
    if NARRATIVE_INSTRUCTIONS in system:
        narrative = {"title": f"Talk {payload['conversation']['title']}"[:120], "content": f"Today: {said}"}
        return {"narratives": [{**narrative, "significance": "normal"}]}
    if OUTLINE_INSTRUCTIONS in system:
        titles = [narrative["title"] for narrative in payload["narratives"]][:20]
        return {"turning_points": [], "milestones": [], "recent_narratives": titles}
    raise ValueError(f"not a light-sleep request: {system[-200:]!r}")
