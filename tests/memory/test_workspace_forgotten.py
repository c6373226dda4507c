"""Re-importing a workspace exported before a forget: what was forgotten stays forgotten (issue 35 item 8)."""

from __future__ import annotations

import datetime as dt
import io

from django.core.management import call_command

from anima.core.models import ForgetTombstone, MemoryType
from conversations.models import HistoryEntry, Identity, Person
from memory.models import SemanticMemory
from memory.services import memory_remember
from tests.factories import ConversationFactory, HistoryEntryFactory, IdentityFactory, MessageFactory, PersonFactory


def _demo_like() -> None:
    """Two people with accounts, facts, a conversation and history, as the demo leaves them."""
    for slug, name, chat_id in (("leo", "Leo", "1001"), ("maya", "Maya", "2002")):
        person = PersonFactory(slug=slug, display_name=name)
        IdentityFactory(person=person, channel="telegram", external_id=chat_id)
        conversation = ConversationFactory(person=person, channel="telegram", chat_id=chat_id)
        MessageFactory(conversation=conversation, role="user", content=f"Hi, I am {name}.")
        HistoryEntryFactory(
            person=person,
            channel="telegram",
            content=f"{name} said hello",
            timestamp=dt.datetime(2026, 11, 2, tzinfo=dt.UTC),
        )
    maya = Person.objects.get(slug="maya")
    leo = Person.objects.get(slug="leo")
    memory_remember(content="Maya is a nurse", person=maya)
    memory_remember(content="Maya is allergic to peanuts", person=maya, pinned=True)
    memory_remember(content="Leo lives in Hangzhou", person=leo)
    memory_remember(content="Leo drinks oolong tea", memory_type=MemoryType.PREFERENCE, person=leo)
    memory_remember(content="The garden gate sticks in winter")


def _import(root, *args: str) -> str:
    err = io.StringIO()
    call_command("import_workspace", str(root), *args, stdout=io.StringIO(), stderr=err)  # exit status 0
    return err.getvalue()


def _forget(*args: str) -> None:
    call_command("forget", *args, "--yes", stdout=io.StringIO())


def test_an_erased_person_exported_before_the_erasure_stays_erased_on_import_unless_allowed(tmp_path):
    _demo_like()
    call_command("export_workspace", str(tmp_path / "ws"), stdout=io.StringIO())
    _forget("--person", "maya", "--messages")

    warnings = _import(tmp_path / "ws")

    assert not Person.objects.filter(slug="maya").exists()
    assert not Identity.objects.filter(external_id="2002").exists()
    assert not SemanticMemory.objects.filter(content__contains="Maya").exists()
    assert not HistoryEntry.objects.filter(content__contains="Maya").exists()
    assert "memory/persons/maya/: person maya was erased; not imported" in warnings
    assert "2 memories, 1 history entries and 1 accounts" in warnings
    assert "nurse" not in warnings  # the person is named, not what was said about them
    assert SemanticMemory.objects.filter(content="Leo lives in Hangzhou").count() == 1  # the rest as before

    warnings = _import(tmp_path / "ws", "--allow-forgotten")

    assert "person maya was erased; imported anyway (--allow-forgotten)" in warnings
    maya = Person.objects.get(slug="maya")
    assert Identity.objects.filter(person=maya, channel="telegram", external_id="2002").exists()
    assert set(SemanticMemory.objects.filter(person=maya).values_list("content", flat=True)) == {
        "Maya is a nurse",
        "Maya is allergic to peanuts",
    }
    assert HistoryEntry.objects.filter(person=maya, content="Maya said hello").exists()


def test_a_forgotten_memory_exported_before_it_was_forgotten_is_not_imported_again_unless_allowed(tmp_path):
    _demo_like()
    call_command("export_workspace", str(tmp_path / "ws"), stdout=io.StringIO())
    global_fact = SemanticMemory.objects.get(content="The garden gate sticks in winter")
    _forget("--memory", str(SemanticMemory.objects.get(content="Leo lives in Hangzhou").pk))
    _forget("--memory", str(global_fact.pk))
    tombstone = ForgetTombstone.objects.filter(target_id=global_fact.pk).get()
    assert "garden" not in str(tombstone.fingerprints)  # hashes, never the text

    warnings = _import(tmp_path / "ws")

    assert not SemanticMemory.objects.filter(content__contains="Hangzhou").exists()
    assert not SemanticMemory.objects.filter(content__contains="garden").exists()
    assert "memory/persons/leo/MEMORY.md:5: memory 'Leo lives in Hangzhou' was forgotten; not imported" in warnings
    assert "memory/MEMORY.md:5: memory 'The garden gate sticks in winter' was forgotten; not imported" in warnings
    assert SemanticMemory.objects.filter(content="Leo drinks oolong tea").exists()

    warnings = _import(tmp_path / "ws", "--allow-forgotten")

    assert "memory 'Leo lives in Hangzhou' was forgotten; imported anyway (--allow-forgotten)" in warnings
    assert SemanticMemory.objects.filter(content="Leo lives in Hangzhou", person__slug="leo").exists()
    assert SemanticMemory.objects.filter(content="The garden gate sticks in winter", person=None).exists()


def test_a_forgotten_fact_is_recognised_however_the_file_cases_or_punctuates_it(tmp_path):
    _demo_like()
    call_command("export_workspace", str(tmp_path / "ws"), stdout=io.StringIO())
    _forget("--memory", str(SemanticMemory.objects.get(content="Leo lives in Hangzhou").pk))
    path = tmp_path / "ws" / "memory/persons/leo/MEMORY.md"
    path.write_text(path.read_text().replace("Leo lives in Hangzhou", "LEO  lives in hangzhou!"))

    warnings = _import(tmp_path / "ws")

    assert not SemanticMemory.objects.filter(content__icontains="hangzhou").exists()
    assert "'LEO lives in hangzhou!' was forgotten" in warnings
