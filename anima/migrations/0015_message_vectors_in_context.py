from django.db import migrations

from anima.core.vectors import vectors_stale_triggers_create


def _forward(apps, schema_editor) -> None:
    # Message vectors are now made from the turn in its context (memory.embedding): the ones made from the text
    # alone are dropped, and the embedding backfill (its beat task, or `embed_backfill`) makes them again;
    # meanwhile those messages are found by their words. The stale triggers now also drop the next turn's vector.
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('vectors') IS NOT NULL")
        if cursor.fetchone()[0]:
            vectors_stale_triggers_create(cursor)
            cursor.execute("DELETE FROM vectors WHERE kind = 'message'")


class Migration(migrations.Migration):
    dependencies = [
        ("anima", "0014_segmented_characters"),
    ]

    operations = [
        # Backwards there is nothing to restore: the backfill makes whatever vectors are missing.
        migrations.RunPython(_forward, migrations.RunPython.noop),
    ]
