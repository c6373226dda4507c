"""Recall's GIN indexes merge new rows' entries once 64 kB wait (see ``anima.core.models.search_index``)."""

from django.db import migrations

from anima.core.models import search_indexes_pending_list_set


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0009_trigram_index_statistics"),
    ]

    operations = [
        search_indexes_pending_list_set(
            kb=64,
            fts=[
                ("historyentry", "history_search_fts_gin", "search_fts"),
                ("message", "messages_content_fts_gin", "content_fts"),
            ],
            trigram=[("message", "messages_fts_segmented_trgm")],
            prefix_chars=2000,
        ),
    ]
