from __future__ import annotations

import json
import re
import threading

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from anima.core.llm import (
    LlmBudgetExceeded,
    LlmBudgetReserved,
    LlmError,
    LlmInvalidOutput,
    LlmRepairFailed,
    LlmTransientError,
    LlmTruncated,
    llm_json,
    providers,
)
from anima.core.llm.budget import budget_reserve
from anima.core.llm.offline import offline_handler
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
from anima.core.llm.testing import StubLlmServer, StubReply, scripted
from anima.core.llm.usage import estimate_tokens
from anima.core.models import AutoLlmRun
from memory.models import SelfBlock
from tests.factories import AutoLlmRunFactory, SelfLayerBlockFactory, SemanticMemoryFactory

FACTS_SCHEMA = {
    "type": "object",
    "required": ["facts"],
    "additionalProperties": False,
    "properties": {
        "facts": {
            "type": "array",
            "maxItems": 10,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["content", "importance"],
                "properties": {
                    "content": {"type": "string", "minLength": 1},
                    "importance": {"type": "number", "minimum": 0, "maximum": 1},
                },
            },
        }
    },
}
ANSWER = {"facts": [{"content": "女儿属虎", "importance": 0.8}]}
# The usage the stub reports where a test counts tokens: above what ask()'s prompt and answer must cost
# (~40 and ~16 tokens by the local estimate), so the server's figures are the ones counted.
USAGE = {"prompt_tokens": 100, "completion_tokens": 20}


@offline_handler("test.echo")
def _echo(payload: dict) -> dict:
    return {"facts": [{"content": payload["text"], "importance": 0.5}]}


@pytest.fixture
def stub(llm_stub):
    return llm_stub


def ask(**overrides):
    arguments = {
        "purpose": "light-sleep.semantic",
        "instructions": "Extract durable facts.",
        "payload": {"dialogue": "用户: 我女儿属虎"},
        "schema": FACTS_SCHEMA,
        "run_key": "sleep-run:1",
    }
    return llm_json(**{**arguments, **overrides})


def test_identity_context_reaches_the_model_in_the_system_message(stub):
    SelfLayerBlockFactory(key=SelfBlock.SELF_MODEL, content="I am Anima, curious and warm.")
    pinned = SemanticMemoryFactory(content="Lin's daughter was born in the year of the tiger", pinned=True, person=None)
    stub.reply(ANSWER)

    assert ask() == ANSWER

    (request,) = stub.requests
    system, user = request["messages"]
    assert system["role"] == "system"
    assert "I am Anima, curious and warm." in system["content"]
    assert f"- Lin's daughter was born in the year of the tiger [[anima:{pinned.pk}]]" in system["content"]
    assert system["content"].endswith("Extract durable facts.")
    assert user == {"role": "user", "content": '{"dialogue": "用户: 我女儿属虎"}'}
    assert request["model"] == "stub-model"
    assert request["response_format"]["type"] == "json_schema"


def test_identity_can_be_left_out_for_non_memory_calls(stub):
    SelfLayerBlockFactory(key=SelfBlock.SELF_MODEL, content="I am Anima.")
    stub.reply(ANSWER)

    ask(identity=False)

    assert stub.requests[0]["messages"][0]["content"] == "Extract durable facts."


def test_a_successful_call_is_audited_with_the_servers_token_usage(stub):
    stub.reply(ANSWER, prompt_tokens=321, completion_tokens=45)

    ask()

    run = AutoLlmRun.objects.get()
    assert (run.purpose, run.provider, run.model, run.run_key) == (
        "light-sleep.semantic",
        "openai",
        "stub-model",
        "sleep-run:1",
    )
    assert (run.prompt_tokens, run.completion_tokens, run.total_tokens) == (321, 45, 366)
    assert run.prompt == stub.requests[0]["messages"]
    assert json.loads(run.response) == ANSWER
    assert run.error == ""


def test_server_errors_and_rate_limits_are_retried_until_an_answer_comes(stub):
    stub.fail(500)
    stub.fail(429, "slow down")
    stub.reply(ANSWER)

    assert ask() == ANSWER
    assert len(stub.requests) == 3
    assert AutoLlmRun.objects.get().error == ""


def test_a_server_that_keeps_failing_raises_transient_error_and_is_audited(stub):
    for _ in range(3):
        stub.fail(503, "overloaded")

    with pytest.raises(LlmTransientError, match="HTTP 503"):
        ask()

    assert len(stub.requests) == 3  # the first try + ANIMA_LLM_MAX_RETRIES
    run = AutoLlmRun.objects.get()
    assert "LlmTransientError" in run.error and run.total_tokens == 0


