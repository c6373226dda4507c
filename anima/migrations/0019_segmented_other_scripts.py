"""A word of a script jieba does not segment is kept whole (touché, José, привет; ``anima.core.segmentation``):
re-segment the rows holding one.

Limbic blocks are append-only (their trigger refuses the update) and stay as they were segmented.
"""

from django.db import migrations

from anima.core.segmentation import OTHER_SCRIPT_LETTER, segmented_rows_migrate


def resegment(apps, schema_editor):
    entities = apps.get_model("anima", "Entity").objects.exclude(primary_component="content_block", tag="limbic")
    segmented_rows_migrate(
        entities,
        what="entities",
        fields=("title", "content"),
        holding=OTHER_SCRIPT_LETTER,
        rows_with="words of other scripts",
    )


class Migration(migrations.Migration):
    dependencies = [
        ("anima", "0018_llm_run_dialect"),
    ]

    operations = [migrations.RunPython(resegment, migrations.RunPython.noop)]
