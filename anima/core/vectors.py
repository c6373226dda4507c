"""Dense vectors in PostgreSQL (pgvector): the ``vectors`` table, its indexes, and the reads/writes on it.

One table, keyed by (kind, row_id, model): ``kind`` names the table the row lives in (``entity`` for
semantic memories, diary blocks and temporal summaries, ``message`` for conversation turns); ``model``
and ``dim`` record what made the vector, so a model change re-embeds instead of mixing spaces. Rows are
never updated to add a vector (entities and messages stay append-only where they are): the vector lives
beside them. ``person_id``/``conversation_id`` copy the row's owner so a filtered search can test it on
the index scan itself; recall still re-checks every hit against its source's own filters.

The table exists only where the ``vector`` extension is available (migration ``anima.0007``): a server
without pgvector migrates cleanly and recall runs keyword-only. Vectors are stored as untyped
``halfvec``; each (kind, model, dimension) gets a partial expression HNSW index, and a search uses the
same expression and predicate (``vector_order_sql``) to reach it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import DEFAULT_DB_ALIAS, connections

from anima.core.embeddings import EmbeddingModel

ENTITY = "entity"
MESSAGE = "message"
KINDS = (ENTITY, MESSAGE)
TABLE = "vectors"

_TABLE_SQL = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    kind text NOT NULL CHECK (kind IN ('entity', 'message')),
    row_id bigint NOT NULL,
    model text NOT NULL,
    dim integer NOT NULL CHECK (dim > 0),
    person_id bigint,
    conversation_id bigint,
    vec halfvec NOT NULL,
    embedded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, row_id, model)
)
"""


def vector_extension_available(cursor) -> bool:
    """Whether the server can install pgvector (installed or not)."""
    cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
    return cursor.fetchone() is not None


def vectors_table_create(cursor) -> bool:
    """Create the extension and the table where pgvector is available (the migration's step); False otherwise."""
    if not vector_extension_available(cursor):
        return False
    cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
    cursor.execute(_TABLE_SQL)
    return True


# A vector describes its row's text (and, for an entity, its owner) as they were embedded: an edit, a merge
# rewriting a memory, a summary written again, a redaction or a delete — by any path, the ORM, a bulk
# UPDATE or a cascade — drops it in the same transaction, and the backfill embeds the row again if it is
# still there. A message's vector is also made from the turn before it (memory.embedding): a change to a
# message drops the next turn's vector too, so a forgotten text leaves no vector behind. Created where the
# vectors table exists (migrations anima.0011, anima.0015).
_STALE_FUNCTION = "anima_vectors_drop_stale"
_STALE_MESSAGE_FUNCTION = "anima_vectors_drop_stale_message"
_STALE_TRIGGERS = (
    # (table, kind, the columns a vector is made from, the function that drops what they made)
    ("entities", ENTITY, ("title", "content", "person_id"), _STALE_FUNCTION),
    ("messages", MESSAGE, ("content", "name"), _STALE_MESSAGE_FUNCTION),
)


def _next_turn_sql(message: str) -> str:
    """The id of the turn after ``message`` (a row of messages: OLD, an alias) in its conversation, which is embedded
    with it (a turn's vector holds the turn it answers)."""
    return (
        f"(SELECT m.id FROM messages m WHERE m.conversation_id = {message}.conversation_id"
        f" AND m.role IN ('user', 'assistant') AND (m.created_at, m.id) > ({message}.created_at, {message}.id)"
        " ORDER BY m.created_at, m.id LIMIT 1)"
    )


def vectors_stale_triggers_create(cursor) -> None:
    """Triggers that drop a row's vectors when the row goes or what it was embedded from changes."""
    cursor.execute(
        f"CREATE OR REPLACE FUNCTION {_STALE_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$"
        f" BEGIN DELETE FROM {TABLE} WHERE kind = TG_ARGV[0] AND row_id = OLD.id; RETURN NULL; END $$"
    )
    cursor.execute(
        f"CREATE OR REPLACE FUNCTION {_STALE_MESSAGE_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$"
        f" BEGIN DELETE FROM {TABLE} WHERE kind = TG_ARGV[0] AND row_id IN (OLD.id, {_next_turn_sql('OLD')});"
        " RETURN NULL; END $$"
    )
    for table, kind, columns, function in _STALE_TRIGGERS:
        changed = " OR ".join(f"OLD.{column} IS DISTINCT FROM NEW.{column}" for column in columns)
        # Recreated (not replaced) so that a database migrated before a column was watched gets its new list.
        cursor.execute(f"DROP TRIGGER IF EXISTS {table}_vectors_stale ON {table}")
        cursor.execute(
            f"CREATE TRIGGER {table}_vectors_stale AFTER UPDATE OF {', '.join(columns)} ON {table}"
            f" FOR EACH ROW WHEN ({changed}) EXECUTE FUNCTION {function}('{kind}')"
        )
        cursor.execute(
            f"CREATE OR REPLACE TRIGGER {table}_vectors_gone AFTER DELETE ON {table}"
            f" FOR EACH ROW EXECUTE FUNCTION {function}('{kind}')"
        )


