"""System checks of what earlier nights left behind: a warning with what to do, never an error."""

from __future__ import annotations

from django.core.checks import Tags, Warning, register
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Q

from anima.core.models import BlockTag, Component, Entity

_LISTED = 20


# Database-tagged: it runs with ``migrate`` and ``check --database default``, not before every command.
@register(Tags.database)
def unknown_human_memories_check(app_configs, databases=None, **kwargs) -> list[Warning]:
    """Memories light sleep made, before 0.10, from conversations whose human was unknown: person-less, so global."""
    if not databases or DEFAULT_DB_ALIAS not in databases:
        return []
    # Here, not at import: the module is registered at start-up, and the steps' imports are a tenth of a second.
    from sleep.steps.light import LIGHT_SLEEP_ID_PREFIX

    if Entity._meta.db_table not in connections[DEFAULT_DB_ALIAS].introspection.table_names():
        return []  # a database not migrated yet
    # Facts and narratives: what the console can give a person or delete (anchors are append-only).
    made = Entity.objects.filter(person__isnull=True, external_id__startswith=LIGHT_SLEEP_ID_PREFIX).filter(
        Q(primary_component=Component.SEMANTIC_MEMORY) | Q(tag=BlockTag.NARRATIVE)
    )
    count = made.count()
    if not count:
        return []
    facts = list(
        made.filter(primary_component=Component.SEMANTIC_MEMORY)
        .order_by("id")
        .values_list("pk", flat=True)[: _LISTED + 1]
    )
    listed = ", ".join(map(str, facts[:_LISTED])) + (", …" if len(facts) > _LISTED else "")
    return [
        Warning(
            f"light sleep made {count} {'memory' if count == 1 else 'memories'} from conversations whose human was "
            f"unknown, with no person: every person's recall and prompts show {'it' if count == 1 else 'them'} "
            f"(facts: {listed or 'none, only narratives'}).",
            hint="In the console, give each its person if you know whose it is, or delete it; or forget a fact "
            "(python manage.py forget --memory ID), which also redacts the narratives that quote it. Light sleep no "
            "longer writes such rows.",
            id="anima.W103",
        )
    ]
