"""Property-based fuzzing of every API operation from its OpenAPI schema: no input may cause a 5xx."""

from __future__ import annotations

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error

from anima.api.testing import api_client, api_token
from anima.wsgi import application
from tests.factories import (
    ContentBlockFactory,
    ConversationFactory,
    HistoryEntryFactory,
    IdentityFactory,
    MessageFactory,
    PipelineStepRunFactory,
    SemanticMemoryFactory,
    TemporalSummaryFactory,
)

STAFF = "schemathesis-staff"


@pytest.fixture
def api_schema(db, llm_stub):
    # The proxy's operations reach a local upstream that answers every request.
    llm_stub.responder = lambda body: "ok"
    # Some rows for the id-taking routes to find (ids 1..n are likely guesses for the generator).
    conversation = ConversationFactory()
    MessageFactory(conversation=conversation, content="Leo 喜欢 Python [[anima:1]]")
    SemanticMemoryFactory(person=conversation.person, content="Leo 在杭州工作")
    IdentityFactory(person=conversation.person)
    HistoryEntryFactory(person=conversation.person)
    ContentBlockFactory()
    TemporalSummaryFactory()
    PipelineStepRunFactory()
    response = api_client(username=STAFF, staff=True).get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    schema = schemathesis.openapi.from_dict(response.json())
    schema.app = application
    # Like Django's test client: the WSGI calls must not close the test's (transactional) connection.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield schema
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_no_operation_answers_with_a_server_error(case):
    response = case.call(headers={"Authorization": f"Token {api_token(username=STAFF, staff=True)}"})
    case.validate_response(response, checks=[not_a_server_error])
