from django.db import migrations

from anima.core.vectors import vectors_table_create, vectors_table_drop


def _create(apps, schema_editor) -> None:
    # Only where the server offers pgvector: elsewhere the migration is a no-op and recall is keyword-only.
    with schema_editor.connection.cursor() as cursor:
        vectors_table_create(cursor)


def _drop(apps, schema_editor) -> None:
    with schema_editor.connection.cursor() as cursor:
        vectors_table_drop(cursor)


class Migration(migrations.Migration):
    dependencies = [
        ("anima", "0009_llm_token_budgets"),
    ]

    operations = [
        # Never written: vectors live in their own table, beside the rows they describe.
        migrations.RemoveField(model_name="entity", name="search_embedding"),
        migrations.RunPython(_create, _drop),
    ]