def test_a_bad_request_is_not_retried(stub):
    stub.fail(400, "unknown model")

    with pytest.raises(LlmError, match="HTTP 400") as caught:
        ask()

    assert not isinstance(caught.value, LlmTransientError)
    assert len(stub.requests) == 1
    assert "unknown model" in AutoLlmRun.objects.get().error


def test_an_unreachable_server_is_a_transient_error(settings, monkeypatch):
    monkeypatch.setattr(providers, "RETRY_BACKOFF_SECONDS", 0)
    with StubLlmServer() as server:
        url = server.base_url
    settings.ANIMA_LLM_PROVIDER = "openai"
    settings.ANIMA_LLM_BASE_URL = url
    settings.ANIMA_LLM_MODEL = "stub-model"
    settings.ANIMA_LLM_MAX_RETRIES = 1

    with pytest.raises(LlmTransientError, match="cannot reach the LLM server"):
        ask()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("I think the facts are: none", "not JSON"),
        ({"facts": [{"content": "", "importance": 2}]}, r"\$\.facts\[0\]\.importance: 2 is above"),
        ({"facts": "none", "note": "x"}, r"\$\.note: property not allowed"),
    ],
)
def test_an_answer_that_breaks_the_schema_gets_one_repair_round_then_a_named_error(stub, content, message):
    stub.reply(content, **USAGE)
    stub.reply(content, **USAGE)

    with pytest.raises(LlmRepairFailed, match=message):
        ask()

    first, repair = stub.requests
    # The repair round carries the bad answer and what is wrong with it.
    assert repair["messages"][:2] == first["messages"]
    assert repair["messages"][2]["role"] == "assistant"
    assert re.search(message, repair["messages"][3]["content"])
    runs = list(AutoLlmRun.objects.order_by("id"))
    assert [run.attempt for run in runs] == ["", "repair"]
    assert all("LlmInvalidOutput" in run.error and run.response for run in runs)
    assert runs[0].total_tokens == 120 and runs[1].total_tokens >= 120  # the repair's prompt is the longer


def test_a_repaired_answer_is_returned(stub):
    stub.reply({"facts": [{"content": "女儿属虎", "importance": 2}]})
    stub.reply(ANSWER)

    assert ask() == ANSWER
    assert [(run.attempt, run.error) for run in AutoLlmRun.objects.order_by("id")][1] == ("repair", "")


@pytest.mark.parametrize("content", ['{"facts": [{"content": "女儿', ANSWER])
def test_a_truncated_answer_is_asked_once_more_with_twice_the_budget(stub, content):
    stub.reply(content, finish_reason="length", **USAGE)
    stub.reply(content, finish_reason="length", **USAGE)

    with pytest.raises(LlmTruncated, match="truncated"):
        ask(max_tokens=300)

    assert [request["max_tokens"] for request in stub.requests] == [300, 600]
    runs = list(AutoLlmRun.objects.order_by("id"))
    assert [run.attempt for run in runs] == ["", "longer"]
    assert all(run.error.startswith("LlmTruncated") for run in runs)


def test_a_stage_without_a_longer_retry_fails_on_the_first_truncation(stub):
    stub.reply(ANSWER, finish_reason="length")

    with pytest.raises(LlmTruncated):
        ask(max_tokens=300, longer_retry=False)
    assert len(stub.requests) == 1


def test_the_answer_budget_of_a_purpose_is_configurable(stub, settings):
    settings.ANIMA_LLM_MAX_TOKENS = {"light-sleep.semantic": 123}
    stub.reply(ANSWER, finish_reason="length")
    stub.reply(ANSWER)

    assert ask(max_tokens=300) == ANSWER
    assert [request["max_tokens"] for request in stub.requests] == [123, 246]


def _chat_completion(content: str) -> str:
    return json.dumps(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": "stub-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        }
    )


