"""The memory proxy as a bot meets it: the official ``openai`` client against ``/v1`` over real HTTP,
with a local OpenAI-compatible stub as the upstream LLM."""

from __future__ import annotations

import itertools
import threading

import openai
import pytest
from django.contrib.auth import get_user_model
from hypothesis import given
from hypothesis import strategies as st

from anima.agent.proxy import CitationStripper, citations_stripped, proxy_stream, proxy_turn
from anima.agent.tools import tool_schemas
from anima.api.testing import api_token, operator_client
from anima.core.text import MAX_TEXT_CHARS
from conversations.access import access_for_user
from conversations.models import Conversation, Message, Platform
from memory.models import SemanticMemory
from tests.factories import ConversationFactory, PersonFactory, SemanticMemoryFactory


@pytest.fixture
def bot(live_server, llm_stub):
    """``bot(token, conversation=..., person=...)``: an OpenAI client whose base_url is Anima."""

    opened = []

    def client(token: str, *, conversation: str | None = None, person: str | None = None) -> openai.OpenAI:
        headers = {}
        if conversation:
            headers["X-Anima-Conversation"] = conversation
        if person:
            headers["X-Anima-Person"] = person
        opened.append(
            openai.OpenAI(
                base_url=f"{live_server.url}/v1", api_key=token, default_headers=headers, max_retries=0, timeout=30
            )
        )
        return opened[-1]

    yield client
    # A kept-alive socket keeps its server thread, and that thread's database connection, open.
    for each in opened:
        each.close()


@pytest.fixture
def leo_cat():
    return SemanticMemoryFactory(content="Leo's cat is called Miso", person=PersonFactory(slug="leo"))


def stored(external_id: str) -> list[tuple[str, str]]:
    return list(
        Message.objects.filter(conversation__external_id=external_id)
        .order_by("created_at", "id")
        .values_list("role", "content")
    )


def test_a_reply_comes_back_in_the_upstream_shape_and_the_turn_is_remembered(bot, llm_stub, leo_cat):
    llm_stub.reply(f"Your cat is Miso [[anima:{leo_cat.pk}]].", prompt_tokens=321, completion_tokens=9)
    client = bot(api_token(username="root", staff=True), conversation="tg-leo")

    completion = client.chat.completions.create(
        model="whatever-the-bot-says",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is my cat called?"}],
        user="leo",
        temperature=0.3,
    )

    assert completion.choices[0].message.content == "Your cat is Miso."  # marker stripped for the client
    assert completion.usage.prompt_tokens == 321  # the upstream's answer, unchanged otherwise
    assert completion.model == "stub-model"
    conversation = Conversation.objects.get(external_id="tg-leo")
    assert conversation.platform == Platform.API and conversation.person.slug == "leo"
    assert stored("tg-leo") == [
        ("user", "What is my cat called?"),
        ("assistant", f"Your cat is Miso [[anima:{leo_cat.pk}]]."),
    ]
    leo_cat.refresh_from_db()
    assert leo_cat.reference_count > 0  # the citation counted
    sent = llm_stub.requests[0]
    assert sent["model"] == "stub-model" and sent["temperature"] == 0.3
    assert sent["messages"][0]["role"] == "system"
    assert "Leo's cat is called Miso" in sent["messages"][0]["content"]  # Anima's system prompt first
    assert sent["messages"][1] == {"role": "system", "content": "Be brief."}  # the client's own after it
    assert sent["messages"][-1] == {"role": "user", "content": "What is my cat called?"}


def test_a_resent_history_is_not_stored_twice(bot, llm_stub, leo_cat):
    llm_stub.reply("Miso.")
    llm_stub.reply("Hangzhou, you said.")
    client = bot(api_token(username="root", staff=True), conversation="tg-leo")
    history = [{"role": "user", "content": "My cat?"}]
    first = client.chat.completions.create(model="m", messages=history, user="leo")
    history += [{"role": "assistant", "content": first.choices[0].message.content}]

    client.chat.completions.create(model="m", messages=[*history, {"role": "user", "content": "Where do I live?"}])

    assert stored("tg-leo") == [
        ("user", "My cat?"),
        ("assistant", "Miso."),
        ("user", "Where do I live?"),
        ("assistant", "Hangzhou, you said."),
    ]
    second = [(m["role"], m["content"]) for m in llm_stub.requests[1]["messages"][1:]]
    assert second == [("user", "My cat?"), ("assistant", "Miso."), ("user", "Where do I live?")]  # Anima's copy


