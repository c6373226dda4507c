"""Reads over memories: recall surfaces, resident memory, the self layer."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import date, datetime, timedelta
from itertools import takewhile
from typing import Any

from django.db import connections
from django.db.models import Case, IntegerField, Q, QuerySet, Value, When
from django.db.models.functions import Coalesce

from anima.core.calendar import moment_bound, moment_iso
from anima.core.config import config_get
from anima.core.db import read_alias, replica_reads
from anima.core.errors import AnimaError
from anima.core.models import BlockTag, Component, Entity, MemoryStatus
from anima.core.search_query import SearchQuery, text_without_names, text_without_speakers
from anima.core.segmentation import text_in_script_of
from conversations.access import Access
from conversations.models import Language, Person
from conversations.selectors import companion_language
from memory.models import NarrativeBlock, SelfBlock, SelfLayerBlock, SemanticMemory
from memory.search import (
    ALL_BRANCHES,
    KEYWORD_BRANCHES,
    MAX_LIMIT,
    SourceSpec,
    clamp_limit,
    entity_source,
    hybrid_search,
    message_source,
    search_query_build,
)
from temporal.selectors import person_names

logger = logging.getLogger(__name__)

RESIDENT_PINNED_HARD_CAP = 40


def active_semantic_memories() -> QuerySet[SemanticMemory]:
    return SemanticMemory.objects.filter(status=MemoryStatus.ACTIVE)


def semantic_memories_held(*, as_of: date | datetime | None = None) -> QuerySet[SemanticMemory]:
    """The semantic memories held at ``as_of`` (a date: the end of that local day), or today's active ones."""
    moment = as_of_moment(as_of)
    if moment is None:
        return active_semantic_memories()
    valid_from = Coalesce("valid_from", "created_at")
    return SemanticMemory.objects.alias(held_from=valid_from).filter(
        Q(valid_to__isnull=True) | Q(valid_to__gt=moment), held_from__lte=moment
    )


def resident_memories(*, person: Person | None = None, global_only: bool = False) -> list[SemanticMemory]:
    """Pinned memories (at most 40; more are cut here with a warning) then the most referenced ones.

    With ``person``: global (person-less) memories plus that person's only; without, all —
    unless ``global_only``, which user-facing callers set when the human is unknown.
    """
    config = config_get(section="memory.resident")
    pinned_limit = min(config["pinned_limit"], RESIDENT_PINNED_HARD_CAP)
    visible = active_semantic_memories().filter(_person_scope(person, global_only=global_only))
    pinned = list(visible.filter(pinned=True).order_by("-reference_count", "id")[: pinned_limit + 1])
    if len(pinned) > pinned_limit:
        logger.warning("more than %d pinned memories; resident memory keeps the first %d", pinned_limit, pinned_limit)
        pinned = pinned[:pinned_limit]
    top = list(
        visible.filter(pinned=False, reference_count__gt=0).order_by("-reference_count", "id")[
            : config["top_referenced"]
        ]
    )
    return pinned + top


def memory_version_ids(*, start: Iterable[int]) -> set[int]:
    """``start`` and, transitively, what it superseded and what was made from it (successors, merges
    naming it, split parts): the versions of a belief, as the timeline shows them and forgetting takes them.
    """
    ids = set(start)
    older = set(ids)
    while older:  # earlier versions: memories superseded by one we have, and the whole a part was split from
        split_from = SemanticMemory.objects.filter(pk__in=older).values_list("body__split_from", flat=True)
        wholes = {pk for pk in split_from if isinstance(pk, int)}
        found = SemanticMemory.objects.filter(Q(superseded_by__in=older) | Q(pk__in=wholes))
        older = set(found.values_list("pk", flat=True)) - ids
        ids |= older
    newer = set(ids)
    while newer:  # what was made from them: successors, merges naming them, split parts
        made = Q(pk__in=SemanticMemory.objects.filter(pk__in=newer).values("superseded_by"))
        for pk in newer:
            made |= Q(body__merged_from__contains=[pk]) | Q(body__split_from=pk)
        newer = set(SemanticMemory.objects.filter(made).values_list("pk", flat=True)) - ids
        ids |= newer
    return ids


