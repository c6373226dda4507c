"""A stand-in model on a local OpenAI-compatible server that answers each sleep stage from its own script.

The stage is told by its instructions in the system message, as a real server receives them; a stage
with nothing scripted left answers that it has nothing to change.
"""

from __future__ import annotations

import collections
import json
from typing import Any

from anima.core.llm.testing import StubLlmServer
from sleep.steps import deep, light, light_outline
from temporal import services as temporal

QUIET: dict[str, Any] = {
    deep.CONTRADICTION_INSTRUCTIONS: {"expire": []},
    deep.SPLIT_INSTRUCTIONS: {"splits": []},
    deep.MERGE_INSTRUCTIONS: {"merges": []},
    deep.PINS_INSTRUCTIONS: {"unpin": [], "pin": []},
    light.SEMANTIC_INSTRUCTIONS: {"create": [], "update": [], "deprecate": []},
    light.LIMBIC_INSTRUCTIONS: {"anchors": []},
    light.NARRATIVE_INSTRUCTIONS: {"narratives": []},
    light_outline.OUTLINE_INSTRUCTIONS: {"turning_points": [], "milestones": [], "recent_narratives": []},
    temporal.DAY_INSTRUCTIONS: {"sections": []},
}


def stages_script(stub: StubLlmServer, script: dict[str, list[Any]]) -> dict[str, int]:
    """Answer each stage (keyed by its instructions) from ``script``, then quietly; returns the calls per stage.

    An answer may be a function of the request's payload (the user message, parsed).
    """
    queues = {instructions: collections.deque(answers) for instructions, answers in script.items()}
    calls: dict[str, int] = collections.Counter()

    def respond(body: dict) -> Any:
        system = body["messages"][0]["content"]
        stage = next((instructions for instructions in QUIET if instructions in system), None)
        if stage is None:
            return {}
        calls[stage] += 1
        queue = queues.get(stage)
        answer = queue.popleft() if queue else QUIET[stage]
        return answer(json.loads(body["messages"][-1]["content"])) if callable(answer) else answer

    stub.responder = respond
    return calls