MALFORMED = {
    "html": ("<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html", "not a chat completion"),
    "not-json": ("upstream timeout", "application/json", "Expecting value"),
    "no-choices": (json.dumps({"id": "c", "model": "m", "choices": []}), "application/json", "not a chat completion"),
    "no-message": ('{"choices": [{"message": null}]}', "application/json", "not a chat completion"),
    "nul": (_chat_completion('{"facts": []}\u0000'), "application/json", "NUL character or a lone surrogate"),
    "surrogate": (_chat_completion('{"facts": [{"content": "\ud800"}]}'), "application/json", "lone surrogate"),
}


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_a_malformed_answer_is_retried_then_one_invalid_output_with_its_audit_row(stub, kind):
    body, content_type, reason = MALFORMED[kind]
    for _ in range(3):
        stub.raw(body, content_type=content_type)

    with pytest.raises(LlmInvalidOutput, match=reason) as caught:
        ask()

    assert len(stub.requests) == 3  # retried like a transient failure
    assert "gave up after 3 attempts" in str(caught.value)
    run = AutoLlmRun.objects.get()
    assert run.error.startswith("LlmInvalidOutput: light-sleep.semantic: malformed answer")


def test_a_malformed_answer_followed_by_a_good_one_succeeds(stub):
    stub.raw("<html>Service restarting</html>", content_type="text/html")
    stub.raw(json.dumps({"id": "c", "model": "m", "choices": []}))
    stub.reply(ANSWER)

    assert ask() == ANSWER
    assert len(stub.requests) == 3
    assert AutoLlmRun.objects.get().error == ""


@pytest.mark.parametrize("blank", ["   ", "\n\t", "\u3000"])
def test_strings_are_stripped_so_a_blank_text_is_refused_where_one_is_required(stub, blank):
    stub.reply({"facts": [{"content": f"  {blank}  ", "importance": 0.5}]})
    stub.reply({"facts": [{"content": blank, "importance": 0.5}]})
    with pytest.raises(LlmInvalidOutput, match=r"\$\.facts\[0\]\.content: shorter than 1 characters"):
        ask()
    stub.reply({"facts": [{"content": "  女儿属虎\n", "importance": 0.5}]})
    assert ask() == {"facts": [{"content": "女儿属虎", "importance": 0.5}]}


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ('{"facts": []}\x00', "NUL character or a lone surrogate"),
        ("[" * 5000 + "]" * 5000, "not JSON|nested too deeply"),
    ],
)
def test_an_unusable_answer_from_any_provider_is_invalid_output_and_still_audited(answer, reason):
    with scripted({"light-sleep.semantic": [answer, answer]}), pytest.raises(LlmInvalidOutput, match=reason):
        ask()

    assert AutoLlmRun.objects.count() == 2  # the answer and its repair round
    run = AutoLlmRun.objects.order_by("id").first()
    assert run.error.startswith("LlmInvalidOutput") and "\x00" not in run.response


def test_json_inside_code_fences_or_prose_is_accepted(stub):
    stub.reply("Here you go:\n```json\n" + json.dumps(ANSWER) + "\n```\nAnything else?")
    stub.reply("Sure. " + json.dumps(ANSWER) + " Hope that helps!")

    assert ask() == ANSWER
    assert ask() == ANSWER


def test_a_spent_budget_stops_the_call_before_anything_is_sent(stub):
    AutoLlmRunFactory(run_key="sleep-run:1", total_tokens=900)
    AutoLlmRunFactory(run_key="sleep-run:other", total_tokens=5000)

    with pytest.raises(LlmBudgetExceeded, match="token budget exhausted: sleep-run:1 has spent 900 of 900"):
        ask(token_budget=900)

    assert stub.requests == []
    assert AutoLlmRun.objects.count() == 2  # no audit row: nothing was called


def test_the_budget_counts_the_tokens_of_earlier_calls_of_the_run(stub):
    stub.reply(ANSWER, **USAGE)
    stub.reply(ANSWER, **USAGE)

    ask(token_budget=240)
    ask(token_budget=240)  # 120 of 240 spent: still allowed to start
    with pytest.raises(LlmBudgetExceeded):
        ask(token_budget=240)

    assert len(stub.requests) == 2


def test_a_run_s_audited_tokens_are_summed_for_its_first_call_only(stub):
    AutoLlmRunFactory(run_key="sleep-run:1", total_tokens=100)
    for _ in range(3):
        stub.reply(ANSWER, **USAGE)

    with CaptureQueriesContext(connection) as queries:
        for _ in range(3):
            ask(token_budget=5000)

    assert sum("SUM(total_tokens)" in query["sql"] for query in queries.captured_queries) == 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT spent, reserved FROM llm_token_budgets WHERE run_key = 'sleep-run:1'")
        assert cursor.fetchone() == (460, 0)


