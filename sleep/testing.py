"""Test and benchmark helpers: answers of a stand-in model for light sleep, over real HTTP.

``light_sleep_responder`` answers a chat-completions request body of any light-sleep stage (found
by its instructions) with a small valid answer drawn from the request, so a ``StubLlmServer`` can
stand in for the model of worker processes.
"""

from __future__ import annotations

import json

from sleep.steps.light import LIMBIC_INSTRUCTIONS, NARRATIVE_INSTRUCTIONS, OUTLINE_INSTRUCTIONS, SEMANTIC_INSTRUCTIONS


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
