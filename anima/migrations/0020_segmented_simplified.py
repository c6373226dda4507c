"""Traditional Chinese is indexed and embedded in its simplified characters
(``anima.core.segmentation.text_simplified``): re-segment the rows holding Chinese (only those whose search tokens
change are written) and drop those rows' vectors, which the embedding backfill makes again.

Limbic blocks are append-only (their trigger refuses the update) and stay as they were segmented.
"""

from django.db import migrations

from anima.core.segmentation import segmented_rows_migrate
from anima.core.vectors import ENTITY, vectors_drop


def resegment(apps, schema_editor):
    entities = apps.get_model("anima", "Entity").objects.exclude(primary_component="content_block", tag="limbic")
    with schema_editor.connection.cursor() as cursor:
        segmented_rows_migrate(
            entities,
            what="entities",
            fields=("title", "content"),
            written=lambda ids: vectors_drop(cursor, kind=ENTITY, row_ids=ids),
        )


class Migration(migrations.Migration):
    dependencies = [
        ("anima", "0019_segmented_other_scripts"),
    ]

    operations = [migrations.RunPython(resegment, migrations.RunPython.noop)]