def test_a_tool_round_passes_through_and_stores_its_user_message_once(bot, llm_stub):
    call = {"id": "call_1", "type": "function", "function": {"name": "memory_recall", "arguments": '{"query": "cat"}'}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    llm_stub.raw(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "stub-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        }
    )
    llm_stub.reply("Miso.")
    client = bot(api_token(username="root", staff=True), conversation="c")
    question = {"role": "user", "content": "My cat?"}

    first = client.chat.completions.create(model="m", messages=[question], tools=tool_schemas())
    assert first.choices[0].message.tool_calls[0].function.name == "memory_recall"
    result = {"role": "tool", "tool_call_id": "call_1", "content": '{"results": []}'}
    client.chat.completions.create(model="m", messages=[question, message, result], tools=tool_schemas())

    assert llm_stub.requests[0]["tools"] == tool_schemas()  # the client's parameters pass through
    sent = llm_stub.requests[1]["messages"]
    assert sent[-2:] == [message, result]
    assert sent.count(question) == 1
    assert stored("c") == [("user", "My cat?"), ("assistant", "Miso.")]


def test_a_stream_passes_through_without_markers_and_stores_the_whole_reply(bot, llm_stub, leo_cat):
    seen = threading.Event()
    llm_stub.stream(["Your cat ", "is Miso [[ani", f"ma:{leo_cat.pk}]", "]", ". Meow [", "sic]."], gate=seen)
    client = bot(api_token(username="leo-bot", scope="agent", persons=[leo_cat.person]), conversation="web-1")

    stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Cat?"}], stream=True)
    pieces = []
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
            seen.set()  # the upstream sends the rest only now

    assert llm_stub.gates_opened == [True]  # the first piece reached the client while the upstream waited
    assert "".join(pieces) == "Your cat is Miso. Meow [sic]."
    assert stored("web-1") == [("user", "Cat?"), ("assistant", f"Your cat is Miso [[anima:{leo_cat.pk}]]. Meow [sic].")]
    assert Conversation.objects.get(external_id="web-1").person == leo_cat.person  # the token's one person


def test_a_streamed_reply_keeps_its_held_back_end_when_the_finish_chunk_carries_no_text(bot, llm_stub, leo_cat):
    # The stub's finish chunk has an empty delta, as OpenAI's has: what was held back as a possible marker goes there.
    llm_stub.stream(["Miso is asleep. ", "See ["])
    client = bot(api_token(username="root", staff=True), conversation="web-3", person="leo")

    stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Cat?"}], stream=True)

    assert "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices) == "Miso is asleep. See ["


def test_a_stream_closed_before_its_first_chunk_closes_the_upstream_response(llm_stub, leo_cat):
    llm_stub.stream(["Your cat ", "is Miso."], gate=threading.Event())
    access = access_for_user(get_user_model().objects.create_user(username="root", is_staff=True))
    turn = proxy_turn(
        body={"messages": [{"role": "user", "content": "Cat?"}]}, access=access, person="leo", conversation="web-2"
    )
    events = proxy_stream(turn)
    assert not events.response.is_closed  # the upstream is mid-answer, waiting on the gate

    # Django's streaming response closes its iterable when the request ends, read or not (a client gone before
    # the first chunk): that close is this one.
    events.close()

    assert events.response.is_closed
    assert stored("web-2") == []  # nothing heard, nothing stored


def test_markers_reach_the_client_when_kept(bot, llm_stub, leo_cat, settings):
    settings.ANIMA_PROXY_KEEP_CITATIONS = True
    llm_stub.reply(f"Miso [[anima:{leo_cat.pk}]]")
    llm_stub.stream(["Miso [[anima:", f"{leo_cat.pk}]]"])
    client = bot(api_token(username="root", staff=True), conversation="c", person="leo")

    plain = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Cat?"}])
    streamed = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Cat?"}], stream=True)

    assert plain.choices[0].message.content == f"Miso [[anima:{leo_cat.pk}]]"
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == f"Miso [[anima:{leo_cat.pk}]]"


def test_an_upstream_failure_returns_its_status_and_stores_nothing(bot, llm_stub):
    llm_stub.fail(429, "slow down")
    llm_stub.stream(["Half a rep", "ly that never ends"], cut_after=1)
    client = bot(api_token(username="root", staff=True), conversation="c")

    with pytest.raises(openai.RateLimitError) as failed:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}])
    assert "the LLM server answered HTTP 429: slow down" in failed.value.message
    with pytest.raises(openai.APIError) as broken:
        list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}], stream=True))
    assert "nothing was stored" in broken.value.message

    assert stored("c") == []


