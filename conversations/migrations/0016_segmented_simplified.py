"""Traditional Chinese is searched in its simplified characters (``anima.core.segmentation.text_simplified``):
re-segment the messages holding Chinese (only those whose search tokens change are written)."""

from django.db import migrations

from anima.core.segmentation import segmented_rows_migrate


def resegment(apps, schema_editor):
    segmented_rows_migrate(apps.get_model("conversations", "Message").objects.all(), what="messages")


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0015_segmented_other_scripts"),
    ]

    operations = [migrations.RunPython(resegment, migrations.RunPython.noop)]
