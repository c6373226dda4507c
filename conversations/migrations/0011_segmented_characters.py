"""Chinese messages index the characters inside their words too (``anima.core.segmentation``): re-segment them.

History entries are append-only (their trigger refuses the update) and stay as they were segmented.
"""

from django.db import migrations

from anima.core.segmentation import segmented_rows_migrate


def resegment(apps, schema_editor):
    segmented_rows_migrate(apps.get_model("conversations", "Message").objects.all(), what="messages")


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0010_search_indexes_short_pending_list"),
    ]

    operations = [migrations.RunPython(resegment, migrations.RunPython.noop)]
