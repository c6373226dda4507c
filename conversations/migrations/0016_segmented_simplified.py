"""Traditional Chinese is searched and embedded in its simplified characters
(``anima.core.segmentation.text_simplified``): re-segment the messages holding Chinese (only those whose search
tokens change are written) and drop their vectors and the next turn's (embedded with them), which the embedding
backfill makes again."""

from django.db import migrations

from anima.core.segmentation import segmented_rows_migrate
from anima.core.vectors import MESSAGE, vectors_drop


def resegment(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        segmented_rows_migrate(
            apps.get_model("conversations", "Message").objects.all(),
            what="messages",
            written=lambda ids: vectors_drop(cursor, kind=MESSAGE, row_ids=ids),
        )


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0015_segmented_other_scripts"),
    ]

    operations = [migrations.RunPython(resegment, migrations.RunPython.noop)]
