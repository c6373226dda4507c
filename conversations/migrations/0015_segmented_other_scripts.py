"""A word of a script jieba does not segment is kept whole (touché, José, привет; ``anima.core.segmentation``):
re-segment the messages holding one.

History entries are append-only (their trigger refuses the update) and stay as they were segmented.
"""

from django.db import migrations

from anima.core.segmentation import OTHER_SCRIPT_LETTER, segmented_rows_migrate


def resegment(apps, schema_editor):
    segmented_rows_migrate(
        apps.get_model("conversations", "Message").objects.all(),
        what="messages",
        holding=OTHER_SCRIPT_LETTER,
        rows_with="words of other scripts",
    )


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0014_person_language_history_session_key"),
    ]

    operations = [migrations.RunPython(resegment, migrations.RunPython.noop)]
