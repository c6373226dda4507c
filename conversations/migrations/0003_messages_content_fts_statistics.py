"""Finer lexeme statistics for messages.content_fts: recall reads them to tell common query words from rare ones.

At the default target (100) ANALYZE lists lexemes down to ~0.2% of rows (2,000 rows at 1M messages);
a word below that cannot be recognised as common. 1000 lists ten times more (bench/recall_scale.py:
recall p95 at 1M messages 48 -> 18 ms); ANALYZE samples more rows (~2 s at 1M).
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0002_short_term_memory_peer_blocks"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE messages ALTER COLUMN content_fts SET STATISTICS 1000",
            reverse_sql="ALTER TABLE messages ALTER COLUMN content_fts SET STATISTICS -1",
        ),
    ]