SENTENCE = "Miso sleeps on the warm laptop again. "
LONG_REPLY = SENTENCE * (MAX_TEXT_CHARS // len(SENTENCE) + 100)  # 103,800 characters


def _stored_cut(content: str) -> bool:
    """Cut at the last sentence end within a message's length, and marked as cut."""
    return len(content) <= MAX_TEXT_CHARS and content.endswith("again. …") and LONG_REPLY.startswith(content[:-2])


def test_a_reply_longer_than_a_message_may_be_reaches_the_client_whole_and_is_stored_cut(bot, llm_stub, leo_cat):
    llm_stub.reply(LONG_REPLY)
    client = bot(api_token(username="root", staff=True), conversation="long", person="leo")

    completion = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Tell me all"}])

    assert completion.choices[0].message.content == LONG_REPLY
    (asked, replied) = stored("long")
    assert asked == ("user", "Tell me all") and replied[0] == "assistant" and _stored_cut(replied[1])


def test_a_streamed_reply_longer_than_a_message_may_be_streams_whole_and_is_stored_cut(bot, llm_stub, leo_cat):
    llm_stub.stream([LONG_REPLY[:60_000], LONG_REPLY[60_000:]])
    client = bot(api_token(username="root", staff=True), conversation="long", person="leo")

    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Tell me all"}], stream=True
    )

    assert "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices) == LONG_REPLY
    (asked, replied) = stored("long")
    assert asked == ("user", "Tell me all") and replied[0] == "assistant" and _stored_cut(replied[1])


def test_a_reply_anima_cannot_pass_on_or_store_as_written_never_breaks_the_connection(bot, llm_stub, leo_cat):
    llm_stub.reply("Miso\u0000 naps.")
    llm_stub.stream(["Miso ", "\ud800 naps."])  # a lone surrogate: no UTF-8 to send it in
    client = bot(api_token(username="root", staff=True), conversation="odd", person="leo")

    completion = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Cat?"}])
    assert completion.choices[0].message.content == "Miso\u0000 naps."
    assert stored("odd") == [("user", "Cat?"), ("assistant", "Miso\ufffd naps.")]

    with pytest.raises(openai.APIError) as broken:
        list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Cat?"}], stream=True))
    assert "Anima could not pass on this reply (see the server log); nothing was stored" in broken.value.message
    assert len(stored("odd")) == 2


def test_who_asks_decides_where_the_turn_goes(bot, llm_stub, leo_cat):
    ada = PersonFactory(slug="ada")
    only_chat = ConversationFactory(external_id="leo-only", person=leo_cat.person)
    leo_bot = api_token(username="leo-bot", scope="agent", persons=[leo_cat.person])
    hi = [{"role": "user", "content": "Hi"}]

    with pytest.raises(openai.PermissionDeniedError) as outside:
        bot(leo_bot, conversation="new").chat.completions.create(model="m", messages=hi, user="ada")
    assert "person ada is outside an agent token bound to persons leo" in outside.value.message
    two = api_token(username="two-bot", scope="agent", persons=[leo_cat.person, ada])
    with pytest.raises(openai.PermissionDeniedError) as nobody:
        bot(two, conversation="new").chat.completions.create(model="m", messages=hi)
    assert "a new conversation needs its person" in nobody.value.message
    with pytest.raises(openai.BadRequestError) as missing:
        bot(leo_bot).chat.completions.create(model="m", messages=hi)
    assert missing.value.body["param"] == "X-Anima-Conversation"
    with pytest.raises(openai.BadRequestError) as not_a_slug:
        bot(leo_bot, conversation="c").chat.completions.create(model="m", messages=hi, user="Leo Smith")
    assert not_a_slug.value.body["param"] == "user"
    ConversationFactory(external_id="ada-chat", person=ada)
    with pytest.raises(openai.PermissionDeniedError):
        bot(leo_bot, conversation="ada-chat").chat.completions.create(model="m", messages=hi)
    with pytest.raises(openai.AuthenticationError):
        bot("not-a-token", conversation="c").chat.completions.create(model="m", messages=hi)
    with pytest.raises(openai.PermissionDeniedError) as scopeless:
        bot(api_token(username="bare"), conversation="c").chat.completions.create(model="m", messages=hi)
    assert "needs operator or agent scope; this is a token without a scope" in scopeless.value.message
    leo_app = api_token(username="leo-app", scope="person", persons=[leo_cat.person])
    with pytest.raises(openai.PermissionDeniedError) as person_scope:
        bot(leo_app, conversation="c").chat.completions.create(model="m", messages=hi)
    assert "the chat proxy needs operator or agent scope; this is a person token of leo" in person_scope.value.message
    assert not Conversation.objects.filter(external_id__in=["new", "c"]).exists()  # refused: nothing created

    llm_stub.reply("Hello Leo.")
    one_chat = api_token(username="chat-bot", scope="agent", conversations=[only_chat])
    bot(one_chat).chat.completions.create(model="m", messages=hi)  # bound to one conversation: no header needed
    assert stored("leo-only") == [("user", "Hi"), ("assistant", "Hello Leo.")]


