from django.db import migrations

from anima.core.vectors import vectors_stale_triggers_create, vectors_stale_triggers_drop


def _create(apps, schema_editor) -> None:
    # Only beside the vectors table (where pgvector is available): elsewhere there is nothing to keep fresh.
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('vectors') IS NOT NULL")
        if cursor.fetchone()[0]:
            vectors_stale_triggers_create(cursor)


def _drop(apps, schema_editor) -> None:
    with schema_editor.connection.cursor() as cursor:
        vectors_stale_triggers_drop(cursor)


class Migration(migrations.Migration):
    dependencies = [
        ("anima", "0010_vectors"),
    ]

    operations = [
        migrations.RunPython(_create, _drop),
    ]