def test_calls_in_flight_in_other_workers_count_against_the_budget(stub):
    stub.reply(ANSWER, **USAGE)
    ask(token_budget=5000)  # 120 spent
    budget_reserve(run_key="sleep-run:1", budget=5000, tokens=4880, purpose="elsewhere")  # another worker's call

    # Another call may go once that one returns: the caller is told to wait, not that the budget is spent.
    waiting = "has spent 120 of 5000 tokens \\(and 4880 reserved by calls in flight\\)"
    with CaptureQueriesContext(connection) as queries, pytest.raises(LlmBudgetReserved, match=waiting):
        ask(token_budget=5000)

    assert len(stub.requests) == 1
    # A refusal (retried until the calls in flight return) does not sum the run's audit rows again.
    assert not any("SUM(total_tokens)" in query["sql"] for query in queries.captured_queries)


def _usage_reply(usage: dict | None) -> StubReply:
    """A chat completion of ANSWER carrying ``usage`` as sent (None: no usage at all)."""
    body = json.loads(_chat_completion(json.dumps(ANSWER, ensure_ascii=False)))
    if usage is not None:
        body["usage"] = usage
    return StubReply(raw=json.dumps(body).encode())


# About 1,000 tokens a prompt: an English half (4 characters a token) and a Chinese half (1 a character).
LONG_DIALOGUE = "user: we walked the dog by the lake again " * 50 + "用户：我们又去湖边遛狗了。" * 40


