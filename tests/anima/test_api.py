"""API-wide guarantees: authentication everywhere, staff-only operations, JSON 4xx for bad input, config, tokens."""

from __future__ import annotations

import json
import re

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from anima.api.testing import api_client, operator_client
from anima.core.config import config_get
from anima.core.models import RuntimeConfigChange
from tests.factories import ConversationFactory, PersonFactory, SemanticMemoryFactory, UserFactory


def _api_routes() -> list[str]:
    """Every URL pattern under /api/, with sample values in place of its parameters."""
    routes: list[str] = []

    def walk(patterns, prefix: str) -> None:
        for pattern in patterns:
            text = prefix + str(pattern.pattern).lstrip("^").rstrip("$")
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, text)
            elif isinstance(pattern, URLPattern) and text.startswith("api/"):
                routes.append(text)

    walk(get_resolver().url_patterns, "")
    samples = {
        "pk": "1",
        "slug": "leo",
        "section": "sleep",
        "name": "memory_recall",
        "format": "json",
        "key": "daughter",
    }
    concrete = set()
    for route in routes:
        route = re.sub(r"\(\?P<(\w+)>[^)]*\)", lambda m: samples[m.group(1)], route)
        route = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: samples[m.group(1)], route)
        concrete.add("/" + route.replace("\\.", ".").replace("/?", "/").rstrip("/") + "/")
    return sorted(r for r in concrete if "json/" not in r)


ROUTES = _api_routes()


def test_the_route_list_covers_the_api():
    assert {"/api/recall/", "/api/memories/1/", "/api/tools/memory_recall/", "/api/schema/", "/api/docs/"} <= set(
        ROUTES
    )


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("method", ["get", "post", "patch", "delete"])
def test_every_route_refuses_anonymous_access(route, method):
    ConversationFactory(pk=1)
    SemanticMemoryFactory(pk=1)

    response = getattr(APIClient(), method)(route, {}, format="json")

    assert response.status_code in (401, 403), (route, method, response.status_code)


def test_a_bad_token_is_refused():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")

    assert client.get("/api/memories/").status_code == 401


@pytest.mark.parametrize(
    ("method", "route", "body"),
    [
        ("post", "/api/sleep-runs/", {"step": "memory-ref-sync"}),
        ("patch", "/api/config/sleep/", {"token_budget": 5000}),
        ("delete", "/api/memories/{memory}/", None),
    ],
)
@pytest.mark.parametrize("scope", ["agent", "person", None])
def test_non_staff_tokens_cannot_reach_staff_only_operations(method, route, body, scope):
    memory = SemanticMemoryFactory()
    client = api_client(staff=False, scope=scope, persons=[memory.person] if scope else [])

    response = getattr(client, method)(route.format(memory=memory.pk), body, format="json")

    assert response.status_code == 403
    assert config_get(section="sleep")["token_budget"] != 5000
    assert memory.__class__.objects.filter(pk=memory.pk).exists()


def test_session_authentication_works_for_a_logged_in_user(client):
    staff, visitor = UserFactory(username="ops", is_staff=True), UserFactory(username="visitor")

    client.force_login(staff)
    as_staff = client.get("/api/memories/").status_code
    client.force_login(visitor)
    as_visitor = client.get("/api/memories/")

    assert as_staff == 200
    # A session is scoped like a token: a non-staff user without a scope has no rights.
    assert as_visitor.status_code == 403 and "token_scope" in as_visitor.json()["detail"]


@pytest.mark.parametrize("keyword", ["Token", "Bearer", "bearer"])
def test_drf_create_token_command_creates_a_working_operator_token(capsys, keyword):
    user = UserFactory(username="admin", is_staff=True)

    call_command("drf_create_token", "admin")

    key = Token.objects.get(user=user).key
    assert key in capsys.readouterr().out
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{keyword} {key}")
    assert client.get("/api/tools/").status_code == 200
    assert client.get("/api/sleep-runs/").status_code == 200


def test_a_non_staff_token_has_no_rights_until_it_is_given_a_scope(capsys):
    leo = PersonFactory(slug="leo")
    UserFactory(username="runtime")
    call_command("drf_create_token", "runtime")
    key = capsys.readouterr().out.split()[2]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")

    before = client.get("/api/tools/")
    call_command("token_scope", "runtime", "--scope", "agent", "--person", "leo")
    after = client.get("/api/tools/")

    assert before.status_code == 403 and "no rights" in before.json()["detail"]
    assert after.status_code == 200
    assert leo.token_scopes.get().user.username == "runtime"


