"""Restoring a whole night of deep sleep through the memory services."""

from __future__ import annotations

import datetime as dt

import pytest

from anima.core.models import MemoryStatus
from memory.models import SemanticMemory
from memory.services import memory_deprecate
from sleep.context import StepContext
from sleep.models import StepStatus
from sleep.pipeline import PipelineError
from sleep.services import deep_sleep_night_restore
from sleep.steps import deep_sleep
from sleep.steps.deep_prompts import PINS_INSTRUCTIONS, SPLIT_INSTRUCTIONS
from tests.factories import PersonFactory, PipelineStepRunFactory, SemanticMemoryFactory
from tests.sleep.stages import stages_script

DAY = dt.date(2026, 11, 26)


def test_a_split_and_the_pins_of_a_night_are_undone_and_what_changed_since_is_skipped(llm_stub):
    maya = PersonFactory(slug="maya", display_name="Maya")
    whole = SemanticMemoryFactory(person=maya, content="Maya is a nurse in Lisbon. Maya has a cat named Miso.")
    trivial = SemanticMemoryFactory(person=maya, content="Maya had soup", pinned=True, body={"pinned_by": "deep-sleep"})
    safety = SemanticMemoryFactory(person=maya, content="Maya is allergic to peanuts")
    parts = [{"memory_type": "world", "content": "Maya is a nurse in Lisbon"}]
    parts.append({"memory_type": "world", "content": "Maya has a cat named Miso"})
    stages_script(
        llm_stub,
        {
            SPLIT_INSTRUCTIONS: [{"splits": [{"id": whole.pk, "parts": parts}]}],
            PINS_INSTRUCTIONS: [
                {"unpin": [{"id": trivial.pk, "reason": "trivial"}], "pin": [{"id": safety.pk, "reason": "safety"}]}
            ],
        },
    )
    output = deep_sleep(StepContext(run_id=0, day=DAY, mode="full", force=False, run_key="t", token_budget=None))
    step = PipelineStepRunFactory(step="deep-sleep", status=StepStatus.SUCCEEDED, output=output)
    nurse, cat = SemanticMemory.objects.filter(body__split_from=whole.pk).order_by("id")
    memory_deprecate(memory=cat, reason="wrong")  # changed by hand before the operator restores the night

    outcome = deep_sleep_night_restore(step_run=step, by="console:admin")

    whole.refresh_from_db()
    nurse.refresh_from_db()
    trivial.refresh_from_db()
    safety.refresh_from_db()
    assert whole.status == MemoryStatus.ACTIVE and nurse.status == MemoryStatus.EXPIRED
    assert SemanticMemory.objects.get(pk=cat.pk).status == MemoryStatus.DEPRECATED
    assert trivial.pinned and not safety.pinned
    assert outcome["restored"] == [whole.pk] and outcome["retired"] == [nurse.pk]
    assert sorted(outcome["pins"]) == sorted([trivial.pk, safety.pk])
    assert outcome["skipped"] == [{"id": cat.pk, "reason": "already deprecated"}]
    with pytest.raises(PipelineError, match="was restored already"):
        deep_sleep_night_restore(step_run=step, by="console:admin")


def test_a_step_that_changed_nothing_has_nothing_to_restore():
    step = PipelineStepRunFactory(step="light-sleep", output={"conversations": []})
    with pytest.raises(PipelineError, match="changed no memory"):
        deep_sleep_night_restore(step_run=step, by="console:admin")
