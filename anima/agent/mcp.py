"""The agent tools over MCP (Model Context Protocol), served with the official ``mcp`` SDK.

One server serves both transports of ``python manage.py mcp``:

- stdio: a local process, so operator access narrowed by the command's ``--person`` /
  ``--conversation`` flags (:func:`mcp_stdio_access`);
- streamable HTTP at ``/mcp``: each request carries an API token (``Authorization: Bearer <key>``
  or ``Token <key>``, the REST API's tokens; none → 401) and acts as the token's binding, which
  ``X-Anima-Person`` / ``X-Anima-Conversation`` may only narrow (outside it → 403 naming why);
  it counts against the token's request limit like the REST API's calls (past it → 429).

The tools are exactly ``anima.agent.tools.TOOLS`` (names, descriptions, JSON schemas), run by
``tool_call``: a malformed or refused call is an MCP tool error naming the field, never a
protocol error. Read-only resources: ``anima://self`` (the self layer) and
``anima://persons/{slug}`` (a person's profile: identities and memories), ``anima://persons/{slug}/entities``
(who and what they talk about) and ``anima://persons/{slug}/entities/{key}`` (one of those, with its timeline).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

import anyio
import mcp_types as types
import uvicorn
from asgiref.sync import sync_to_async
from django.core.serializers.json import DjangoJSONEncoder
from django.db import close_old_connections
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from rest_framework.exceptions import AuthenticationFailed, Throttled
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from anima.agent.tools import TOOLS, ToolError, tool_call
from anima.core.api.throttling import token_throttle_check
from anima.core.errors import AccessDenied, AnimaError, Unavailable
from conversations.access import (
    CONVERSATION_HEADER,
    OPERATOR_ACCESS,
    PERSON_HEADER,
    Access,
    TokenAuthentication,
    access_for_headers,
    access_narrow_by_name,
)
from conversations.models import Person
from memory.selectors import active_semantic_memories, memory_line, self_layer_text
from memory.subjects.entities import entities_markdown, entity_markdown

MCP_PATH = "/mcp"
SELF_URI = "anima://self"
PERSON_URI = "anima://persons/"
ENTITIES = "entities"
# resources/list names persons for discovery; the template reaches any other one.
LISTED_PERSONS = 200
PROFILE_MEMORIES = 100
# Where the HTTP transport keeps a request's access (ASGI scope key) for the handlers.
_ACCESS_KEY = "anima.access"


# --- Who is asking -------------------------------------------------------------------------------


def mcp_stdio_access(*, person: str | None = None, conversation: str | None = None) -> Access:
    """A local process is an operator, narrowed by its flags; contradictory flags raise AccessDenied."""
    return access_narrow_by_name(
        OPERATOR_ACCESS,
        person=person,
        conversation=conversation,
        person_field="--person",
        conversation_field="--conversation",
    )


def mcp_request_access(*, authorization: str, person: str | None, conversation: str | None) -> Access:
    """The access of one HTTP request: the REST API's rules (token, then headers that only narrow).

    Raises AuthenticationFailed (401) without a valid token, Throttled (429) past its request limit,
    AccessDenied (403) for a token without a scope or a header outside its binding, AnimaError (400)
    for a header naming nobody.
    """
    # Unlike the REST API, MCP has no session login to fall back on: no token is a 401 here.
    authenticated = TokenAuthentication().authenticate_authorization(authorization)
    if authenticated is None:
        raise AuthenticationFailed("an API token is required: Authorization: Bearer <key> (or Token <key>)")
    user, token = authenticated
    token_throttle_check(user=user, token=token)
    return access_for_headers(user=user, person=person, conversation=conversation)


def _in_django(func, /, *args: Any, **kwargs: Any):
    """Run ORM work off the event loop, on a fresh-enough connection, as a request would."""

    def run():
        close_old_connections()
        try:
            return func(*args, **kwargs)
        finally:
            close_old_connections()

    return sync_to_async(run, thread_sensitive=True)()


# --- Tools and resources -------------------------------------------------------------------------


def _tool_error(field: str, message: str) -> types.CallToolResult:
    body = {"error": {"field": field, "message": message}}
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(body, ensure_ascii=False))], is_error=True
    )


def mcp_tool_result(*, name: str, arguments: dict[str, Any], access: Access) -> types.CallToolResult:
    """One tool call as an MCP result: the tool's JSON answer, or a tool error naming the field."""
    try:
        result = tool_call(name=name, arguments=arguments, access=access)
    except ToolError as exc:
        return _tool_error(exc.field, str(exc))
    except AccessDenied as exc:
        return _tool_error("access", str(exc))
    except Unavailable as exc:
        return _tool_error("unavailable", str(exc))
    text = json.dumps(result, ensure_ascii=False, cls=DjangoJSONEncoder)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=json.loads(text)
    )


