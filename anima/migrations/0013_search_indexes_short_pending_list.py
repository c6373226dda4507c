"""Recall's GIN indexes merge new rows' entries once 64 kB wait (see ``anima.core.models.search_index``)."""

from django.db import migrations

from anima.core.models import search_indexes_pending_list_set


class Migration(migrations.Migration):
    dependencies = [
        ("anima", "0012_trigram_index_statistics"),
    ]

    operations = [
        search_indexes_pending_list_set(
            kb=64,
            fts=[("entity", "entities_search_fts_gin", "search_fts")],
            trigram=[("entity", "entities_fts_segmented_trgm")],
            prefix_chars=2000,
        ),
    ]