def vectors_stale_triggers_drop(cursor) -> None:
    for table, *_ in _STALE_TRIGGERS:
        cursor.execute(f"DROP TRIGGER IF EXISTS {table}_vectors_stale ON {table}")
        cursor.execute(f"DROP TRIGGER IF EXISTS {table}_vectors_gone ON {table}")
    cursor.execute(f"DROP FUNCTION IF EXISTS {_STALE_FUNCTION}()")
    cursor.execute(f"DROP FUNCTION IF EXISTS {_STALE_MESSAGE_FUNCTION}()")


def vectors_drop(cursor, *, kind: str, row_ids: Sequence[int]) -> int:
    """Drop the vectors made from the rows ``row_ids`` of ``kind`` (a message's, and the next turn's, which is
    embedded with it), where the database has the vectors table; how many. For a data migration after the text a
    row is embedded from is read differently: the embedding backfill makes them again, and meanwhile those rows are
    found by their words."""
    if not row_ids or not _table_exists(cursor):
        return 0
    ids = list(row_ids)
    if kind == MESSAGE:
        cursor.execute(
            f"DELETE FROM {TABLE} WHERE kind = %s AND row_id IN (SELECT o.id FROM messages o WHERE o.id = ANY(%s)"
            f" UNION SELECT {_next_turn_sql('o')} FROM messages o WHERE o.id = ANY(%s))",
            [kind, ids, ids],
        )
    else:
        cursor.execute(f"DELETE FROM {TABLE} WHERE kind = %s AND row_id = ANY(%s)", [kind, ids])
    return cursor.rowcount


def vectors_table_drop(cursor) -> None:
    vectors_stale_triggers_drop(cursor)  # they name the table
    cursor.execute(f"DROP TABLE IF EXISTS {TABLE}")


_available: dict[str, bool] = {}


def vectors_available(*, using: str = DEFAULT_DB_ALIAS) -> bool:
    """True when this database has the vectors table (pgvector installed and migrated); cached per database."""
    name = str(connections[using].settings_dict["NAME"])
    if name not in _available:
        with connections[using].cursor() as cursor:
            _available[name] = _table_exists(cursor)
    return _available[name]


def _table_exists(cursor) -> bool:
    cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [TABLE])
    return bool(cursor.fetchone()[0])


def vectors_available_clear() -> None:
    """Forget the cached answer (after a migration in the same process, e.g. tests)."""
    _available.clear()


def vector_literal(vector: Sequence[float]) -> str:
    """pgvector's text form of ``vector``: sent as a parameter and cast, never spliced into SQL."""
    return "[" + ",".join(f"{x:.6g}" for x in vector) + "]"


def vector_index_name(*, kind: str, model: EmbeddingModel) -> str:
    digest = hashlib.sha1(model.name.encode()).hexdigest()[:10]
    return f"vectors_hnsw_{kind}_{digest}_{model.dim}"


def _quoted(text: str) -> str:
    # The model name is configuration, not user input, but it still goes through SQL quoting rules: a
    # partial index's predicate and the query that uses it must repeat it as the same literal.
    return "'" + text.replace("'", "''") + "'"


def vector_predicate_sql(*, kind: str, model: EmbeddingModel, alias: str = "v") -> str:
    """The partial index's predicate, spelled as a search must spell it (literals, so the planner matches it)."""
    if kind not in KINDS:
        raise ValueError(f"unknown vector kind {kind!r}")
    return (
        f"{alias}.kind = {_quoted(kind)} AND {alias}.model = {_quoted(model.name)} AND {alias}.dim = {int(model.dim)}"
    )


def vector_query_sql(*, model: EmbeddingModel, param: str) -> str:
    """``%(param)s`` (``vector_literal``'s text) as the type the HNSW index compares: the other side of
    ``vector_order_sql``."""
    return f"%({param})s::halfvec({int(model.dim)})"


def vector_order_sql(*, model: EmbeddingModel, query: str, alias: str = "v") -> str:
    """Cosine distance from the SQL expression ``query`` (``vector_query_sql``'s type) in the index's own expression:
    an ORDER BY key the HNSW index serves."""
    return f"({alias}.vec::halfvec({int(model.dim)})) <=> {query}"


