"""Facts kept when a copy restating them retired into them take over where the copy was said.

Deep sleep does so from now on (``memory.services.memory_sources_add``); this does it once for the nights before,
so recall ranks those facts with the lines that say them. Only the body's ``source_conversations`` changes.
"""

from django.db import migrations

RESTATES = "restates #"


def _made_in(memory) -> set[int]:
    body = memory.body if isinstance(memory.body, dict) else {}
    listed = body.get("source_conversations")
    made_in = {c for c in listed if isinstance(c, int)} if isinstance(listed, list) else set()
    return made_in | ({memory.source_conversation_id} if memory.source_conversation_id else set())


def forwards(apps, schema_editor):
    Entity = apps.get_model("anima", "Entity")
    copies = Entity.objects.filter(
        primary_component="semantic_memory", superseded_by__isnull=False, expired_reason__startswith=RESTATES
    ).order_by("id")
    taken: dict[int, set[int]] = {}
    for copy in copies:
        taken.setdefault(copy.superseded_by_id, set()).update(_made_in(copy))
    for kept in Entity.objects.filter(pk__in=taken).order_by("id"):
        body = kept.body if isinstance(kept.body, dict) else {}
        held = set(body.get("source_conversations") or [])
        added = taken[kept.pk] - held - {kept.source_conversation_id}
        if added:
            kept.body = {**body, "source_conversations": sorted(held | added)}
            kept.save(update_fields=["body"])


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0004_subjects"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
