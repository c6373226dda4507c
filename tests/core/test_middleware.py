"""The console reads Anima's tables from the replica; its writes, and the page right after one, use the primary."""

from __future__ import annotations

from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from anima.api.testing import api_client
from anima.core.db import REPLICA
from anima.core.middleware import FRESH_COOKIE
from tests.factories import SemanticMemoryFactory, UserFactory

CHANGELIST = reverse("admin:memory_semanticmemory_changelist")


def tables(context: CaptureQueriesContext) -> str:
    return " ".join(query["sql"] for query in context.captured_queries)


def test_console_pages_read_the_replica_and_a_write_sends_the_next_pages_to_the_primary(replica, client):
    client.force_login(UserFactory(username="operator", is_staff=True, is_superuser=True))
    memory = SemanticMemoryFactory(content="Leo 的邮箱是 leo@example.com")

    with (
        CaptureQueriesContext(connections["default"]) as primary,
        CaptureQueriesContext(connections[REPLICA]) as on_replica,
    ):
        page = client.get(CHANGELIST, {"q": "邮箱"})
    assert page.status_code == 200
    assert [obj.pk for obj in page.context["cl"].result_list] == [memory.pk]
    assert '"entities"' in tables(on_replica) and "to_tsquery" in tables(on_replica)  # the search itself
    assert '"entities"' not in tables(primary)
    assert '"django_session"' in tables(primary)  # the login is read from the primary

    with CaptureQueriesContext(connections[REPLICA]) as on_replica:
        response = client.post(CHANGELIST, {"action": "memory_pin", "_selected_action": [memory.pk]})
        assert response.status_code == 302 and FRESH_COOKIE in response.cookies
        page = client.get(CHANGELIST)
    assert on_replica.captured_queries == []
    assert [obj.pinned for obj in page.context["cl"].result_list] == [True]

    del client.cookies[FRESH_COOKIE]  # as the browser does once it expires
    with CaptureQueriesContext(connections[REPLICA]) as on_replica:
        client.get(CHANGELIST)
    assert '"entities"' in tables(on_replica)


def test_pages_outside_the_console_keep_reading_the_primary(replica):
    SemanticMemoryFactory(content="Leo 的邮箱是 leo@example.com")
    with CaptureQueriesContext(connections[REPLICA]) as on_replica:
        assert api_client(username="operator", staff=True).get("/api/memories/").status_code == 200
    assert on_replica.captured_queries == []
