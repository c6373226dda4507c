"""Agent tools: one registry of OpenAI function-calling schemas and the functions they call.

``GET /api/tools/`` publishes :func:`tool_schemas`; ``POST /api/tools/{name}/`` runs
:func:`tool_call`, which validates the arguments against the very schema it publishes.
A new tool (e.g. ``update_short_term_memory`` once turn assembly exists) is one more
``Tool`` entry in ``TOOLS``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from anima.agent.stm import stm_tool_available, update_short_term_memory
from anima.core.calendar import moment_iso, moment_parse
from anima.core.db import search_time_limit
from anima.core.errors import AnimaError
from anima.core.llm.schema import (
    SchemaError,
    schema_array,
    schema_boolean,
    schema_enum,
    schema_integer,
    schema_number,
    schema_object,
    schema_string,
    schema_validate,
)
from anima.core.models import MemoryType
from anima.core.search_query import QuerySyntaxError
from conversations.access import AGENT, OPERATOR, OPERATOR_ACCESS, Access
from conversations.models import Conversation, Person, person_slug_valid
from conversations.selectors import history_search, identity_resolve
from conversations.services import identity_map
from memory.forgetting import memory_forget
from memory.models import SemanticMemory
from memory.search import MAX_LIMIT
from memory.selectors import (
    MEMORY_TYPES,
    RECALL_LIMIT,
    memory_recall,
    memory_semantic_search,
    semantic_memories_held,
)
from memory.services import memory_remember

CITATION_RULE = (
    "When a reply uses a memory, cite it with its marker [[anima:ID]] (ID = the result's id); "
    "never invent ids, and do not cite session or history snippets."
)
WRITING_GUIDELINES = (
    "Before writing, ask: will this still be useful next week or next month? Will it affect future "
    "decisions? Is it a stable fact rather than a passing state? Only when all three are yes, remember it "
    "(preferences, identity facts such as location, long-term goals, important agreements); one-off events "
    "and conversation summaries belong in history, or nowhere. One fact per call, in a short standalone sentence."
)


class ToolError(AnimaError):
    """A tool call that cannot run; ``field`` names the offending argument."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message, field=field)


class UnknownTool(ToolError):
    """A call naming no tool (a 404 over REST, a tool error over MCP)."""

    def __init__(self, name: str) -> None:
        super().__init__("name", f"unknown tool {name!r}; one of {', '.join(tool.name for tool in TOOLS)}")


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    func: Callable[[dict[str, Any], Access], dict[str, Any]]

    def as_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


# --- Argument schemas and readers -----------------------------------------------------------------

_SLUG = schema_string(min_length=1, max_length=64, description="Person slug, e.g. leo.")
_LIMIT = schema_integer(minimum=1, maximum=MAX_LIMIT, description=f"Maximum results (default {RECALL_LIMIT}).")
_MIN_SCORE = schema_number(
    minimum=0.0,
    maximum=1.0,
    description="Only hits at least this likely to be relevant (each hit's score, 0..1; default 0: every hit).",
)
_SINCE = schema_string(description="Only after this date or datetime (ISO 8601, inclusive).")
_UNTIL = schema_string(description="Only before this date or datetime (ISO 8601, inclusive).")
_AS_OF = schema_string(
    description=(
        "Answer from belief history: what was held at this date (the end of that day) or ISO datetime, "
        "e.g. to say what you thought last week. Default: now."
    )
)
_CHANNEL = schema_string(min_length=1, max_length=64, description="Channel, e.g. telegram, cli.")
_ENTITY = schema_string(
    min_length=1,
    max_length=200,
    description=(
        "Ask about one of the person's subjects (a relative, pet or place: its relation, name or alias, e.g. "
        "daughter, Lily, 小雨): its profile first, then its facts and the latest lines naming it."
    ),
)
_CHAT_ID = schema_string(min_length=1, max_length=200, description="Account or chat id on the channel.")
_MEMORY_TYPE = schema_enum(MemoryType.values, description="Kind of fact (default world).")


def _text(description: str, *, max_length: int = 10_000) -> dict[str, Any]:
    return schema_string(min_length=1, max_length=max_length, description=description)