@pytest.mark.parametrize("header", ["Bearer", "Bearer a b", "Token", "Bearer \xff"])
def test_malformed_authorization_headers_are_401(header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)

    assert client.get("/api/memories/").status_code == 401


# --- Bad input is a JSON 4xx naming the field ----------------------------------------------------


def test_malformed_json_is_a_400_naming_the_body():
    response = operator_client().post("/api/memories/", '{"content": ', content_type="application/json")

    assert response.status_code == 400
    assert "body" in response.json()


def test_unknown_fields_are_refused_by_name():
    response = operator_client().post("/api/memories/", {"content": "x", "colour": "red"}, format="json")

    assert response.status_code == 400
    assert response.json() == {"colour": ["Unknown or read-only field."]}


def test_wrong_types_and_unknown_choices_name_the_field():
    response = operator_client().post("/api/memories/", {"content": ["x"], "memory_type": "gossip"}, format="json")

    assert response.status_code == 400
    assert set(response.json()) == {"content", "memory_type"}


def test_nul_characters_are_refused_in_bodies_and_query_strings():
    client = operator_client()

    body = client.post("/api/memories/", {"content": "a\x00b"}, format="json")
    nested = client.post("/api/tools/memory_recall/", {"query": "ok", "memory_types": ["a\x00"]}, format="json")
    query = client.get("/api/recall/", {"q": "a\x00b"})

    assert body.status_code == nested.status_code == query.status_code == 400
    assert "content" in body.json() and "memory_types.0" in nested.json() and "q" in query.json()


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/conversations/{id}/messages/", '{"role": "user", "content": "x", "tool_payload": {"a": "\\ud800"}}'),
        ("/api/conversations/{id}/messages/", '{"role": "user", "content": "x", "tool_payload": {"\\udfff": 1}}'),
        ("/api/memories/", '{"content": "half a pair \\ud83d"}'),
    ],
)
def test_lone_surrogates_are_refused_with_a_400_naming_the_field(path, body):
    conversation = ConversationFactory()
    response = api_client(staff=True).generic(
        "POST", path.format(id=conversation.pk), body, content_type="application/json"
    )
    assert response.status_code == 400, response.content
    assert "lone surrogates" in response.content.decode()


@pytest.mark.parametrize(("size", "status"), [(900, 201), (5000, 413)])
def test_bodies_over_the_configured_limit_are_refused(settings, size, status):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048

    response = operator_client().post("/api/memories/", {"content": "x" * size}, format="json")

    assert response.status_code == status
    if status == 413:
        assert "2048 bytes" in response.json()["detail"]


def test_a_message_too_long_for_search_is_a_400_naming_the_content():
    conversation = ConversationFactory()
    distinct_words = " ".join(f"w{index:x}" for index in range(150_000))[:990_000]  # ~990 KB, 1 MiB body limit

    response = api_client(staff=True).post(
        f"/api/conversations/{conversation.pk}/messages/", {"role": "user", "content": distinct_words}, format="json"
    )

    assert response.status_code == 400, response.content[:300]
    assert "content" in response.json() and "100000" in response.json()["content"][0]
    assert not conversation.messages.exists()


def test_a_deeply_nested_payload_is_a_400_naming_the_field():
    conversation = ConversationFactory()
    nested = "[" * 10_000 + "]" * 10_000  # 20 KB
    body = '{"role": "tool", "content": "x", "tool_payload": ' + nested + "}"

    response = api_client(staff=True).generic(
        "POST", f"/api/conversations/{conversation.pk}/messages/", body, content_type="application/json"
    )
    shallow_enough = api_client(staff=True).post(
        f"/api/conversations/{conversation.pk}/messages/",
        {"role": "tool", "content": "x", "tool_payload": json.loads("[" * 60 + "]" * 60)},
        format="json",
    )

    assert response.status_code == 400
    assert "nested deeper than 64 levels" in response.json()["tool_payload"][0]
    assert shallow_enough.status_code == 201


@pytest.mark.parametrize("accept", ["application/json", "text/html", "*/*"])
def test_the_docs_page_refuses_a_bad_token_in_the_format_asked_for(accept):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")

    response = client.get("/api/docs/", HTTP_ACCEPT=accept)

    assert response.status_code == 401
    if accept == "application/json":
        assert response.json() == {"detail": "Invalid token."}


def test_invalid_dates_name_the_parameter():
    response = operator_client().get("/api/recall/", {"q": "python", "since": "2026-02-30"})

    assert response.status_code == 400
    assert "since" in response.json()


