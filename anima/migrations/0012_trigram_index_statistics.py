"""No statistics to speak of on the trigram index's expression (as conversations' 0009 does for messages)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("anima", "0011_vectors_stale_triggers"),
    ]

    operations = [
        migrations.RunSQL(
            ["ALTER INDEX entities_fts_segmented_trgm ALTER COLUMN 1 SET STATISTICS 1", "ANALYZE entities"],
            reverse_sql=[
                "ALTER INDEX entities_fts_segmented_trgm ALTER COLUMN 1 SET STATISTICS -1",
                "ANALYZE entities",
            ],
        ),
    ]