def _person(args: dict[str, Any], access: Access, *, required: bool = False) -> Person | None:
    """The person a call acts for, within what ``access`` reaches.

    A channel account (``channel`` + ``chat_id``) is a conversation's context: the person it
    resolves to is the person, full stop (an unmapped account is nobody: global memories only),
    and a ``person`` naming anyone else is refused. Without an account, ``person`` names the
    person, else the one the token acts for.
    """
    slug = args.get("person")
    named = None
    if slug:
        named = Person.objects.filter(slug=slug).first()
        if named is None:
            raise ToolError("person", f"unknown person {slug!r}; map an identity to create one")
    if args.get("channel") and args.get("chat_id"):
        account = f"{args['channel']}:{args['chat_id']}"
        resolved = identity_resolve(channel=args["channel"], external_id=args["chat_id"])
        if named is not None and resolved != named:
            owner = f"mapped to {resolved.slug}" if resolved else "not mapped to a person"
            raise ToolError("person", f"{account} is {owner}: a call from it cannot act for {slug}")
        if resolved is None:
            if required:
                raise ToolError("chat_id", f"{account} is not mapped to a person")
            return None
        return access.person_for(resolved)
    person = access.person_for(named)
    if person is None and required:
        raise ToolError("person", "person (or channel and chat_id of a mapped identity) is required")
    return person


def _require(args: dict[str, Any], *names: str) -> None:
    for name in names:
        if not args.get(name):
            raise ToolError(name, f"{name} is required for this action")


def _memory_json(memory) -> dict[str, Any]:
    return {
        "id": memory.pk,
        "memory_type": memory.memory_type,
        "content": memory.content,
        "person": memory.person.slug if memory.person_id else None,
        "pinned": memory.pinned,
        "status": memory.status,
        "citation": f"[[anima:{memory.pk}]]",
    }


# --- Tool functions ------------------------------------------------------------------------------


# Tools act for a conversation's runtime: a call whose human is unknown (no person, or an
# unmapped channel account) sees global memories only, never someone else's.
def _query_or_entity(args: dict[str, Any]) -> str:
    if not args.get("query") and not args.get("entity"):
        raise ToolError("query", "query is required (it may be left out when asking about an entity)")
    return args.get("query", "")


def _recall(args: dict[str, Any], access: Access) -> dict[str, Any]:
    results = memory_recall(
        query=_query_or_entity(args),
        memory_types=args.get("memory_types"),
        limit=int(args.get("limit", RECALL_LIMIT)),
        person=_person(args, access),
        since=moment_parse(args.get("since"), field="since"),
        until=moment_parse(args.get("until"), field="until"),
        channel=args.get("channel"),
        global_only=True,
        as_of=moment_parse(args.get("as_of"), field="as_of"),
        min_score=float(args.get("min_score", 0.0)),
        entity=args.get("entity"),
    )
    return {"results": results}


def _semantic_search(args: dict[str, Any], access: Access) -> dict[str, Any]:
    results = memory_semantic_search(
        query=_query_or_entity(args),
        limit=int(args.get("limit", RECALL_LIMIT)),
        person=_person(args, access),
        since=moment_parse(args.get("since"), field="since"),
        until=moment_parse(args.get("until"), field="until"),
        global_only=True,
        as_of=moment_parse(args.get("as_of"), field="as_of"),
        min_score=float(args.get("min_score", 0.0)),
        entity=args.get("entity"),
    )
    return {"results": results}


def _remember(args: dict[str, Any], access: Access) -> dict[str, Any]:
    person = _person(args, access)
    access.write_check(person, what="a memory")
    source = args.get("scope") == "source"
    if source:
        _require(args, "channel", "chat_id")
        # A source note belongs to the account's own person: never file it under someone else.
        owner = identity_resolve(channel=args["channel"], external_id=args["chat_id"])
        if owner is None or owner != person:
            raise ToolError("chat_id", f"{args['channel']}:{args['chat_id']} is not mapped to this person")
    memory, _ = memory_remember(
        content=args["content"],
        memory_type=args.get("memory_type", MemoryType.WORLD),
        person=person,
        pinned=bool(args.get("pinned", False)),
        source_channel=args["channel"] if source else "",
        source_id=args["chat_id"] if source else "",
    )
    return {"memory": _memory_json(memory)}


