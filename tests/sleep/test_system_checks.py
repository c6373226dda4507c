from __future__ import annotations

import pytest
from django.core.management import call_command

from anima.core.models import BlockTag
from tests.factories import ContentBlockFactory, SemanticMemoryFactory


def _warnings(capsys) -> str:
    call_command("check", "--database", "default")
    return capsys.readouterr().err


@pytest.mark.django_db
def test_migrate_warns_of_person_less_memories_an_earlier_night_made_from_an_unknown_human(capsys, leo):
    # Rows an earlier version wrote: light sleep's ids, no person.
    stranger = SemanticMemoryFactory(person=None, external_id="ls:2026-11-26:9:semantic:ab12", content="x@y.org")
    ContentBlockFactory(person=None, tag=BlockTag.NARRATIVE, external_id="ls:2026-11-26:9:narrative:cd34")
    # Not flagged: a fact of Leo's from light sleep, a global memory told by hand, an append-only anchor.
    SemanticMemoryFactory(person=leo, external_id="ls:2026-11-26:8:semantic:ef56")
    SemanticMemoryFactory(person=None, external_id="demo-mem-011")
    ContentBlockFactory(person=None, tag=BlockTag.LIMBIC, external_id="ls:2026-11-26:9:limbic:gh78")

    warned = _warnings(capsys)

    assert "anima.W103" in warned
    assert "light sleep made 2 memories" in warned and f"(facts: {stranger.pk})" in warned
    assert "forget --memory ID" in warned

    stranger.person = leo
    stranger.save(update_fields=["person"])
    assert "light sleep made 1 memory from" in _warnings(capsys)


@pytest.mark.django_db
def test_no_warning_when_every_memory_light_sleep_made_has_a_person(capsys, leo):
    SemanticMemoryFactory(person=leo, external_id="ls:2026-11-26:8:semantic:ef56")
    assert "anima.W103" not in _warnings(capsys)
