"""Request limits per token: 429 with Retry-After past the rate, one count per token across the REST API and
the proxy, operator tokens apart, a cache outage never failing a request."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from anima.api.testing import api_client
from tests.factories import PersonFactory


@pytest.fixture
def limited(settings, private_cache):
    settings.ANIMA_THROTTLE_RATE = "3/min"
    settings.ANIMA_THROTTLE_OPERATOR_RATE = None
    return settings


def _agent(username: str = "agent"):
    return api_client(username=username, scope="agent", persons=[PersonFactory()])


def test_a_token_past_its_rate_is_a_429_with_retry_after_and_other_tokens_go_on(limited):
    first, second = _agent("first"), _agent("second")

    statuses = [first.get("/api/memories/").status_code for _ in range(4)]
    refused = first.get("/api/memories/")

    assert statuses == [200, 200, 200, 429]
    assert refused.status_code == 429 and "throttled" in refused.json()["detail"]
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert second.get("/api/memories/").status_code == 200


def test_operator_tokens_have_their_own_rate_off_by_default(limited):
    operator = api_client(username="root", staff=True)
    assert {operator.get("/api/memories/").status_code for _ in range(6)} == {200}

    limited.ANIMA_THROTTLE_OPERATOR_RATE = "1/min"
    assert [operator.get("/api/memories/").status_code for _ in range(2)] == [200, 429]


def test_a_session_is_not_throttled(limited, client):
    user = get_user_model().objects.create_user(username="console", password="pw", is_staff=True)
    client.force_login(user)
    limited.ANIMA_THROTTLE_OPERATOR_RATE = "1/min"

    assert {client.get("/api/memories/").status_code for _ in range(3)} == {200}


def test_the_proxy_counts_with_the_rest_api_and_answers_429_in_openai_shape(limited, llm_stub):
    leo = PersonFactory(slug="leo")
    rest = api_client(username="leo-bot", scope="agent", persons=[leo])
    for _ in range(2):
        assert rest.get("/api/persons/").status_code == 200
    proxy = api_client(username="leo-bot")

    allowed = proxy.get("/v1/models")
    refused = proxy.get("/v1/models")

    assert allowed.status_code == 200
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert refused.json()["error"]["type"] == "rate_limit_error" and "throttled" in refused.json()["error"]["message"]


def test_with_the_cache_down_requests_are_still_counted_and_answered(limited, redis_down):
    agent = _agent()

    assert [agent.get("/api/memories/").status_code for _ in range(4)] == [200, 200, 200, 429]
