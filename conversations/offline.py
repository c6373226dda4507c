"""Offline (no-LLM) answers for the conversation-level temporal digests: extractive, capped, no ids."""

from __future__ import annotations

from anima.llm.offline import offline_handler
from anima.text import clip
from temporal.offline import conversation_digest
from temporal.rollup import summaries_concat


@offline_handler("temporal.chunk")
def chunk_answer(payload: dict) -> dict:
    """The theme and outcome of the new messages, in their language (earlier chunks are context only)."""
    return {"summary": clip(conversation_digest(payload), payload["max_chars"])}


@offline_handler("temporal.peer-rollup")
def peer_rollup_answer(payload: dict) -> dict:
    return {"summary": summaries_concat(payload["summaries"], max_chars=payload["max_chars"])}