def _person_memory(args: dict[str, Any], access: Access) -> dict[str, Any]:
    action = args["action"]
    if action == "recall":
        person = _person(args, access, required=True)
        if args.get("query"):
            return _recall({**args, "person": person.slug, "memory_types": ["semantic"]}, access)
        held = semantic_memories_held(as_of=moment_parse(args.get("as_of"), field="as_of"))
        memories = held.filter(person=person).select_related("person")
        memories = memories.order_by("-pinned", "-reference_count", "id")[: int(args.get("limit", 50))]
        return {"person": person.slug, "memories": [_memory_json(memory) for memory in memories]}
    if action == "remember":
        _require(args, "content")
        _person(args, access, required=True)
        return _remember(args, access)
    if action == "forget":
        return _forget(args, access)
    if action == "search_history":
        # The person's timeline (by slug, or the mapped channel account), else the global one only.
        person = _person(args, access)
        entries = history_search(
            text=args.get("query", ""),
            since=moment_parse(args.get("since"), field="since"),
            until=moment_parse(args.get("until"), field="until"),
            channel=args.get("channel"),
            person=person,
            global_only=person is None,
            # An agent speaks to someone: another person's digests stay out, whoever holds the token.
            private=True,
            limit=int(args.get("limit", RECALL_LIMIT)),
        )
        with search_time_limit(what="history search"):
            entries = list(entries)
        return {
            "entries": [
                {
                    "cursor": entry.cursor,
                    "timestamp": moment_iso(entry.timestamp),
                    "content": entry.content,
                    "channel": entry.channel,
                    "person": entry.person.slug if entry.person_id else None,
                }
                for entry in entries
            ]
        }
    _require(args, "channel", "chat_id", "person")
    if not person_slug_valid(args["person"]):
        raise ToolError("person", "person must be a slug (lowercase letters, digits, - or _)")
    # map_identity decides whose memories an account reaches: operators, within their narrowing.
    access.identity_map_check(channel=args["channel"], external_id=args["chat_id"], person_slug=args["person"])
    identity = identity_map(
        channel=args["channel"],
        external_id=args["chat_id"],
        person_slug=args["person"],
        display_name=args.get("display_name", ""),
    )
    return {"identity": {"channel": identity.channel, "chat_id": identity.external_id, "person": identity.person.slug}}


def _forget(args: dict[str, Any], access: Access) -> dict[str, Any]:
    """Forget one of the caller's own memories, asked from their own conversation (channel + chat_id)."""
    _require(args, "memory_id", "channel", "chat_id")
    person = _person(args, access, required=True)
    access.write_check(person, what="forgetting a memory")
    memory = SemanticMemory.objects.filter(pk=args["memory_id"]).first()
    if memory is None or memory.person_id != person.pk:
        # Someone else's memory, a global one or none: the same answer, so ids reveal nothing.
        raise ToolError("memory_id", f"memory {args['memory_id']} is not one of {person.slug}'s memories")
    tombstone = memory_forget(memory=memory, requested_by=f"tool:{args['channel']}:{args['chat_id']}")
    return {"forgotten": tombstone.entity_ids, "tombstone": tombstone.pk}


def _short_term_memory(args: dict[str, Any], access: Access) -> dict[str, Any]:
    # One the caller cannot see is answered like one that does not exist.
    conversation = access.conversations(Conversation.objects.filter(pk=args["conversation_id"])).first()
    if conversation is None:
        raise ToolError("conversation_id", f"no conversation {args['conversation_id']}")
    return update_short_term_memory(
        conversation=conversation, summary=args["summary"], turn_id=args.get("turn_id") or None
    )