def memory_versions(*, memory: SemanticMemory) -> list[SemanticMemory]:
    """Every version of a belief, old to new (``memory_version_ids``).

    Merges and splits make the chain a graph: the memories merged into one version are all its
    predecessors, the parts of a split all its successors. Each row comes with its successor and the
    successor's conversation (what changed it).
    """
    versions = SemanticMemory.objects.filter(pk__in=memory_version_ids(start=[memory.pk])).select_related(
        "superseded_by__source_conversation", "source_conversation"
    )
    return list(versions.order_by("created_at", "pk"))


SEARCH_RANK = "search_rank"
# How many hits recall returns unless asked for more (the API's default ``limit``, the tools').
RECALL_LIMIT = 10
# Every semantic memory, whatever its status: operators search deprecated and expired ones too.
_ALL_SEMANTIC = f"t.primary_component = '{Component.SEMANTIC_MEMORY}'"


def semantic_memory_search_ids(*, text: str) -> list[int]:
    """Ids of semantic memories of any status matching ``text``, best first (the console's search, see ``_listed``);
    among the first ones matching at least half as well as the best (fused z), the active first: the belief held now
    above the versions it replaced, which often say it in more of the query's words. Raises QuerySyntaxError for a
    malformed query."""
    source = entity_source(name="semantic", where_sql=_ALL_SEMANTIC, person_id=None, since=None, until=None)
    with replica_reads():
        query = recall_keywords(text=text, person=None)[0]  # a pasted transcript too, as recall reads it
        hits = hybrid_search(query=query, sources=[source], limit=MAX_LIMIT, text=text)
        ids = _listed((hit.id, hit.scores) for hit in hits)
        z = {hit.id: hit.z for hit in hits}
        close = list(takewhile(lambda pk: z[pk] >= z[ids[0]] / 2 > 0, ids)) if ids else []
        active = set(
            SemanticMemory.objects.using(read_alias())
            .filter(pk__in=close, status=MemoryStatus.ACTIVE)
            .values_list("pk", flat=True)
        )
    return sorted(close, key=lambda pk: pk not in active) + ids[len(close) :]


def semantic_memory_filter_ids(*, query: str, person: Person | None, global_only: bool) -> list[int]:
    """Ids of the active semantic memories matching ``query`` that ``person`` may see, best first (the API's
    ``?q=`` filter, see ``_listed``).

    Raises QuerySyntaxError for a malformed query.
    """
    hits = memory_semantic_search(query=query, limit=MAX_LIMIT, person=person, global_only=global_only)
    return _listed((hit["id"], hit["scores"]) for hit in hits)


def _listed(hits: Iterable[tuple[int, Iterable[str]]]) -> list[int]:
    """The ids of a search used as a filter: every hit a word of the query found, and a hit meaning alone found
    only among the first RECALL_LIMIT (what recall returns unasked). The dense branch ranks every memory: a word
    no memory holds would otherwise list them all, nearest first."""
    keyword = set(KEYWORD_BRANCHES)
    return [
        hit_id for position, (hit_id, branches) in enumerate(hits) if position < RECALL_LIMIT or keyword & set(branches)
    ]


def ranked_by_ids(queryset: QuerySet, *, ids: list[int]) -> QuerySet:
    """``queryset`` narrowed to ``ids``, annotated with each row's position there as ``search_rank``."""
    if not ids:
        return queryset.none().annotate(**{SEARCH_RANK: Value(0)})  # still orderable by the rank
    rank = Case(*(When(pk=pk, then=Value(position)) for position, pk in enumerate(ids)), output_field=IntegerField())
    return queryset.filter(pk__in=ids).annotate(**{SEARCH_RANK: rank})


