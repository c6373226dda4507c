"""Offline (no-LLM) answers for the sleep stages: deterministic, extractive, Chinese + English.

Each handler takes the payload its step sends and answers in the step's JSON schema, so the
whole sleep cycle runs — and demos sensibly — without any model configured. The LLM layer
finds the handlers by importing ``sleep.offline``; importing the stage modules here registers
their ``@offline_handler`` answers.
"""

from __future__ import annotations

from sleep.offline import deep, dream, light, limbic, narrative, self_layer, subjects

__all__ = ["deep", "dream", "light", "limbic", "narrative", "self_layer", "subjects"]
