"""No statistics to speak of on the trigram index's expression: planning a search computed word similarity over them.

The trigram branch's ``<%`` is estimated by running word_similarity against the expression's most common values
and histogram (~200 texts of up to 2,000 characters at the default target): 1-2.5 ms of planning a predicate, the
larger part of planning a recall statement, while the statement leaves the planner only the GIN index to take
(memory/search/_sql.py, search_fetch). With one value kept the estimate is the operator's default instead.
ANALYZE replaces the statistics already kept.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0008_drop_content_embedding"),
    ]

    operations = [
        migrations.RunSQL(
            ["ALTER INDEX messages_fts_segmented_trgm ALTER COLUMN 1 SET STATISTICS 1", "ANALYZE messages"],
            reverse_sql=[
                "ALTER INDEX messages_fts_segmented_trgm ALTER COLUMN 1 SET STATISTICS -1",
                "ANALYZE messages",
            ],
        ),
    ]