def memory_line(*, content: str, entity_id: int) -> str:
    """One memory as a prompt line, ending in the marker that cites it."""
    return f"- {content} [[anima:{entity_id}]]"


def resident_memory_lines(*, person: Person | None = None) -> list[str]:
    """One line per resident memory, each ending in its citation marker."""
    return [memory_line(content=memory.content, entity_id=memory.pk) for memory in resident_memories(person=person)]


def _person_scope(person: Person | None, *, global_only: bool = False) -> Q:
    # As in recall: no person means no scoping (sleep's identity context sees every memory),
    # except for a user-facing caller whose human is unknown: global memories only.
    if person is None:
        return Q(person__isnull=True) if global_only else Q()
    return Q(person__isnull=True) | Q(person=person)


def self_layer_blocks(*, language: str | None = None, primary: str | None = None) -> list[SelfLayerBlock]:
    """One non-empty version of each self-layer block, in block order: the one in ``language`` (default: the
    companion's), else the one in the companion's language (``primary``, read when not given), else any, so a
    language not written yet still has a self."""
    primary = primary or companion_language()
    wanted = [language or primary, primary]

    def preference(block: SelfLayerBlock) -> int:
        return wanted.index(block.language) if block.language in wanted else len(wanted)

    chosen: dict[str, SelfLayerBlock] = {}
    for block in SelfLayerBlock.objects.exclude(content="").order_by("id"):
        if block.key not in chosen or preference(block) < preference(chosen[block.key]):
            chosen[block.key] = block
    order = list(SelfBlock.values)
    return sorted(chosen.values(), key=lambda block: order.index(block.key))


def self_layer_text(
    *,
    viewer_ids: frozenset[int] | None = None,
    language: str | None = None,
    headings: str | None = None,
    script: str = "",
) -> str:
    """The six self-layer blocks as prompt text (empty blocks left out), each in ``language`` (default: the
    companion's) where it is written in it (``self_layer_blocks``), headed in ``headings`` (default: ``language``),
    Chinese headings (and the autobiography summary's section headings) in ``script``'s characters
    (``conversation_script``).

    ``viewer_ids``: the persons it is shown to (None: the companion's own calls and the operator, who see
    everything). The autobiography summary lists the titles of every person's narratives; shown to
    persons, a bullet stays only when its narratives are theirs or nobody's, and one no narrative
    matches is left out.
    """
    primary = companion_language()
    language = language or primary
    parts = []
    for block in self_layer_blocks(language=language, primary=primary):
        content = block.content
        if viewer_ids is not None and block.key == SelfBlock.AUTOBIOGRAPHY_SUMMARY:
            content = _outline_for(content, viewer_ids=viewer_ids)
        if script and block.key == SelfBlock.AUTOBIOGRAPHY_SUMMARY:
            # Its section headings are Anima's (「## 转折点」); the titles under them are as the narratives wrote them.
            content = "\n".join(
                text_in_script_of(line, like=script) if line.startswith("## ") else line
                for line in content.splitlines()
            )
        if content:
            parts.append(f"## {text_in_script_of(block.heading(headings or language), like=script)}\n{content}")
    return "\n\n".join(parts)


def _outline_for(content: str, *, viewer_ids: frozenset[int]) -> str:
    """``content`` (sections of "- title" bullets) with only the bullets of the viewers' or nobody's narratives."""
    lines = [line for line in content.splitlines() if line.strip()]
    titles = {line[2:].strip() for line in lines if line.startswith("- ")}
    owners: dict[str, set[int | None]] = {}
    for title, person_id in NarrativeBlock.objects.filter(title__in=titles).values_list("title", "person_id"):
        owners.setdefault(title, set()).add(person_id)

    def shown(title: str) -> bool:
        return title in owners and owners[title] <= viewer_ids | {None}

    sections: list[list[str]] = [[]]
    for line in lines:
        if line.startswith("## "):
            sections.append([line])
        elif not line.startswith("- ") or shown(line[2:].strip()):
            sections[-1].append(line)
    kept = [section for section in sections if section and not (len(section) == 1 and section[0].startswith("## "))]
    return "\n\n".join("\n".join(section) for section in kept)


