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


# A semantic memory held at %(as_of)s: valid from then or before (its occurred_at or first sighting) and not
# yet retired. Rows written before belief history have no valid_from: their creation stands in.
_VALID_AT = "COALESCE(t.valid_from, t.created_at) <= %(as_of)s AND (t.valid_to IS NULL OR t.valid_to > %(as_of)s)"


def entity_source(
    *,
    name: str,
    where_sql: str,
    person_id: int | None,
    since: datetime | None,
    until: datetime | None,
    as_of: datetime | None = None,
    by_validity: bool = False,
) -> SourceSpec:
    """A source over ``entities`` rows matching ``where_sql`` (fixed SQL, no user input).

    ``as_of`` keeps the rows that existed then: created at or before it, or, ``by_validity``
    (semantic memories), valid at it.
    """
    clauses = [where_sql]
    if person_id is not None:
        clauses.append("(t.person_id = %(person_id)s OR t.person_id IS NULL)")
    if as_of is not None and by_validity:
        clauses.append(_VALID_AT)
    params = {"person_id": person_id, "as_of": as_of}
    return _source(
        name=name,
        table="entities",
        fts_column="search_fts",
        clauses=clauses,
        params=params,
        since=since,
        until=until,
        as_of=None if by_validity else as_of,
        vector_kind=ENTITY,
        vector_where_sql="(v.person_id = %(person_id)s OR v.person_id IS NULL)" if person_id is not None else "",
    )


def message_source(
    *,
    name: str,
    person_id: int | None,
    since: datetime | None,
    until: datetime | None,
    channel: str | None,
    as_of: datetime | None = None,
) -> SourceSpec:
    """User/assistant messages of non-cron conversations (optionally one person's, one channel's, up to ``as_of``)."""
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
        as_of=as_of,
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
    as_of: datetime | None = None,
    joins: str = "",
    vector_kind: str = "",
    vector_where_sql: str = "",
) -> SourceSpec:
    """Rows of ``table`` (as ``t``, with ``joins``) matching every clause, created in [since, until), by ``as_of``."""
    if since is not None:
        clauses.append("t.created_at >= %(since)s")
    if until is not None:
        clauses.append("t.created_at < %(until)s")
    if as_of is not None:
        clauses.append("t.created_at <= %(created_by)s")
    return SourceSpec(
        name=name,
        from_sql=f"{table} t{joins}",
        where_sql=" AND ".join(clauses),
        fts_column=fts_column,
        segmented_column="fts_segmented",
        params={**params, "since": since, "until": until, "created_by": as_of},
        table=table,
        vector_kind=vector_kind,
        vector_where_sql=vector_where_sql,
    )