@pytest.mark.parametrize(
    "usage",
    [
        None,
        {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        {"prompt_tokens": -100_000, "completion_tokens": -5, "total_tokens": -100_005},
        {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},  # far below what the prompt must cost
        {"prompt_tokens": 10**15, "completion_tokens": "many", "total_tokens": None},  # no count of these texts
    ],
    ids=["missing", "zero", "negative", "too-low", "impossible"],
)
def test_an_upstream_s_missing_or_implausible_usage_cannot_get_past_the_budget(stub, usage):
    stub.responder = lambda body: _usage_reply(usage)
    budget = 8000

    with pytest.raises(LlmBudgetExceeded):
        for _ in range(40):
            ask(payload={"dialogue": LONG_DIALOGUE}, token_budget=budget, max_tokens=500)

    runs = list(AutoLlmRun.objects.filter(run_key="sleep-run:1"))
    # Each call counts what its texts cost (~1,000 prompt tokens with the identity context); 8,000 stop the ninth.
    assert all(1000 <= run.prompt_tokens <= 1300 and run.completion_tokens >= 10 for run in runs)
    assert len(stub.requests) == len(runs) <= 9
    with connection.cursor() as cursor:
        cursor.execute("SELECT spent, reserved FROM llm_token_budgets WHERE run_key = 'sleep-run:1'")
        spent, reserved = cursor.fetchone()
    assert budget <= spent == sum(run.total_tokens for run in runs) <= budget + 1300 + 500
    assert reserved == 0


def test_usage_reported_above_the_estimate_is_counted_as_reported(stub):
    stub.reply(ANSWER, prompt_tokens=900, completion_tokens=40)

    ask(payload={"dialogue": "用户: 我女儿属虎"})

    run = AutoLlmRun.objects.get()
    assert (run.prompt_tokens, run.completion_tokens) == (900, 40)


def test_the_local_estimate_counts_a_cjk_character_as_a_token_and_four_other_characters_as_one():
    assert estimate_tokens("") == 0
    assert estimate_tokens("我女儿属虎") == 5
    assert estimate_tokens("わたしは한국어") == 7
    assert estimate_tokens("a" * 400) == 100
    assert estimate_tokens("我 likes tea") == 1 + 3


@pytest.mark.django_db(transaction=True)
def test_workers_calling_at_once_overshoot_the_budget_by_at_most_one_call(stub):
    """Six threads, each its own database connection, call until the run's budget stops them."""
    stub.delay = 0.05
    stub.responder = lambda body: StubReply(content=json.dumps(ANSWER), prompt_tokens=150, completion_tokens=50)
    budget, started = 1000, threading.Barrier(6)

    def worker() -> None:
        started.wait()
        try:
            while True:
                ask(token_budget=budget, max_tokens=300)
        except LlmBudgetExceeded:
            pass
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    spent = sum(AutoLlmRun.objects.filter(run_key="sleep-run:1").values_list("total_tokens", flat=True))
    # Checking the spent total before each call would let all six start at 800 and end at 2,000.
    assert budget <= spent <= budget + 200
    assert len(stub.requests) == spent // 200


def test_offline_calls_dispatch_on_purpose_and_estimate_tokens(settings):
    settings.ANIMA_LLM_PROVIDER = "offline"
    SelfLayerBlockFactory(key=SelfBlock.SELF_MODEL, content="I am Anima.")

    answer = ask(purpose="test.echo", payload={"text": "喜欢樱桃"}, token_budget=10_000)

    assert answer == {"facts": [{"content": "喜欢樱桃", "importance": 0.5}]}
    run = AutoLlmRun.objects.get()
    assert run.provider == "offline"
    assert "I am Anima." in run.prompt[0]["content"]
    assert run.total_tokens == run.prompt_tokens + run.completion_tokens > 0


def test_offline_answers_are_validated_like_http_answers(settings):
    settings.ANIMA_LLM_PROVIDER = "offline"
    strict = {**FACTS_SCHEMA, "properties": {"facts": {"type": "array", "maxItems": 1, "items": {"type": "string"}}}}

    with pytest.raises(LlmInvalidOutput, match=r"\$\.facts\[0\]: expected string, got object"):
        ask(purpose="test.echo", payload={"text": "x"}, schema=strict)


def test_an_unregistered_offline_purpose_is_a_clear_error(settings):
    settings.ANIMA_LLM_PROVIDER = "offline"

    with pytest.raises(LlmError, match="no handler for purpose 'no-such-purpose'"):
        ask(purpose="no-such-purpose")

    assert "no handler" in AutoLlmRun.objects.get().error


def test_the_scripted_provider_answers_from_its_queue_and_records_calls():
    with scripted({"dream": [{"facts": []}, LlmTransientError("down")]}) as provider:
        assert ask(purpose="dream") == {"facts": []}
        with pytest.raises(LlmTransientError):
            ask(purpose="dream")
        with pytest.raises(LlmError, match="no answer queued"):
            ask(purpose="dream")

    assert provider.purposes() == ["dream", "dream", "dream"]
    assert provider.calls[0].payload == {"dialogue": "用户: 我女儿属虎"}


def test_schema_errors_name_every_offending_path():
    with pytest.raises(SchemaError) as caught:
        schema_validate(value={"facts": [{"importance": True}, "x"]}, schema=FACTS_SCHEMA)

    assert caught.value.errors == [
        "$.facts[0].content: required property missing",
        "$.facts[0].importance: expected number, got boolean",
        "$.facts[1]: expected object, got string",
    ]


def _containers(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(), _containers, max_leaves=12)


@hypothesis_settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(value=st.dictionaries(st.text(max_size=8), json_values, max_size=5), prose=st.sampled_from(["", "Sure!\n"]))
def test_any_json_object_survives_fences_and_prose(value, prose):
    from anima.core.llm import json_extract

    encoded = json.dumps(value, ensure_ascii=False)
    assert json_extract(encoded) == value
    assert json_extract(f"{prose}```json\n{encoded}\n```") == value
    assert json_extract(f"{prose}{encoded}") == value


def test_schema_builders_write_the_json_schema_they_name():
    schema = schema_object(
        {
            "kind": schema_enum(["a", "b"], description="Which."),
            "text": schema_string(min_length=1, max_length=9),
            "at": schema_string(max_length=40, nullable=True),
            "ids": schema_array(schema_integer(minimum=1), max_items=5),
            "score": schema_number(minimum=0, maximum=1),
            "flag": schema_boolean(),
        },
        required=["kind"],
    )

    assert schema == {
        "type": "object",
        "properties": {
            "kind": {"type": "string", "enum": ["a", "b"], "description": "Which."},
            "text": {"type": "string", "minLength": 1, "maxLength": 9},
            "at": {"type": ["string", "null"], "maxLength": 40},
            "ids": {"type": "array", "items": {"type": "integer", "minimum": 1}, "maxItems": 5},
            "score": {"type": "number", "minimum": 0, "maximum": 1},
            "flag": {"type": "boolean"},
        },
        "required": ["kind"],
        "additionalProperties": False,
    }
    with pytest.raises(ValueError, match="required names no property: kinds"):
        schema_object({"kind": schema_enum(["a"])}, required=["kinds"])


def test_schema_errors_list_missing_names_first_then_the_value_in_order():
    schema = {
        "type": "object",
        "required": ["a", "b"],
        "additionalProperties": False,
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}, "c": {"type": "string", "enum": ["x"]}},
    }

    with pytest.raises(SchemaError) as caught:
        schema_validate(value={"z": 1, "c": 5, "b": "2"}, schema=schema)

    assert caught.value.errors == [
        "$.a: required property missing",
        "$.z: property not allowed",
        "$.c: expected string, got integer",
        "$.b: expected integer, got string",
    ]