def identity_context() -> str:
    """Who is thinking: the self layer's blocks and the resident memories, with their citations.

    The companion's own calls: its self layer in its own language, framed in English like their instructions.
    """
    self_layer = self_layer_text(headings=Language.EN) or "(self layer empty)"
    resident = "\n".join(resident_memory_lines()) or "(no resident memories)"
    return f"# Identity context\n\n{self_layer}\n\n## Resident memory\n{resident}"


def diary_blocks_visible(*, access: Access) -> QuerySet[Entity]:
    """The diary blocks ``access`` may read, oldest first: its persons' and the person-less ones, as recall,
    except a person-less dream. The dream step leaves a dream person-less when its material was not one
    known person's (``sleep.steps.dream``), so only an operator reading for everyone sees it.
    """
    blocks = access.owned(Entity.objects.filter(primary_component=Component.CONTENT_BLOCK).order_by("created_at", "id"))
    if access.person_ids is None:
        return blocks
    return blocks.exclude(tag=BlockTag.DREAM, person__isnull=True)


# --- Recall ---

SEMANTIC = "semantic"
SESSION = "session"
LIMBIC = "limbic"
AUTOBIOGRAPHICAL = "autobiographical"
MEMORY_TYPES = (SEMANTIC, SESSION, LIMBIC, AUTOBIOGRAPHICAL)
SNIPPET_CHARS = 240

# ``primary_component || ''`` keeps the planner off the (component, status) btree, which matches every
# memory: the GIN indexes are the selective path (bench/recall_scale.py).
_ENTITY_WHERE = {
    SEMANTIC: f"t.primary_component || '' = '{Component.SEMANTIC_MEMORY}'",
    LIMBIC: f"t.primary_component || '' = '{Component.CONTENT_BLOCK}' AND t.tag = '{BlockTag.LIMBIC}'",
    AUTOBIOGRAPHICAL: f"t.primary_component || '' = '{Component.CONTENT_BLOCK}' AND t.tag = '{BlockTag.NARRATIVE}'",
}
# Today's recall reads active memories; recall "as of" a moment reads the ones valid then, whatever their status.
_ACTIVE_NOW = f" AND t.status || '' = '{MemoryStatus.ACTIVE}'"


def as_of_moment(value: date | datetime | None) -> datetime | None:
    """An ``as_of`` bound, compared inclusively: a datetime as is, a local date as the last instant of that day."""
    if isinstance(value, datetime) or value is None:
        return value
    return moment_bound(value, end_of_day=True) - timedelta(microseconds=1)


