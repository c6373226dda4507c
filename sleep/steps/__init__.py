"""Sleep-cycle step functions; each takes a StepContext and returns its JSON output."""

from __future__ import annotations

from sleep.steps.cleanup import conversation_cleanup
from sleep.steps.deep import deep_sleep
from sleep.steps.dream import dream
from sleep.steps.imprint import emotional_imprint
from sleep.steps.light import light_sleep
from sleep.steps.refs import memory_ref_sync
from sleep.steps.self_layer import self_layer_refresh
from sleep.steps.subjects import subjects
from sleep.steps.temporal import temporal_summary_cascade, temporal_summary_day
from sleep.steps.tendency import emotional_tendency

__all__ = [
    "conversation_cleanup",
    "deep_sleep",
    "dream",
    "emotional_imprint",
    "emotional_tendency",
    "light_sleep",
    "memory_ref_sync",
    "self_layer_refresh",
    "subjects",
    "temporal_summary_cascade",
    "temporal_summary_day",
]
