"""Peer blocks and system-prompt snapshots written while topic lines were keywords may hold other people's words.

Topic lines are now themes of a closed vocabulary (temporal.themes). Frozen peer blocks are never
rewritten, so the old ones are dropped and every snapshot is marked stale: both are rebuilt on the
next turn (the stable prefix yields once, at this upgrade).
"""

from django.db import migrations


def drop(apps, schema_editor):
    apps.get_model("conversations", "PeerBlock").objects.all().delete()
    apps.get_model("conversations", "Conversation").objects.exclude(system_prompt="").update(
        system_prompt="", system_prompt_built_at=None
    )


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0012_drop_prompts_on_person_change"),
    ]

    operations = [
        migrations.RunPython(drop, migrations.RunPython.noop),
    ]