def memory_recall(
    *,
    query: str,
    memory_types: Iterable[str] | None = None,
    limit: int = RECALL_LIMIT,
    person: Person | None = None,
    since: date | datetime | None = None,
    until: date | datetime | None = None,
    channel: str | None = None,
    global_only: bool = False,
    as_of: date | datetime | None = None,
    branches: Sequence[str] = ALL_BRANCHES,
    keyword_gate: bool = False,
    min_score: float = 0.0,
    entity: str | None = None,
    entities: bool = True,
) -> list[dict[str, Any]]:
    """Hybrid recall over semantic, session, limbic and autobiographical memory, one ranked list.

    Keyword (FTS, trigram) and, where vectors exist, dense branches of every source, fused on
    normalised scores (``memory.search.score_fuse``); ``score`` is 0..1.

    ``person`` scopes to that person's memories and conversations plus global (person-less)
    memories; without ``person``, ``global_only`` keeps to global memories and no
    conversation snippets (a user-facing caller whose human is unknown). ``since``/``until`` bound
    the creation time (a date means the whole day; both inclusive). ``channel`` restricts
    session hits to conversations of that channel. ``as_of`` recalls what was held then: semantic
    memories valid at that moment (a date means the end of that local day), other rows created by it.
    ``branches`` narrows the branches searched (benchmarks compare keyword-only and dense-only
    recall with the default); ``keyword_gate`` embeds the query only when a keyword branch found
    something (``memory.search.hybrid_search``). ``min_score`` leaves out hits whose calibrated score
    (``memory.search.score_fuse``: the estimated chance that the hit is relevant) is below it.
    Recall through subjects (``memory.subjects.recall``): with ``entities``, a query that names one of
    ``person``'s subjects by a relation word or a name ("my daughter", 「小雨」) also ranks that subject's
    profile, facts and latest lines (branch ``entity``); ``entity`` asks about one subject (its key, relation,
    name or alias): only its profile, then its facts, then its latest lines, the query (which may be empty)
    ordering its facts. Neither applies to a recall ``as_of`` the past (subjects are today's).
    Raises memory.search.QuerySyntaxError for a malformed query, UnknownSubject (field ``entity``) for an
    ``entity`` the person has not.
    """
    types = _memory_types(memory_types)
    if entity and as_of is not None:
        raise AnimaError("an entity is recalled as it is today: leave out as_of", field="entity")
    if not 0.0 <= min_score <= 1.0:
        raise ValueError(f"min_score must be between 0 and 1, not {min_score}")
    limit = clamp_limit(limit)
    start, end = moment_bound(since), moment_bound(until, end_of_day=True)
    moment = as_of_moment(as_of)
    person_id = person.pk if person else None
    # Fixed SQL, no user input: an unknown human sees nobody's private rows.
    unscoped = global_only and person is None
    sources: list[SourceSpec] = []
    for memory_type in types:
        if memory_type == SESSION:
            if unscoped:
                continue  # every conversation is someone's: an unknown human sees none of them
            source = message_source(
                name=SESSION, person_id=person_id, since=start, until=end, channel=channel, as_of=moment
            )
        else:
            where_sql = _ENTITY_WHERE[memory_type] + (" AND t.person_id IS NULL" if unscoped else "")
            if memory_type == SEMANTIC and moment is None:
                where_sql += _ACTIVE_NOW
            source = entity_source(
                name=memory_type,
                where_sql=where_sql,
                person_id=person_id,
                since=start,
                until=end,
                as_of=moment,
                by_validity=memory_type == SEMANTIC,
            )
        sources.append(source)
    # Recall reads the replica when one is configured (unless a caller pinned the primary).
    with replica_reads():
        hits = hybrid_search(
            query=recall_keywords(text=query, person=person)[0],
            sources=sources,
            limit=limit,
            text=query,
            branches=branches,
            keyword_gate=keyword_gate,
        )
        if moment is None and (entity or entities):
            # Imported here: memory.subjects reads this module's selectors.
            from memory.subjects.recall import entity_expand

            hits = entity_expand(
                hits=hits,
                person=person,
                query=query,
                entity=entity,
                expand=entities,
                memory_types=types,
                since=start,
                until=end,
                channel=channel,
            )
        # A fact a little further down may rise above the lines it was made from (``_facts_first``).
        results = _results(hits[: limit + RECALL_LIMIT], in_order=bool(entity))
        return [result for result in results if result["score"] >= min_score][:limit]


def person_own_names(*, person: Person) -> list[str]:
    """What ``person`` is called in their own conversations: their names (``person_names``), each of several words
    also by its first ("Maya" of "Maya Silva", as a chat calls her); one spelling a name, case aside."""
    names: dict[str, str] = {}  # "maya" the slug, "Maya" the label
    for name in person_names(person=person):
        for spelling in (name, name.split()[0]):
            if len(spelling) > 1:
                names.setdefault(spelling.casefold(), spelling)
    return list(names.values())


