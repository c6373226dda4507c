"""The LLM audit rows (``AutoLlmRun``) that carried a forgotten person's words: found, cleaned or deleted.

A prompt is ``[{role, content}]`` whose user content is the JSON payload ``llm_json`` dumped; the
payload's dialogue is turns ``{role, content, …}``. A row whose dialogue turns were all the
person's was about them, and its answer is too: it is deleted. Any other row loses their turns
and every passage quoting theirs (verbatim, or most of a message's words), in the prompt and in the
answer; a paraphrase sharing fewer of their words is not found (their name and facts are swept too,
by ``anima.core.redaction``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.db.models import BooleanField
from django.db.models.expressions import RawSQL

from anima.core.models import AutoLlmRun
from anima.core.redaction import Passages, json_document

_CARRIES = (
    "EXISTS (SELECT 1 FROM unnest(%s::text[]) AS f(piece)"
    " WHERE strpos(auto_llm_runs.prompt::text, f.piece) > 0 OR strpos(auto_llm_runs.response, f.piece) > 0)"
)


def _is_turn(value: Any) -> bool:
    return isinstance(value, dict) and "role" in value and isinstance(value.get("content"), str)


def _without(value: Any, passages: Passages, turns: dict[str, int]) -> Any:
    """``value`` without the person's turns and any text of theirs; ``turns`` counts theirs and others'."""
    if isinstance(value, str):
        document = json_document(value)
        if document is not None:  # a payload or an answer: cleaned inside, dumped again as llm_json does
            cleaned = _without(document, passages, turns)
            return value if cleaned == document else json.dumps(cleaned, ensure_ascii=False)
        return "" if passages.held(value) else passages.text(value)
    if isinstance(value, list):
        kept = []
        for item in value:
            if _is_turn(item):
                theirs = passages.held(item["content"])
                turns["theirs" if theirs else "others"] += 1
                if theirs:
                    continue
            kept.append(_without(item, passages, turns))
        return kept
    if isinstance(value, dict):
        return {key: _without(item, passages, turns) for key, item in value.items()}
    return value


def _prompt_without(prompt: Any, passages: Passages, turns: dict[str, int]) -> Any:
    """The prompt's messages with their contents cleaned (the messages themselves are no dialogue turns)."""
    if not isinstance(prompt, list):
        return _without(prompt, passages, turns)
    return [
        {**message, "content": _without(message["content"], passages, turns)} if _is_turn(message) else message
        for message in prompt
    ]


def llm_runs_quoting(*, passages: Passages) -> Iterator[tuple[int, str, dict[str, Any] | None]]:
    """(id, purpose, new values) of every audit row carrying one of ``passages``; values None: the row goes."""
    fragments = passages.fragments()
    if not fragments:
        return
    rows = AutoLlmRun.objects.alias(carries=RawSQL(_CARRIES, [fragments], output_field=BooleanField())).filter(
        carries=True
    )
    for pk, purpose, prompt, response in rows.values_list("pk", "purpose", "prompt", "response").iterator():
        turns = {"theirs": 0, "others": 0}
        cleaned = _prompt_without(prompt, passages, turns)
        if turns["theirs"] and not turns["others"]:
            yield pk, purpose, None
            continue
        answer = _without(response, passages, {"theirs": 0, "others": 0})
        if cleaned != prompt or answer != response:
            yield pk, purpose, {"prompt": cleaned, "response": answer}


def llm_runs_erase(*, passages: Passages) -> tuple[list[int], list[int]]:
    """Delete or clean every audit row carrying one of ``passages``: (deleted ids, cleaned ids)."""
    deleted, cleaned = [], []
    for pk, _, values in list(llm_runs_quoting(passages=passages)):
        if values is None:
            deleted.append(pk)
        else:
            AutoLlmRun.objects.filter(pk=pk).update(**values)
            cleaned.append(pk)
    AutoLlmRun.objects.filter(pk__in=deleted).delete()
    return deleted, cleaned
