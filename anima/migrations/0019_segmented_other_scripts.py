"""A word of a script jieba does not segment is kept whole (touché, José, привет; ``anima.core.segmentation``):
re-segment the rows holding one.

Limbic blocks are append-only (their trigger refuses the update) and stay as they were segmented.
"""

from django.db import migrations

from anima.core.segmentation import OTHER_SCRIPT_LETTER, segmented_rows_progress, segmented_rows_refresh


def resegment(apps, schema_editor):
    entities = apps.get_model("anima", "Entity").objects.exclude(primary_component="content_block", tag="limbic")
    segmented_rows_refresh(
        queryset=entities,
        text_of=lambda entity: "\n".join(part for part in (entity.title, entity.content) if part),
        progress=segmented_rows_progress("entities", rows_with="words of other scripts"),
        holding=OTHER_SCRIPT_LETTER,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("anima", "0018_llm_run_dialect"),
    ]

    operations = [migrations.RunPython(resegment, migrations.RunPython.noop)]
