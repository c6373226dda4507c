"""What a search reads: one SourceSpec per source (its rows, its filters, its columns)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from anima.core.vectors import ENTITY, MESSAGE


@dataclass(frozen=True)
class SourceSpec:
    """One searchable source: its rows, the filters that apply, and how its branches read them."""

    name: str
    from_sql: str
    where_sql: str
    fts_column: str
    segmented_column: str
    params: dict = field(default_factory=dict)
    # The table ``t`` is (for its statistics and its newest id); empty: no document-frequency pruning.
    table: str = ""
    # Its rows' kind in the vectors table (empty: no dense branch), and a filter on the vector row itself
    # (``v``) tested on the index scan before the join; the source's own filters are tested after it.
    vector_kind: str = ""
    vector_where_sql: str = ""


def entity_source(
    *, name: str, where_sql: str, person_id: int | None, since: datetime | None, until: datetime | None
) -> SourceSpec:
    """A source over ``entities`` rows matching ``where_sql`` (fixed SQL, no user input)."""
    clauses = [where_sql]
    if person_id is not None:
        clauses.append("(t.person_id = %(person_id)s OR t.person_id IS NULL)")
    params = {"person_id": person_id}
    return _source(
        name=name,
        table="entities",
        fts_column="search_fts",
        clauses=clauses,
        params=params,
        since=since,
        until=until,
        vector_kind=ENTITY,
        vector_where_sql="(v.person_id = %(person_id)s OR v.person_id IS NULL)" if person_id is not None else "",
    )


def message_source(
    *, name: str, person_id: int | None, since: datetime | None, until: datetime | None, channel: str | None
) -> SourceSpec:
    """User/assistant messages of non-cron conversations (optionally one person's, one channel's)."""
    clauses = ["t.role IN ('user', 'assistant')", "c.platform <> 'cron'"]
    if person_id is not None:
        # A conversation belongs to its person, or, without one, to whoever its channel account maps to.
        clauses.append(
            "(c.person_id = %(person_id)s OR (c.person_id IS NULL AND EXISTS (SELECT 1 FROM identities i"
            " WHERE i.person_id = %(person_id)s AND i.channel = COALESCE(NULLIF(c.channel, ''), c.platform)"
            " AND i.external_id = c.chat_id)))"
        )
    if channel:
        clauses.append("c.channel = %(channel)s")
    params = {"person_id": person_id, "channel": channel}
    return _source(
        name=name,
        table="messages",
        fts_column="content_fts",
        clauses=clauses,
        params=params,
        since=since,
        until=until,
        joins=" JOIN conversations c ON c.id = t.conversation_id",
        vector_kind=MESSAGE,
    )


def _source(
    *,
    name: str,
    table: str,
    fts_column: str,
    clauses: list[str],
    params: dict,
    since: datetime | None,
    until: datetime | None,
    joins: str = "",
    vector_kind: str = "",
    vector_where_sql: str = "",
) -> SourceSpec:
    """Rows of ``table`` (as ``t``, with ``joins``) matching every clause and created in [since, until)."""
    if since is not None:
        clauses.append("t.created_at >= %(since)s")
    if until is not None:
        clauses.append("t.created_at < %(until)s")
    return SourceSpec(
        name=name,
        from_sql=f"{table} t{joins}",
        where_sql=" AND ".join(clauses),
        fts_column=fts_column,
        segmented_column="fts_segmented",
        params={**params, "since": since, "until": until},
        table=table,
        vector_kind=vector_kind,
        vector_where_sql=vector_where_sql,
    )