def _person_profile(*, slug: str, access: Access) -> str:
    """A person as markdown: name, channel accounts, then their active memories (most cited first)."""
    person = _person_reached(slug=slug, access=access)
    accounts = ", ".join(f"{i.channel}:{i.external_id}" for i in person.identities.all()) or "none"
    memories = active_semantic_memories().filter(person=person).order_by("-pinned", "-reference_count", "id")
    lines = [memory_line(content=m.content, entity_id=m.pk) for m in memories[:PROFILE_MEMORIES]]
    return "\n".join(
        [f"# {person.display_name or person.slug} ({person.slug})", "", f"Accounts: {accounts}", "", "## Memories"]
        + (lines or ["(none yet)"])
    )


def _person_reached(*, slug: str, access: Access) -> Person:
    person = Person.objects.prefetch_related("identities").filter(slug=slug).first()
    if person is None:
        raise MCPError(types.INVALID_PARAMS, f"unknown person {slug!r}")
    try:
        access.person_for(person)
    except AccessDenied as exc:
        raise MCPError(types.INVALID_REQUEST, str(exc)) from None
    return person


def _entities_text(*, slug: str, key: str | None, access: Access) -> str:
    """A person's entities (``anima://persons/<slug>/entities``) or one of them (``.../entities/<key>``)."""
    person = _person_reached(slug=slug, access=access)
    if key is None:
        return entities_markdown(person=person)
    text = entity_markdown(person=person, key=unquote(key))
    if text is None:
        raise MCPError(types.INVALID_PARAMS, f"{person.slug} has no entity {unquote(key)!r}")
    return text


def _resource_text(*, uri: str, access: Access) -> str:
    if uri == SELF_URI:
        return self_layer_text(viewer_ids=access.person_ids) or "(the self layer is empty)"
    if uri.startswith(PERSON_URI):
        slug, _, rest = uri.removeprefix(PERSON_URI).partition("/")
        if not rest:
            return _person_profile(slug=slug, access=access)
        if rest == ENTITIES or rest.startswith(f"{ENTITIES}/"):
            return _entities_text(slug=slug, key=rest.removeprefix(ENTITIES).removeprefix("/") or None, access=access)
    raise MCPError(
        types.INVALID_PARAMS,
        f"unknown resource {uri!r}; read {SELF_URI}, {PERSON_URI}<slug> or {PERSON_URI}<slug>/{ENTITIES}[/<key>]",
    )


def _resources(*, access: Access) -> list[types.Resource]:
    persons = access.persons(Person.objects.order_by("slug"))[:LISTED_PERSONS]
    return [
        types.Resource(
            name="self", uri=SELF_URI, mime_type="text/markdown", description="Anima's self layer (who it is)."
        ),
        *(
            types.Resource(
                name=f"person {person.slug}",
                uri=f"{PERSON_URI}{person.slug}",
                mime_type="text/markdown",
                description=f"Profile of {person.display_name or person.slug}: accounts and memories.",
            )
            for person in persons
        ),
        *(
            types.Resource(
                name=f"entities of {person.slug}",
                uri=f"{PERSON_URI}{person.slug}/{ENTITIES}",
                mime_type="text/markdown",
                description=f"Who and what {person.display_name or person.slug} talks about: relatives, pets, places.",
            )
            for person in persons
        ),
    ]