_DATE_ENTRY_POINTS = [
    ("post", "/api/conversations/{conversation}/messages/", {"role": "user", "created_at": "{t}"}, "created_at", "T"),
    ("post", "/api/history/", {"content": "x", "timestamp": "{t}"}, "timestamp", "T"),
    ("get", "/api/recall/", {"q": "x", "since": "{t}"}, "since", "T"),
    ("get", "/api/history/", {"until": "{t}"}, "until", "T"),
    ("post", "/api/tools/memory_recall/", {"query": "x", "since": "{t}"}, "since", "T"),
    ("post", "/api/sleep-runs/", {"day": "{t}", "step": "memory-ref-sync", "force": True}, "day", "date"),
    ("get", "/api/sleep-runs/", {"day": "{t}"}, "day", "date"),
    ("get", "/api/diary/", {"since": "{t}"}, "since", "date"),
    ("get", "/api/temporal-summaries/", {"until": "{t}"}, "until", "date"),
]


@pytest.mark.django_db(transaction=True)  # a requested sleep run is carried out by a background thread
@pytest.mark.parametrize(("method", "path", "body", "field", "kind"), _DATE_ENTRY_POINTS)
def test_every_date_is_accepted_from_1900_to_2199_only_and_a_refusal_names_the_field(
    method, path, body, field, kind, finished_run
):
    conversation = ConversationFactory()
    client = api_client(staff=True)

    def send(moment: str):
        filled = {key: value.replace("{t}", moment) if isinstance(value, str) else value for key, value in body.items()}
        if "role" in filled:
            filled["content"] = "x"
        url = path.format(conversation=conversation.pk)
        return client.get(url, filled) if method == "get" else client.post(url, filled, format="json")

    edges, outside = ["1900-01-01", "2199-12-31"], ["1899-12-31", "2200-01-01", "1000-06-01"]
    if kind == "T":
        edges, outside = [f"{edges[0]}T00:00:00", f"{edges[1]}T23:59:59"], [f"{day}T12:00:00" for day in outside]
    for moment in edges:
        response = send(moment)
        assert response.status_code < 300, moment
        if response.status_code == 202:  # one run at a time: let the requested one finish first
            finished_run(response.json()["id"])
    for moment in outside:
        response = send(moment)
        assert response.status_code == 400, (moment, response.content)
        assert field in response.json(), response.json()
        assert "between 1900-01-01 and 2199-12-31" in json.dumps(response.json()), response.json()


def test_bad_ids_are_404_not_500():
    client = operator_client()

    assert client.get("/api/memories/99999999999999999/").status_code == 404
    assert client.get("/api/memories/abc/").status_code == 404


# --- Runtime config -------------------------------------------------------------------------------


def test_config_lists_sections_and_staff_patches_with_validation():
    staff = api_client(username="ops", staff=True)

    listed = staff.get("/api/config/").json()
    changed = staff.patch("/api/config/memory.passive_recall/", {"limit": 7}, format="json")
    refused = staff.patch("/api/config/memory.passive_recall/", {"limit": 999, "enabled": True}, format="json")
    unknown = staff.patch("/api/config/memory.passive_recall/", {"colour": 1}, format="json")

    assert "memory.passive_recall" in listed and listed["sleep"]["token_budget"] > 0
    assert changed.status_code == 200 and changed.json()["limit"] == 7
    assert refused.status_code == 400 and "limit" in refused.json()
    assert unknown.status_code == 400 and "colour" in unknown.json()
    assert config_get(section="memory.passive_recall")["limit"] == 7  # never half-applied
    assert RuntimeConfigChange.objects.get().changed_by == "ops"


def test_unknown_config_section_is_404():
    assert api_client(staff=True).get("/api/config/nope/").status_code == 404


def test_schema_and_docs_are_served_to_authenticated_users():
    client = api_client()  # even without a scope: the schema is documentation, not data

    schema = client.get("/api/schema/", {"format": "json"})
    docs = client.get("/api/docs/")

    assert schema.status_code == 200 and "/api/recall/" in json.loads(schema.content)["paths"]
    assert docs.status_code == 200


def test_the_api_docs_page_loads_only_assets_anima_serves_itself(client):
    client.force_login(UserFactory(username="reader"))
    page = client.get("/api/docs/").content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert any(asset.endswith("swagger-ui-bundle.js") for asset in assets)
    assert any(asset.endswith("swagger-ui.css") for asset in assets)
    for asset in assets:
        assert asset.startswith(settings.STATIC_URL), asset
        assert finders.find(asset.removeprefix(settings.STATIC_URL)), asset
    assert not re.search(r"https?://|//cdn", page)
