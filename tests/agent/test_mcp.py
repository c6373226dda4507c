"""The MCP server as an MCP client meets it: the SDK's own client over real stdio and real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import anyio
import httpx2
import pytest
from django.conf import settings
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from anima.agent.tools import tool_schemas
from anima.api.testing import api_client, api_token
from conversations.models import Identity
from memory.models import SemanticMemory
from tests.factories import (
    ConversationFactory,
    IdentityFactory,
    PersonFactory,
    SelfLayerBlockFactory,
    SemanticMemoryFactory,
)
from tests.served import free_port, run_manage, served, served_env

pytestmark = pytest.mark.usefixtures("transactional_db")  # the server process reads committed rows


def stdio(*flags: str) -> Client:
    params = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp", *flags], env=served_env(), cwd=str(settings.BASE_DIR)
    )
    return Client(params)


def over_http(url: str, token: str | None, **headers: str) -> Client:
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=30)))


@pytest.fixture
def mcp_http(tmp_path):
    port = free_port()
    command = [sys.executable, "manage.py", "mcp", "--transport", "http", "--port", str(port)]
    with served(command, port=port, log=tmp_path / "mcp.log", env=served_env()) as app:
        yield app


def tools_list_posted(url: str, headers: dict[str, str]) -> tuple[int, dict[str, str], dict]:
    """A bare ``tools/list`` POST: its status, headers (lower-case names) and JSON body."""
    request = urllib.request.Request(
        url,
        data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, json.loads(error.read())


def payload(result) -> dict:
    return json.loads(result.content[0].text)


def test_stdio_lists_the_tool_registry_recalls_and_names_the_field_of_bad_arguments():
    leo = PersonFactory(slug="leo")
    cat = SemanticMemoryFactory(content="Leo's cat is called Miso", person=leo)
    SemanticMemoryFactory(content="Ada's cat is called Pixel", person=PersonFactory(slug="ada"))
    SelfLayerBlockFactory(content="I am Anima, a patient companion.")

    async def session() -> tuple:
        async with stdio("--person", "leo") as client:
            tools = await client.list_tools()
            recalled = await client.call_tool("memory_recall", {"query": "cat"})
            bad = await client.call_tool("memory_recall", {"query": "cat", "limit": "many"})
            unknown = await client.call_tool("memory_forget_everything", {})
            self_layer = await client.read_resource("anima://self")
            profile = await client.read_resource("anima://persons/leo")
            return tools, recalled, bad, unknown, self_layer, profile

    tools, recalled, bad, unknown, self_layer, profile = anyio.run(session)

    published = {schema["function"]["name"]: schema["function"] for schema in tool_schemas()}
    assert [tool.name for tool in tools.tools] == list(published)
    for tool in tools.tools:
        assert tool.description == published[tool.name]["description"]
        assert tool.input_schema == published[tool.name]["parameters"]
    assert not recalled.is_error
    contents = [hit["snippet"] for hit in payload(recalled)["results"]]
    assert cat.content in contents
    assert not any("Pixel" in content for content in contents)  # --person leo: never Ada's memories
    assert bad.is_error
    assert payload(bad)["error"]["field"] == "limit"
    assert unknown.is_error and payload(unknown)["error"]["field"] == "name"
    assert "patient companion" in self_layer.contents[0].text
    assert f"Leo's cat is called Miso [[anima:{cat.pk}]]" in profile.contents[0].text


def test_stdio_remembers_for_the_person_of_its_conversation():
    leo = PersonFactory(slug="leo")
    ConversationFactory(external_id="leo-chat", person=leo)

    async def session():
        async with stdio("--conversation", "leo-chat") as client:
            return await client.call_tool("memory_remember", {"content": "Leo moved to Hangzhou"})

    result = anyio.run(session)

    assert not result.is_error, result.content
    assert SemanticMemory.objects.get(content="Leo moved to Hangzhou").person == leo


def test_stdio_narrowed_to_a_person_cannot_take_over_another_persons_account():
    PersonFactory(slug="leo")
    IdentityFactory(channel="telegram", external_id="maya-phone", person=PersonFactory(slug="maya"))

    def map_identity(chat_id: str) -> dict:
        return {"action": "map_identity", "channel": "telegram", "chat_id": chat_id, "person": "leo"}

    async def session() -> tuple:
        async with stdio("--person", "leo") as client:
            return await client.call_tool("memory", map_identity("maya-phone")), await client.call_tool(
                "memory", map_identity("leo-laptop")
            )

    takeover, own = anyio.run(session)

    assert takeover.is_error and payload(takeover)["error"]["field"] == "access"
    assert "telegram:maya-phone is mapped to another person" in payload(takeover)["error"]["message"]
    assert not own.is_error, own.content
    assert dict(Identity.objects.values_list("external_id", "person__slug")) == {
        "maya-phone": "maya",
        "leo-laptop": "leo",
    }


def test_stdio_refuses_contradictory_flags():
    PersonFactory(slug="leo")
    ConversationFactory(external_id="ada-chat", person=PersonFactory(slug="ada"))

    with pytest.raises(subprocess.CalledProcessError) as failed:
        run_manage("mcp", "--person", "leo", "--conversation", "ada-chat", env=served_env())

    assert "person leo is outside" in failed.value.stderr


def test_http_serves_tools_to_a_bearer_token_scoped_by_its_binding(mcp_http):
    leo, ada = PersonFactory(slug="leo"), PersonFactory(slug="ada")
    SemanticMemoryFactory(content="Leo's cat is called Miso", person=leo)
    SemanticMemoryFactory(content="Ada's cat is called Pixel", person=ada)
    token = api_token(username="leo-bot", scope="agent", persons=[leo])
    url = f"{mcp_http.url}/mcp"

    async def session() -> tuple:
        async with over_http(url, token) as client:
            tools = await client.list_tools()
            recalled = await client.call_tool("memory_recall", {"query": "cat"})
            outside = await client.call_tool("memory_recall", {"query": "cat", "person": "ada"})
            bad = await client.call_tool("memory_remember", {"content": ""})
            resources = await client.list_resources()
            with pytest.raises(MCPError) as profile:
                await client.read_resource("anima://persons/ada")
        return tools, recalled, outside, bad, resources, profile.value

    tools, recalled, outside, bad, resources, profile = anyio.run(session)

    assert [tool.name for tool in tools.tools] == [schema["function"]["name"] for schema in tool_schemas()]
    assert [hit["snippet"] for hit in payload(recalled)["results"]] == ["Leo's cat is called Miso"]
    assert outside.is_error
    assert "person ada is outside an agent token bound to persons leo" in payload(outside)["error"]["message"]
    assert bad.is_error and payload(bad)["error"]["field"] == "content"
    assert {str(resource.uri) for resource in resources.resources} == {
        "anima://self",
        "anima://persons/leo",
        "anima://persons/leo/entities",
    }
    assert "person ada is outside" in profile.message


def test_http_headers_only_narrow_and_a_missing_token_is_401(mcp_http):
    leo, ada = PersonFactory(slug="leo"), PersonFactory(slug="ada")
    SemanticMemoryFactory(content="Leo's cat is called Miso", person=leo)
    SemanticMemoryFactory(content="Ada's cat is called Pixel", person=ada)
    operator = api_token(username="root", staff=True)
    leo_bot = api_token(username="leo-bot", scope="agent", persons=[leo])
    url = f"{mcp_http.url}/mcp"

    async def narrowed():
        async with over_http(url, operator, **{"X-Anima-Person": "ada"}) as client:
            return await client.call_tool("memory_recall", {"query": "cat"})

    recalled = anyio.run(narrowed)
    assert [hit["snippet"] for hit in payload(recalled)["results"]] == ["Ada's cat is called Pixel"]

    def post(headers: dict[str, str]) -> tuple[int, dict]:
        status, _, body = tools_list_posted(url, headers)
        return status, body

    status, body = post({})
    assert status == 401
    assert "Bearer" in body["detail"]
    assert post({"Authorization": "Bearer not-a-token"})[0] == 401
    status, body = post({"Authorization": f"Token {leo_bot}", "X-Anima-Person": "ada"})
    assert status == 403
    assert body["detail"] == "person ada is outside an agent token bound to persons leo"
    status, body = post({"Authorization": f"Bearer {api_token(username='nobody')}"})
    assert status == 403
    assert "token_scope" in body["detail"]


def test_http_holds_a_token_to_its_request_limit_with_retry_after(tmp_path):
    leo_bot = api_token(username="leo-bot", scope="agent", persons=[PersonFactory(slug="leo")])
    other = api_token(username="other-bot", scope="agent", persons=[PersonFactory(slug="ada")])
    port = free_port()
    command = [sys.executable, "manage.py", "mcp", "--transport", "http", "--port", str(port)]
    env = served_env(ANIMA_THROTTLE_RATE="2/min")
    with served(command, port=port, log=tmp_path / "mcp.log", env=env) as app:
        url = f"{app.url}/mcp"
        answers = [tools_list_posted(url, {"Authorization": f"Bearer {leo_bot}"}) for _ in range(3)]
        others = tools_list_posted(url, {"Authorization": f"Bearer {other}"})

    assert [status for status, _, _ in answers] == [200, 200, 429]
    _, headers, body = answers[-1]
    assert 1 <= int(headers["retry-after"]) <= 60 and "throttled" in body["detail"]
    assert others[0] == 200


@pytest.mark.integration
@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs REDIS_URL")
def test_http_and_the_rest_api_share_a_tokens_count_through_redis(tmp_path, settings):
    settings.CACHES = {"default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": os.environ["REDIS_URL"]}}
    settings.ANIMA_THROTTLE_RATE = "3/min"
    leo_bot = api_token(username="leo-bot", scope="agent", persons=[PersonFactory(slug="leo")])
    rest = api_client(username="leo-bot")
    port = free_port()
    command = [sys.executable, "manage.py", "mcp", "--transport", "http", "--port", str(port)]
    env = served_env(ANIMA_THROTTLE_RATE="3/min", REDIS_URL=os.environ["REDIS_URL"])
    with served(command, port=port, log=tmp_path / "mcp.log", env=env) as app:
        url = f"{app.url}/mcp"
        over_mcp = [tools_list_posted(url, {"Authorization": f"Bearer {leo_bot}"})[0] for _ in range(2)]
        over_rest = [rest.get("/api/persons/").status_code for _ in range(2)]

    assert (over_mcp, over_rest) == ([200, 200], [200, 429])