TOOLS: tuple[Tool, ...] = (
    Tool(
        name="memory_recall",
        description=(
            "Search long-term memory: semantic facts, past conversation snippets (session), emotional "
            "anchors (limbic) and autobiographical narrative, ranked together. Use it when the user refers "
            "to something from before or when past context would change your answer. Query with the key "
            "words (AND / OR / NOT and quoted phrases work). " + CITATION_RULE
        ),
        parameters=schema_object(
            {
                "query": _text("What to look for (required unless entity is given)."),
                "memory_types": schema_array(
                    schema_enum(MEMORY_TYPES),
                    max_items=len(MEMORY_TYPES),
                    description="Restrict to these sources (default all).",
                ),
                "limit": _LIMIT,
                "min_score": _MIN_SCORE,
                "person": _SLUG,
                "since": _SINCE,
                "until": _UNTIL,
                "as_of": _AS_OF,
                "channel": {**_CHANNEL, "description": "Only conversation snippets from this channel."},
                "entity": _ENTITY,
            },
        ),
        func=_recall,
    ),
    Tool(
        name="memory_semantic_search",
        description="Search stable semantic facts only (preferences, identity, goals). " + CITATION_RULE,
        parameters=schema_object(
            {
                "query": _text("What to look for (required unless entity is given)."),
                "limit": _LIMIT,
                "min_score": _MIN_SCORE,
                "person": _SLUG,
                "since": _SINCE,
                "until": _UNTIL,
                "as_of": _AS_OF,
                "entity": _ENTITY,
            },
        ),
        func=_semantic_search,
    ),
    Tool(
        name="memory_remember",
        description=(
            "Write one stable fact to long-term semantic memory (an identical fact is not stored twice). "
            + WRITING_GUIDELINES
        ),
        parameters=schema_object(
            {
                "content": _text("The fact, one short standalone sentence."),
                "memory_type": _MEMORY_TYPE,
                "person": {**_SLUG, "description": "Person the fact is about (omit for a global fact)."},
                "pinned": schema_boolean(description="Keep it in every system prompt (rarely needed)."),
            },
            required=("content",),
        ),
        func=_remember,
    ),
    Tool(
        name="memory",
        description=(
            "Person memory. Actions: recall (a person's memories; with query, search them), remember (a stable "
            "fact about a person; scope=source ties it to the channel account channel+chat_id), search_history "
            "(timeline events by text, time range and channel; without a person, the global timeline), "
            "map_identity (map channel+chat_id to person, creating the person), forget (memory_id: erase one of the "
            "person's own memories everywhere, when they ask you to forget it; only from their own conversation, "
            "channel+chat_id). Name the person by slug, or by "
            "channel+chat_id of a mapped account. Do not edit SOUL.md / USER.md / memory/MEMORY.md: the sleep "
            "cycle owns them. " + WRITING_GUIDELINES + " " + CITATION_RULE
        ),
        parameters=schema_object(
            {
                "action": schema_enum(["recall", "remember", "search_history", "map_identity", "forget"]),
                "person": _SLUG,
                "channel": _CHANNEL,
                "chat_id": _CHAT_ID,
                "display_name": schema_string(max_length=200, description="map_identity: person's name."),
                "query": _text("recall / search_history: what to look for."),
                "content": _text("remember: the fact."),
                "memory_id": schema_integer(minimum=1, description="forget: the memory's id (from recall)."),
                "memory_type": _MEMORY_TYPE,
                "scope": schema_enum(["person", "source"], description="remember: default person."),
                "since": _SINCE,
                "until": _UNTIL,
                "as_of": {**_AS_OF, "description": "recall: " + _AS_OF["description"]},
                "limit": _LIMIT,
            },
            required=("action",),
        ),
        func=_person_memory,
    ),
    Tool(
        name="update_short_term_memory",
        description=(
            "Replace the short-term summary of this conversation: what matters from the dialogue so far, in a "
            "few sentences (cut to the configured length). It is rendered instead of older raw messages in the "
            "next turns. At most one call per turn. Not for lasting facts: when the user asks you to remember "
            "something for the long term, use memory_remember instead."
        ),
        parameters=schema_object(
            {
                "conversation_id": schema_integer(minimum=1, description="The current conversation."),
                "summary": _text("The new short-term summary.", max_length=20_000),
                "turn_id": schema_string(max_length=64, description="Turn id (default: latest user message)."),
            },
            required=("conversation_id", "summary"),
        ),
        func=_short_term_memory,
    ),
)


_TOOLS_BY_NAME = {tool.name: tool for tool in TOOLS}


def tool_schemas(*, conversation: Conversation | None = None) -> list[dict[str, Any]]:
    """The tools to offer; for a ``conversation``, the short-term-memory tool only when its turn allows it

    (not when the user asked for long-term memory — 「记住…」, "remember this" — nor twice in one turn).
    """
    offered = TOOLS
    if conversation is not None and not stm_tool_available(conversation=conversation):
        offered = tuple(tool for tool in TOOLS if tool.name != "update_short_term_memory")
    return [tool.as_openai() for tool in offered]


def tool_call(*, name: str, arguments: Any, access: Access = OPERATOR_ACCESS) -> dict[str, Any]:
    """Validate ``arguments`` against the tool's published schema and run it as ``access`` may.

    ``access`` is the caller's (``conversations.access``); the default, an operator, is for
    local processes. Raises UnknownTool, ToolError naming the argument on bad input and
    AccessDenied (403) for a call outside the caller's reach.
    """
    tool = _TOOLS_BY_NAME.get(name)
    if tool is None:
        raise UnknownTool(name)
    access.require(OPERATOR, AGENT, to="tool calls")
    try:
        schema_validate(value=arguments, schema=tool.parameters)
    except SchemaError as exc:
        first = exc.errors[0]
        field = first.split(":", 1)[0].removeprefix("$").lstrip(".") or "arguments"
        raise ToolError(field, str(exc)) from None
    try:
        return tool.func(arguments, access)
    except ToolError:
        raise
    except QuerySyntaxError as exc:
        raise ToolError("query", str(exc)) from None
    except AnimaError as exc:  # a bad date, a text over the size limit: the field it names
        raise ToolError(exc.field, str(exc)) from None
    except ValidationError as exc:
        field, messages = next(iter(exc.message_dict.items()))
        raise ToolError(field, "; ".join(messages)) from None
    except ValueError as exc:
        # The only other ValueError the recall surfaces raise: an empty or unknown memory_types list.
        raise ToolError("memory_types", str(exc)) from None