def recall_keywords(*, text: str, person: Person | None) -> tuple[SearchQuery, list[str]]:
    """What recall's keyword branches search for ``text``, and the names it left out of it: the scoped person's own.

    In one person's scope every row is theirs, so their name tells no two apart, and where it stands (a line
    addressing them, a diary block, most of their facts) it says nothing about what was asked: "What is Maya's
    job?" is about a job. The meaning of the whole text, name and all, is still what the dense branch embeds. A
    query with operators or quotes says exactly what it wants, and a query of nothing but the name (rows naming
    them) keeps it. A transcript is searched by what its lines say (``text_without_speakers``), as the dense branch
    embeds it. Raises QuerySyntaxError for a malformed query.
    """
    text = text_without_speakers(text)
    built = search_query_build(text=text)
    names = person_own_names(person=person) if person is not None and not built.explicit else []
    left_out = [name for name in names if text_without_names(text, names=[name]) != text]
    if not left_out:
        return built, []
    rest = search_query_build(text=text_without_names(text, names=left_out))
    return (built, []) if rest.is_empty else (rest, left_out)


def memory_semantic_search(
    *,
    query: str,
    limit: int = RECALL_LIMIT,
    person: Person | None = None,
    since=None,
    until=None,
    global_only: bool = False,
    as_of: date | datetime | None = None,
    branches: Sequence[str] = ALL_BRANCHES,
    keyword_gate: bool = False,
    min_score: float = 0.0,
    entity: str | None = None,
    entities: bool = True,
) -> list[dict[str, Any]]:
    """Semantic memories only (the memory_semantic_search tool, passive recall)."""
    return memory_recall(
        query=query,
        memory_types=[SEMANTIC],
        limit=limit,
        person=person,
        since=since,
        until=until,
        global_only=global_only,
        as_of=as_of,
        branches=branches,
        keyword_gate=keyword_gate,
        min_score=min_score,
        entity=entity,
        entities=entities,
    )


def _memory_types(memory_types: Iterable[str] | None) -> list[str]:
    if memory_types is None:
        return list(MEMORY_TYPES)
    types = list(dict.fromkeys(memory_types))
    unknown = [t for t in types if t not in MEMORY_TYPES]
    if unknown or not types:
        raise ValueError(f"unknown memory type(s) {unknown or types}; use {', '.join(MEMORY_TYPES)}")
    return types


# The conversations a memory or diary block was made in: its source conversation and those its body lists.
_MADE_IN_SQL = (
    "array_remove(ARRAY[e.source_conversation_id] || ARRAY(SELECT x::bigint FROM jsonb_array_elements_text("
    "CASE WHEN jsonb_typeof(e.body -> 'source_conversations') = 'array' THEN e.body -> 'source_conversations'"
    " END) AS x WHERE x ~ '^[0-9]{1,18}$'), NULL)"
)
# The rows of recall's hits, memories and messages in one statement: the two ORM queries it replaced cost four
# times the CPU on every recall (1.3 against 0.3 ms, the same results, over 60 searches of the load benchmark's data).
_HIT_ROWS_SQL = (
    "SELECT false, e.id, e.external_id, e.content, e.created_at, e.valid_from, e.valid_to, NULL, NULL,"
    f" {_MADE_IN_SQL} FROM entities e WHERE e.id = ANY(%(entities)s)"
    " UNION ALL SELECT true, m.id, m.external_id, m.content, m.created_at, NULL, NULL, m.role, c.external_id,"
    " ARRAY[m.conversation_id]"
    " FROM messages m JOIN conversations c ON c.id = m.conversation_id WHERE m.id = ANY(%(messages)s)"
)
_HIT_ROW_FIELDS = (
    "id",
    "external_id",
    "content",
    "created_at",
    "valid_from",
    "valid_to",
    "role",
    "conversation",
    "made_in",
)
# Facts first: a semantic memory made in a conversation ranks at least as high as that conversation's lines and
# diary blocks the query found, when it answers the query at least this share as well as the best of them.
FACT_SHARE = 0.5


