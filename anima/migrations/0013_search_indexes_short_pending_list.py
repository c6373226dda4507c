"""Recall's GIN indexes merge new rows' entries once 64 kB wait (see ``anima.core.models.search_index``).

ALTER INDEX keeps each index and its statistics target (0012); the entries already queued are merged here.
"""

import django.contrib.postgres.indexes
import django.db.models.functions.text
from django.db import migrations

INDEXES = ("entities_search_fts_gin", "entities_fts_segmented_trgm")


class Migration(migrations.Migration):
    dependencies = [
        ("anima", "0012_trigram_index_statistics"),
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
                migrations.RemoveIndex(model_name="entity", name="entities_search_fts_gin"),
                migrations.RemoveIndex(model_name="entity", name="entities_fts_segmented_trgm"),
                migrations.AddIndex(
                    model_name="entity",
                    index=django.contrib.postgres.indexes.GinIndex(
                        gin_pending_list_limit=64, fields=["search_fts"], name="entities_search_fts_gin"
                    ),
                ),
                migrations.AddIndex(
                    model_name="entity",
                    index=django.contrib.postgres.indexes.GinIndex(
                        django.contrib.postgres.indexes.OpClass(
                            django.db.models.functions.text.Left("fts_segmented", 2000), name="gin_trgm_ops"
                        ),
                        gin_pending_list_limit=64,
                        name="entities_fts_segmented_trgm",
                    ),
                ),
            ],
        ),
    ]
