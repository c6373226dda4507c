"""Recall's GIN indexes merge new rows' entries once 64 kB wait (see ``anima.core.models.search_index``).

ALTER INDEX keeps each index and its statistics target (0009); the entries already queued are merged here.
"""

import django.contrib.postgres.indexes
import django.db.models.functions.text
from django.db import migrations

INDEXES = ("history_search_fts_gin", "messages_content_fts_gin", "messages_fts_segmented_trgm")


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0009_trigram_index_statistics"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    [f"ALTER INDEX {name} SET (gin_pending_list_limit = 64)" for name in INDEXES]
                    + [f"SELECT gin_clean_pending_list('{name}'::regclass)" for name in INDEXES],
                    reverse_sql=[f"ALTER INDEX {name} RESET (gin_pending_list_limit)" for name in INDEXES],
                ),
            ],
            state_operations=[
                migrations.RemoveIndex(model_name="historyentry", name="history_search_fts_gin"),
                migrations.RemoveIndex(model_name="message", name="messages_content_fts_gin"),
                migrations.RemoveIndex(model_name="message", name="messages_fts_segmented_trgm"),
                migrations.AddIndex(
                    model_name="historyentry",
                    index=django.contrib.postgres.indexes.GinIndex(
                        gin_pending_list_limit=64, fields=["search_fts"], name="history_search_fts_gin"
                    ),
                ),
                migrations.AddIndex(
                    model_name="message",
                    index=django.contrib.postgres.indexes.GinIndex(
                        gin_pending_list_limit=64, fields=["content_fts"], name="messages_content_fts_gin"
                    ),
                ),
                migrations.AddIndex(
                    model_name="message",
                    index=django.contrib.postgres.indexes.GinIndex(
                        django.contrib.postgres.indexes.OpClass(
                            django.db.models.functions.text.Left("fts_segmented", 2000), name="gin_trgm_ops"
                        ),
                        gin_pending_list_limit=64,
                        name="messages_fts_segmented_trgm",
                    ),
                ),
            ],
        ),
    ]
