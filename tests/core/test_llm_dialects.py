"""The schema reaches each kind of server in the dialect it enforces; calls are bounded and truthfully audited.

Every test talks to a local stub that refuses what the real server refuses (``StubLlmServer.persona``).
"""

from __future__ import annotations

import signal
import time

import pytest
from django.core.cache import cache

from anima.core.llm import LlmDeadlineExceeded, LlmTransientError, llm_json, providers
from anima.core.llm.dialects import dialects_forget
from anima.core.llm.schema import schema_array, schema_enum, schema_object, schema_string
from anima.core.llm.testing import StubLlmServer
from anima.core.models import AutoLlmRun

SCHEMA = schema_object(
    {
        "facts": schema_array(
            schema_object(
                {"kind": schema_enum(["fact", "preference"]), "content": schema_string(min_length=1, max_length=600)},
                required=["kind", "content"],
            ),
            max_items=5,
        ),
        "note": schema_string(max_length=300, nullable=True),
    },
    required=["facts"],
)


@pytest.fixture
def server(settings, monkeypatch, request):
    """A stub of the kind named by the test's ``persona`` parameter, configured with ``auto``."""
    monkeypatch.setattr(providers, "RETRY_BACKOFF_SECONDS", 0)
    with StubLlmServer(persona=getattr(request, "param", "lenient")) as stub:
        settings.ANIMA_LLM_PROVIDER = "openai"
        settings.ANIMA_LLM_BASE_URL = stub.base_url
        settings.ANIMA_LLM_MODEL = "stub-model"
        settings.ANIMA_LLM_MAX_RETRIES = 2
        settings.ANIMA_LLM_STRUCTURED = "auto"
        yield stub


def ask(**overrides):
    arguments = {
        "purpose": "light-sleep.semantic",
        "instructions": "Extract durable facts.",
        "payload": {"dialogue": "Maya: I moved to Lisbon"},
        "schema": SCHEMA,
        "identity": False,
    }
    return llm_json(**{**arguments, **overrides})