def vector_indexes_ensure(*, model: EmbeddingModel, using: str = DEFAULT_DB_ALIAS) -> None:
    """One HNSW index per kind for ``model`` (idempotent). Built while the model's vectors are few (backfill's
    first batch), so later inserts keep it up to date instead of one long build.
    """
    with connections[using].cursor() as cursor:
        for kind in KINDS:
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {vector_index_name(kind=kind, model=model)} ON {TABLE}"
                f" USING hnsw ((vec::halfvec({int(model.dim)})) halfvec_cosine_ops) WITH ({HNSW_BUILD_OPTIONS})"
                f" WHERE {vector_predicate_sql(kind=kind, model=model, alias=TABLE)}"
            )


# pgvector's defaults: good recall at recall's page sizes. Tests of the index path may build it cheaper.
HNSW_BUILD_OPTIONS = "m = 16, ef_construction = 64"


@dataclass(frozen=True)
class VectorRow:
    row_id: int
    vector: list[float]
    person_id: int | None = None
    conversation_id: int | None = None


def vectors_store(*, kind: str, model: EmbeddingModel, rows: Sequence[VectorRow], using: str = DEFAULT_DB_ALIAS) -> int:
    """Insert (or replace) the vectors of ``rows`` made by ``model``; returns how many were written."""
    if not rows:
        return 0
    if kind not in KINDS:
        raise ValueError(f"unknown vector kind {kind!r}")
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {TABLE} (kind, row_id, model, dim, person_id, conversation_id, vec)"
            " SELECT %s, r.row_id, %s, %s, r.person_id, r.conversation_id, r.vec::halfvec"
            " FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[], %s::text[])"
            " AS r(row_id, person_id, conversation_id, vec)"
            " ON CONFLICT (kind, row_id, model) DO UPDATE SET vec = EXCLUDED.vec, dim = EXCLUDED.dim,"
            " person_id = EXCLUDED.person_id, conversation_id = EXCLUDED.conversation_id, embedded_at = now()",
            [
                kind,
                model.name,
                model.dim,
                [row.row_id for row in rows],
                [row.person_id for row in rows],
                [row.conversation_id for row in rows],
                [vector_literal(row.vector) for row in rows],
            ],
        )
        return cursor.rowcount


def vectors_fetch(
    *, kind: str, model: EmbeddingModel, row_ids: Sequence[int], using: str = DEFAULT_DB_ALIAS
) -> dict[int, list[float]]:
    """The stored vectors of ``row_ids`` made by ``model`` (rows without one are left out; {} without pgvector)."""
    if not row_ids or not vectors_available(using=using):
        return {}
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"SELECT v.row_id, v.vec::text FROM {TABLE} v WHERE {vector_predicate_sql(kind=kind, model=model)}"
            " AND v.row_id = ANY(%s)",
            [list(row_ids)],
        )
        return {row_id: [float(x) for x in text.strip("[]").split(",")] for row_id, text in cursor.fetchall()}


# PostgreSQL's own autovacuum rule: analyze once more than 50 rows + 10 % of the counted ones changed.
_ANALYZE_BASE_ROWS = 50
_ANALYZE_SHARE = 0.1


def vectors_statistics_refresh(*, added: int, using: str = DEFAULT_DB_ALIAS) -> bool:
    """ANALYZE the vectors table when ``added`` new rows outgrow its statistics; True when it did.

    Dense recall's plan rests on them: statistics taken before a large backfill (after an import, or on a
    new database) say the table is nearly empty, and the planner then computes the distance of every
    message vector instead of walking the person's rows (14 ms instead of 2 with 3,000 of them). Autovacuum
    catches up within a minute or so; a backfill that grew the table this much refreshes them at once.
    """
    if added <= _ANALYZE_BASE_ROWS:
        return False
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [TABLE])
        (counted,) = cursor.fetchone()  # -1: never analyzed
        if added <= _ANALYZE_BASE_ROWS + _ANALYZE_SHARE * max(counted, 0):
            return False
        cursor.execute(f"ANALYZE {TABLE}")
    return True


def vectors_clear(*, using: str = DEFAULT_DB_ALIAS) -> int:
    """Delete every vector (``embed_backfill --rebuild``: after a model change, everything is embedded again)."""
    if not vectors_available(using=using):
        return 0
    with connections[using].cursor() as cursor:
        cursor.execute(f"DELETE FROM {TABLE}")
        return cursor.rowcount