def mcp_server(*, access: Access | None = None) -> Server:
    """The MCP server; ``access`` fixes who asks (stdio), else each HTTP request's own is used."""

    def asking(ctx: ServerRequestContext) -> Access:
        if access is not None:
            return access
        return ctx.request.scope[_ACCESS_KEY]

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=tool.name, description=tool.description, input_schema=tool.parameters) for tool in TOOLS
            ]
        )

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await _in_django(mcp_tool_result, name=params.name, arguments=params.arguments or {}, access=asking(ctx))

    async def list_resources(ctx, params) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=await _in_django(_resources, access=asking(ctx)))

    async def list_resource_templates(ctx, params) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            name="person",
            uri_template=f"{PERSON_URI}{{slug}}",
            mime_type="text/markdown",
            description="A person's profile: accounts and memories.",
        )
        entities = types.ResourceTemplate(
            name="entities",
            uri_template=f"{PERSON_URI}{{slug}}/{ENTITIES}",
            mime_type="text/markdown",
            description="Who and what a person talks about: each subject's relation, names, profile and facts.",
        )
        entity = types.ResourceTemplate(
            name="entity",
            uri_template=f"{PERSON_URI}{{slug}}/{ENTITIES}/{{key}}",
            mime_type="text/markdown",
            description="One of a person's subjects (key, relation, name or alias): profile, facts, timeline.",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template, entities, entity])

    async def read_resource(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        text = await _in_django(_resource_text, uri=uri, access=asking(ctx))
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="text/markdown", text=text)]
        )

    return Server(
        "anima",
        instructions="Anima: long-term memory. Recall before answering about the past; cite memories as [[anima:ID]].",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
    )


# --- Transports ----------------------------------------------------------------------------------


def mcp_serve_stdio(*, access: Access) -> None:
    """Serve MCP on stdin/stdout until the client closes them."""
    server = mcp_server(access=access)

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)


class TokenAuth:
    """ASGI middleware: a request to ``/mcp`` is served only with the access its token gives."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(MCP_PATH):
            return await self.app(scope, receive, send)
        headers = Headers(scope=scope)
        try:
            scope[_ACCESS_KEY] = await _in_django(
                mcp_request_access,
                authorization=headers.get("authorization", ""),
                person=headers.get(PERSON_HEADER),
                conversation=headers.get(CONVERSATION_HEADER),
            )
        except AuthenticationFailed as exc:
            response = JSONResponse(
                {"detail": str(exc.detail)}, status_code=401, headers={"WWW-Authenticate": 'Bearer realm="anima"'}
            )
            return await response(scope, receive, send)
        except Throttled as exc:
            retry = {"Retry-After": str(exc.wait)} if exc.wait is not None else {}
            return await JSONResponse({"detail": str(exc.detail)}, status_code=429, headers=retry)(scope, receive, send)
        except AccessDenied as exc:
            return await JSONResponse({"detail": str(exc)}, status_code=403)(scope, receive, send)
        except AnimaError as exc:
            return await JSONResponse({exc.field: [str(exc)]}, status_code=400)(scope, receive, send)
        await self.app(scope, receive, send)


async def _healthz(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


def mcp_http_app(*, host: str) -> ASGIApp:
    """The streamable-HTTP app: ``/mcp`` behind token authentication, plus ``/healthz``."""
    # Stateless: every request stands alone with its own token, so no session outlives a token.
    app = mcp_server().streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        host=host,
        custom_starlette_routes=[Route("/healthz", _healthz)],
    )
    return TokenAuth(app)


def mcp_serve_http(*, host: str, port: int) -> None:
    uvicorn.run(mcp_http_app(host=host), host=host, port=port, log_level="info")