@pytest.mark.parametrize(
    ("server", "dialect"),
    [
        ("openai", "json_schema"),
        ("vllm", "json_schema"),
        ("ollama", "json_schema"),
        ("llama_cpp", "json_object_schema"),
        ("lenient", "json_object"),
    ],
    indirect=["server"],
)
def test_auto_finds_the_dialect_each_server_enforces_and_records_it(server, dialect):
    # No answer queued: an enforcing stub writes the least answer the schema allows, the others fail.
    if dialect == "json_object":
        server.reply({"facts": []})

    ask()

    run = AutoLlmRun.objects.get()
    assert run.dialect == dialect and not run.error
    (request,) = server.requests
    form = request["response_format"]
    if dialect == "json_schema":
        assert form["type"] == "json_schema" and form["json_schema"]["strict"] is True
        # Strict: every property required, the optional one as anyOf [value, null]; lengths stay local.
        sent = form["json_schema"]["schema"]
        assert sent["required"] == ["facts", "note"]
        assert sent["properties"]["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
        assert "maxLength" not in str(sent) and sent["properties"]["facts"]["maxItems"] == 5
    elif dialect == "json_object_schema":
        assert form["type"] == "json_object" and form["schema"]["properties"]["facts"]["maxItems"] == 5
    else:
        assert form == {"type": "json_object"}
        # The last resort: the schema is in the prompt.
        assert '"maxItems": 5' in request["messages"][0]["content"]


@pytest.mark.parametrize("server", ["llama_cpp"], indirect=True)
def test_the_probe_is_sent_once_per_server_and_model_and_remembered(server):
    for _ in range(3):
        ask()

    assert len(server.probes) == 2  # json_schema (HTTP 500 here), then json_object + schema
    assert len(server.requests) == 3
    # Another process (here: this one, having forgotten) reads the answer from the cache.
    dialects_forget()
    ask()
    assert len(server.probes) == 2
    cache.clear()
    dialects_forget()
    ask()
    assert len(server.probes) == 4


@pytest.mark.parametrize("server", ["openai"], indirect=True)
def test_a_named_dialect_is_used_without_a_probe(server, settings):
    settings.ANIMA_LLM_STRUCTURED = "json_object"
    server.reply({"facts": []})

    ask()

    assert server.probes == []
    assert server.requests[0]["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize("server", ["openai"], indirect=True)
def test_openai_refuses_a_schema_that_is_not_strict(server, settings):
    settings.ANIMA_LLM_STRUCTURED = "json_schema"
    loose = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}

    # What a strict server refuses never leaves Anima: every property must be required or nullable.
    with pytest.raises(ValueError, match=r"\$\.a: a property must be required or nullable"):
        ask(schema=loose)
    assert server.requests == []


@pytest.mark.parametrize("server", ["llama_cpp"], indirect=True)
def test_llama_cpp_is_never_sent_a_length_constraint_its_grammar_compiler_fails_on(server, settings):
    settings.ANIMA_LLM_STRUCTURED = "json_object_schema"

    assert ask()["facts"] == []
    assert "maxLength" not in str(server.requests[0]["response_format"]["schema"])


@pytest.mark.parametrize("server", ["ollama"], indirect=True)
def test_ollama_format_goes_to_the_native_chat_endpoint(server, settings):
    settings.ANIMA_LLM_STRUCTURED = "ollama_format"

    assert ask(max_tokens=321)["facts"] == []

    (request,) = server.requests
    assert request["format"]["properties"]["facts"]["maxItems"] == 5
    assert request["options"]["num_predict"] == 321 and request["stream"] is False
    assert AutoLlmRun.objects.get().dialect == "ollama_format"


@pytest.mark.parametrize("server", ["lenient"], indirect=True)
def test_an_unreachable_server_is_not_remembered_as_one_that_enforces_nothing(server, settings):
    with StubLlmServer() as gone:
        url = gone.base_url
    settings.ANIMA_LLM_BASE_URL = url

    with pytest.raises(LlmTransientError, match="cannot reach the LLM server"):
        ask()
    # The failure is audited like any failed call.
    assert AutoLlmRun.objects.get().error.startswith("LlmTransientError: cannot reach the LLM server")
    settings.ANIMA_LLM_BASE_URL = server.base_url
    server.reply({"facts": []})
    ask()
    assert AutoLlmRun.objects.get(error="").dialect == "json_object"


# --- Bounded calls --------------------------------------------------------------------------------


@pytest.mark.parametrize("server", ["openai"], indirect=True)
def test_one_deadline_bounds_a_call_across_its_retries(server, settings):
    settings.ANIMA_LLM_STRUCTURED = "json_schema"
    settings.ANIMA_LLM_DEADLINE = 1.0
    server.delay = 0.6
    for _ in range(3):
        server.fail(503)

    started = time.monotonic()
    with pytest.raises(LlmTransientError):
        ask()

    # Three attempts would take 1.8 s; the second is cut at the deadline and no third is sent.
    assert time.monotonic() - started < 1.5
    assert len(server.requests) == 2
    assert all(run.error for run in AutoLlmRun.objects.all())


@pytest.mark.parametrize("server", ["openai"], indirect=True)
def test_a_timed_out_call_is_not_retried_behind_the_abandoned_generation(server, settings):
    settings.ANIMA_LLM_STRUCTURED = "json_schema"
    settings.ANIMA_LLM_TIMEOUT = 1.0
    server.delay = 1.5

    with pytest.raises(LlmTransientError, match="timed out"):
        ask()

    assert len(server.requests) == 1
    assert "timed out" in AutoLlmRun.objects.get().error


@pytest.mark.parametrize("server", ["openai"], indirect=True)
def test_a_deadline_passed_before_the_repair_round_is_a_named_error(server, settings):
    settings.ANIMA_LLM_STRUCTURED = "json_schema"
    settings.ANIMA_LLM_DEADLINE = 1.0
    server.delay = 0.7
    server.reply({"facts": "none"})
    server.reply({"facts": []})

    with pytest.raises(LlmDeadlineExceeded):
        ask()
    assert len(server.requests) == 2  # the repair round had 0.3 s left
    assert [run.attempt for run in AutoLlmRun.objects.order_by("id")] == ["", "repair"]


@pytest.mark.parametrize("server", ["openai"], indirect=True)
@pytest.mark.parametrize("interruption", [KeyboardInterrupt, SystemExit])
def test_an_interrupted_call_is_recorded_as_failed_never_ok(server, settings, interruption):
    settings.ANIMA_LLM_STRUCTURED = "json_schema"
    server.delay = 2.0

    def interrupt(signum, frame):
        raise interruption("terminated")

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(interruption):
            ask()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

    run = AutoLlmRun.objects.get()
    assert run.error.startswith("interrupted") and run.latency_ms > 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("server", ["openai"], indirect=True)
def test_a_call_in_flight_is_already_recorded_as_failed(server, settings):
    """A process killed during the call (SIGKILL, a lost machine) leaves a row that says so."""
    settings.ANIMA_LLM_STRUCTURED = "json_schema"
    seen: list[tuple[str, str]] = []

    def responder(body):
        seen.extend(AutoLlmRun.objects.values_list("purpose", "error"))
        return {"facts": []}

    server.responder = responder

    ask()

    assert seen == [("light-sleep.semantic", "abandoned: the process ended before the call returned")]
    assert AutoLlmRun.objects.get().error == ""
