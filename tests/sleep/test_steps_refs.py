from __future__ import annotations

from django.utils import timezone

from anima.core.models import Entity
from conversations.models import Role
from sleep.context import StepContext
from sleep.steps import memory_ref_sync
from tests.factories import MessageFactory, SemanticMemoryFactory


def test_ref_sync_step_repairs_drifted_reference_counts():
    # Global memories: any conversation's citation counts.
    cited = SemanticMemoryFactory(person=None)
    forgotten = SemanticMemoryFactory(person=None)
    MessageFactory(role=Role.ASSISTANT, content=f"As you told me [[anima:{cited.pk}]]")
    Entity.objects.filter(pk=forgotten.pk).update(reference_count=7)
    Entity.objects.filter(pk=cited.pk).update(reference_count=0)

    ctx = StepContext(run_id=0, day=timezone.localdate(), mode="full", force=False, run_key="t", token_budget=None)
    output = memory_ref_sync(ctx)

    cited.refresh_from_db()
    forgotten.refresh_from_db()
    assert (cited.reference_count, forgotten.reference_count) == (2, 0)
    assert output["citations"] == 1
