"""Finer lexeme statistics for entities.search_fts: recall reads them to tell common query words from rare ones.

See conversations 0003: at the default target ANALYZE lists lexemes down to ~0.2% of rows only.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("anima", "0003_runtime_config"),
    ]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE entities ALTER COLUMN search_fts SET STATISTICS 1000",
            reverse_sql="ALTER TABLE entities ALTER COLUMN search_fts SET STATISTICS -1",
        ),
    ]