def test_the_offline_provider_does_not_chat(bot, settings):
    settings.ANIMA_LLM_PROVIDER = "offline"
    client = bot(api_token(username="root", staff=True), conversation="c")

    with pytest.raises(openai.InternalServerError) as failed:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}])

    assert failed.value.status_code == 503
    assert "no chat model configured" in failed.value.message
    assert not SemanticMemory.objects.exists() and not Conversation.objects.exists()


@given(text=st.text(alphabet="ab [[]]:anim0123 ", max_size=60), cuts=st.lists(st.integers(0, 60), max_size=6))
def test_stripping_markers_piece_by_piece_equals_stripping_the_whole(text, cuts):
    stripper = CitationStripper()
    bounds = [0, *sorted(cut for cut in cuts if cut <= len(text)), len(text)]
    shown = "".join(stripper.feed(text[start:end]) for start, end in itertools.pairwise(bounds))

    assert shown + stripper.flush() == citations_stripped(text)


# --- /v1/models, the person upstream, the schema -----------------------------------------------------


def test_models_lists_the_one_model_every_request_goes_to(bot, llm_stub):
    client = bot(api_token(username="leo-bot", scope="agent", persons=[PersonFactory(slug="leo")]))

    listed = client.models.list()
    one = client.models.retrieve("stub-model")

    assert [model.id for model in listed.data] == ["stub-model"]
    assert one.id == "stub-model" and one.object == "model"
    with pytest.raises(openai.NotFoundError) as other:
        client.models.retrieve("gpt-4o")
    assert "stub-model" in other.value.message
    assert llm_stub.requests == []  # answered by Anima: the LLM server is not asked


def test_models_answers_as_the_chat_proxy_does_to_who_may_not_chat(bot, settings):
    leo = PersonFactory(slug="leo")
    person_app = bot(api_token(username="leo-app", scope="person", persons=[leo]))
    with pytest.raises(openai.PermissionDeniedError) as refused:
        person_app.models.list()
    assert "the chat proxy needs operator or agent scope" in refused.value.message

    settings.ANIMA_LLM_PROVIDER = "offline"
    with pytest.raises(openai.InternalServerError) as offline:
        bot(api_token(username="root", staff=True)).models.list()
    assert offline.value.status_code == 503 and "no chat model configured" in offline.value.message


def test_the_person_of_the_turn_goes_upstream_as_user(bot, llm_stub, leo_cat):
    leo = leo_cat.person
    ConversationFactory(external_id="tg-leo", person=leo)
    ConversationFactory(external_id="nobodys", person=None, chat_id="")
    root = api_token(username="root", staff=True)
    hi = [{"role": "user", "content": "Hi"}]
    for _ in range(3):
        llm_stub.reply("Hello.")

    bot(root, conversation="tg-leo").chat.completions.create(model="m", messages=hi)
    bot(root, conversation="tg-leo", person="leo").chat.completions.create(model="m", messages=hi, user="leo")
    bot(root, conversation="nobodys").chat.completions.create(model="m", messages=hi)

    assert [request.get("user") for request in llm_stub.requests] == ["leo", "leo", None]


def test_the_proxy_is_described_in_the_api_schema():
    schema = operator_client().get("/api/schema/", {"format": "json"}).json()

    chat = schema["paths"]["/v1/chat/completions"]["post"]
    headers = {parameter["name"] for parameter in chat["parameters"] if parameter["in"] == "header"}
    assert headers == {"X-Anima-Person", "X-Anima-Conversation"}
    assert {"200", "400", "403", "429", "503"} <= set(chat["responses"])
    assert "text/event-stream" in chat["responses"]["200"]["content"]
    assert "get" in schema["paths"]["/v1/models"]