def _facts_first(results: list[dict[str, Any]], *, sources: dict[int, set[int]]) -> list[dict[str, Any]]:
    """``results`` with the best semantic memory made in a conversation (``sources``: result index -> the
    conversations its row was made in) raised to the score of the best line or diary block of that conversation
    the query found, when it scores at least FACT_SHARE of it; at equal scores facts come first. The fact is what
    was learnt from those lines: "Maya is allergic to peanuts" above "with a peanut allergy it's never worth the
    risk". Only the best: the conversation's other facts ("Leo is the backend lead" for an e-mail question)
    answer the query less well than the one it found."""
    lines: dict[int, float] = {}
    facts: dict[int, float] = {}
    for index, result in enumerate(results):
        best = lines if result["memory_type"] != SEMANTIC else facts
        for conversation in sources.get(index, ()):
            best[conversation] = max(best.get(conversation, 0.0), result["score"])
    for index, result in enumerate(results):
        if result["memory_type"] != SEMANTIC:
            continue
        made_in = [c for c in sources.get(index, ()) if c in lines and result["score"] >= facts[c]]
        found = max((lines[conversation] for conversation in made_in), default=None)
        if found is not None and result["score"] >= FACT_SHARE * found:
            result["score"] = max(result["score"], found)
    order = sorted(range(len(results)), key=lambda i: (-results[i]["score"], results[i]["memory_type"] != SEMANTIC, i))
    return [results[i] for i in order]


def _results(hits, *, in_order: bool = False) -> list[dict[str, Any]]:
    """The rows of ``hits`` as recall's results, facts first (``_facts_first``) unless kept ``in_order``."""
    ids = {
        "entities": [hit.id for hit in hits if hit.source != SESSION],
        "messages": [hit.id for hit in hits if hit.source == SESSION],
    }
    rows: dict[tuple[bool, int], dict[str, Any]] = {}
    if hits:
        # Recall's callers read inside ``replica_reads``: the replica's rows, as the search's.
        with connections[read_alias()].cursor() as cursor:
            cursor.execute(_HIT_ROWS_SQL, ids)
            for is_message, *values in cursor.fetchall():
                rows[(is_message, values[0])] = dict(zip(_HIT_ROW_FIELDS, values, strict=True))
    results, sources = [], {}
    for hit in hits:
        row = rows.get((hit.source == SESSION, hit.id))
        if row is None:  # deleted since the search
            continue
        sources[len(results)] = set(row["made_in"])
        result = {
            "memory_type": hit.source,
            "id": hit.id,
            "external_id": row["external_id"],
            "score": round(hit.score, 6),
            "snippet": row["content"][:SNIPPET_CHARS],
            "created_at": moment_iso(row["created_at"]),
            "conversation_external_id": row["conversation"],
            "message_external_id": row["external_id"] if hit.source == SESSION else None,
            # Explainable recall: which branch found the hit, at which 1-based rank, with which score.
            "ranks": dict(hit.ranks),
            "scores": {branch: round(score, 6) for branch, score in hit.scores.items()},
        }
        if hit.source == SEMANTIC:
            result["semantic_memory_id"] = hit.id
            # Belief history: since when the fact is held and, for one recalled "as of" the past, until when.
            result["valid_from"] = _iso(row["valid_from"])
            result["valid_to"] = _iso(row["valid_to"])
        if hit.source == SESSION:
            result["role"] = row["role"]
        results.append(result)
    return results if in_order else _facts_first(results, sources=sources)


def _iso(moment: datetime | None) -> str | None:
    return moment_iso(moment) if moment else None
