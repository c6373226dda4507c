"""OpenAI-compatible memory proxy: ``POST /v1/chat/completions`` with memory in between, and
``GET /v1/models`` (the configured model, which every request goes to).

A bot gets memory by pointing its OpenAI client at Anima (``base_url``) with an Anima API token
as its ``api_key``. For each request:

1. who asks: the token's binding, narrowed by ``X-Anima-Person`` or the request's ``user`` (person
   slugs) and ``X-Anima-Conversation`` (an external id, required unless the token is bound to
   exactly one conversation; created on first sight with platform ``api``);
2. the turn: the request's final user message is the new one; earlier messages are the client's
   copy of a history Anima keeps itself, so they are dropped (a resent history never duplicates),
   except the client's system messages, kept right after Anima's system prompt, and the messages
   after the user message (a tool round: the client's assistant tool calls and tool results);
3. the turn is assembled exactly as ``prepare_turn`` does and forwarded with the request's other
   parameters to the configured LLM (``ANIMA_LLM_*``; the offline provider does not chat: 503),
   ``user`` set to the slug of the person the conversation resolves to (left out when nobody);
4. on success the user message and the reply are stored together (citations counted); the
   client gets the upstream answer unchanged in shape, ``[[anima:ID]]`` markers stripped unless
   ``ANIMA_PROXY_KEEP_CITATIONS``. A failed upstream call stores nothing.

With ``stream: true`` the upstream's server-sent events pass through as they arrive (a partial
marker at a chunk's end is held back until it closes or cannot be one); the reply is stored once
the stream finished.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx2
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from anima.agent.turn import prepare_turn
from anima.core.errors import AccessDenied, AnimaError, Unavailable
from anima.core.jsonvalue import storable
from anima.core.text import MAX_TEXT_CHARS, clip, text_bounded
from conversations.access import (
    AGENT,
    CONVERSATION_HEADER,
    OPERATOR,
    PERSON_HEADER,
    Access,
    access_narrow_by_name,
)
from conversations.models import Conversation, Platform, Role
from conversations.selectors import conversation_person, message_latest_user
from conversations.services import message_create

logger = logging.getLogger(__name__)

NO_CHAT_MODEL = (
    "no chat model configured: set ANIMA_LLM_BASE_URL and ANIMA_LLM_MODEL (the offline provider does not chat)"
)
# Ends a reply stored cut to MAX_TEXT_CHARS.
CUT_MARK = " …"
# Roles whose messages before the user message are the client's instructions, not its history.
CLIENT_INSTRUCTION_ROLES = ("system", "developer")

# A citation marker, with the spaces before it (so "Miso [[anima:3]]." reads "Miso.").
_MARKER = re.compile(r"[ \t]*\[\[anima:\d{1,18}\]\]")
# The end of a text that may still become a marker: spaces, then a prefix of "[[anima:<digits>]]".
_MARKER_PREFIX = r"\[(?:\[(?:a(?:n(?:i(?:m(?:a(?::(?:\d{1,18}\]?)?)?)?)?)?)?)?)?"
_PARTIAL_MARKER = re.compile(rf"[ \t]*(?:{_MARKER_PREFIX})?$")


class UpstreamError(Exception):
    """The LLM server failed; ``status`` is what the client gets (the upstream's own, or 502/504)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class CitationStripper:
    """Removes ``[[anima:ID]]`` markers from a text that arrives in pieces."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, text: str) -> str:
        """What of the text so far can be shown: markers removed, a possible marker start held back."""
        text = _MARKER.sub("", self._held + text)
        cut = _PARTIAL_MARKER.search(text).start()
        self._held = text[cut:]
        return text[:cut]

    def flush(self) -> str:
        """The held-back end, once nothing more comes: it never became a marker."""
        held, self._held = self._held, ""
        return held


def citations_stripped(text: str) -> str:
    stripper = CitationStripper()
    return stripper.feed(text) + stripper.flush()


@dataclass(frozen=True)
class ProxyTurn:
    conversation: Conversation
    # The new user message, or None when it is already stored (a tool round continuing it).
    user_message: str | None
    upstream_body: dict[str, Any]
    at: datetime


# --- The turn --------------------------------------------------------------------------------------


def _text_of(content: Any, *, field: str) -> str:
    """A message's text: a string, or the text parts of a content list."""
    if isinstance(content, list):
        texts = [part.get("text") for part in content if isinstance(part, dict) and part.get("type") == "text"]
        if all(isinstance(text, str) for text in texts):
            content = "\n".join(texts)
    if not isinstance(content, str) or not content.strip():
        raise AnimaError(f"{field} must be a non-empty text (or a list of text parts)", field=field)
    return text_bounded(content, field=field)  # refused before the LLM is asked, not when storing


def _user_message_index(messages: Any) -> int:
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise AnimaError("messages must be a non-empty list of message objects", field="messages")
    users = [index for index, message in enumerate(messages) if message.get("role") == Role.USER]
    if not users:
        raise AnimaError("messages needs a user message: the new turn", field="messages")
    return users[-1]


def _person_slug(*, header: str | None, user: Any) -> str | None:
    if user is not None and not isinstance(user, str):
        raise AnimaError("user must be a person slug", field="user")
    if header and user and header != user:
        raise AnimaError(f"user {user!r} contradicts {PERSON_HEADER} {header!r}", field="user")
    return header or user or None


def _conversation(*, reference: str | None, access: Access) -> Conversation:
    """The conversation named by the header, created on first sight (platform api) for its person."""
    if not reference:
        if access.conversation is not None:
            return access.conversation
        raise AnimaError(
            f"{CONVERSATION_HEADER} is required: the external id of the conversation (created on first sight)",
            field=CONVERSATION_HEADER,
        )
    if len(reference) > Conversation._meta.get_field("external_id").max_length:
        raise AnimaError(f"{CONVERSATION_HEADER} is longer than 200 characters", field=CONVERSATION_HEADER)
    found = Conversation.objects.select_related("person").filter(external_id=reference).first()
    if found is not None:
        return found
    if access.person is None and not access.is_operator:
        raise AccessDenied(
            f"a new conversation needs its person ({PERSON_HEADER} or user): this is {access.binding}, "
            "which acts for no single person"
        )
    try:
        with transaction.atomic():
            created = Conversation.objects.create(external_id=reference, platform=Platform.API, person=access.person)
            access.conversation_write_check(created)  # outside the token's reach: undone, 403
            return created
    except IntegrityError:  # a concurrent first request created it
        return Conversation.objects.select_related("person").get(external_id=reference)


def _wire(message: dict) -> dict:
    """An assembled message as the chat-completions API takes it (no empty ``name``)."""
    wired = {"role": message["role"], "content": message["content"]}
    if message.get("name"):
        wired["name"] = message["name"]
    return wired


def _already_stored(conversation: Conversation, text: str) -> bool:
    latest = message_latest_user(conversation=conversation)
    return latest is not None and latest.content == text


def proxy_turn(*, body: Any, access: Access, person: str | None, conversation: str | None) -> ProxyTurn:
    """Check who asks, find (or create) the conversation and assemble the upstream request.

    ``person`` / ``conversation`` are the X-Anima-* headers. Raises AnimaError (400 naming the
    field), AccessDenied (403 naming why), Unavailable (503) without a chat model.
    """
    access.require(OPERATOR, AGENT, to="the chat proxy")
    if settings.ANIMA_LLM_PROVIDER != "openai":
        raise Unavailable(NO_CHAT_MODEL)
    if not isinstance(body, dict):
        raise AnimaError("the body must be a JSON object (a chat completion request)", field="body")
    messages = body.get("messages")
    index = _user_message_index(messages)
    text = _text_of(messages[index].get("content"), field=f"messages[{index}].content")
    field = "user" if body.get("user") and not person else PERSON_HEADER
    access = access_narrow_by_name(
        access, person=_person_slug(header=person, user=body.get("user")), person_field=field
    )
    found = _conversation(reference=conversation, access=access)
    # Outside the binding, or of another person than the one named: 403 naming why.
    access.conversation_check(found)

    # A tool round resends its user message with the calls and results after it: stored already.
    trailing = messages[index + 1 :]
    stored = bool(trailing) and _already_stored(found, text)
    at = timezone.now()
    assembled = prepare_turn(conversation=found, user_message=text, now=at, store=False)
    if stored:
        assembled = assembled[:-1]
    instructions = [message for message in messages[:index] if message.get("role") in CLIENT_INSTRUCTION_ROLES]
    upstream_messages = [_wire(assembled[0]), *instructions, *(_wire(m) for m in assembled[1:]), *trailing]
    upstream_body = {**body, "model": settings.ANIMA_LLM_MODEL, "messages": upstream_messages}
    # The upstream's per-user accounting and abuse checks see whom the turn is for, as a slug (no name).
    person_of_turn = conversation_person(conversation=found)
    upstream_body.pop("user", None)
    if person_of_turn is not None:
        upstream_body["user"] = person_of_turn.slug
    return ProxyTurn(conversation=found, user_message=None if stored else text, upstream_body=upstream_body, at=at)


def proxy_models(*, access: Access) -> list[dict[str, Any]]:
    """The models a client may name: the one configured, which every request is sent to whatever it names.

    Raises AccessDenied without the proxy's scope, Unavailable (503) without a chat model, as the proxy does.
    """
    access.require(OPERATOR, AGENT, to="the chat proxy")
    if settings.ANIMA_LLM_PROVIDER != "openai":
        raise Unavailable(NO_CHAT_MODEL)
    # No upstream call: the list is what Anima sends, and a client asking first never waits on the LLM server.
    return [{"id": settings.ANIMA_LLM_MODEL, "object": "model", "created": 0, "owned_by": "anima"}]


def _storable_reply(turn: ProxyTurn, reply: str) -> str:
    """The reply as stored: what PostgreSQL cannot hold replaced, cut (at a sentence end, marked) when longer
    than a message may be.

    The model wrote it, not the client: the client gets it whole, and what Anima keeps stays
    within the length every stored text is held to (search indexes each message whole).
    """
    reply = storable(reply)  # a NUL or lone surrogate the model wrote becomes U+FFFD
    if len(reply) <= MAX_TEXT_CHARS:
        return reply
    logger.warning(
        "the reply in conversation %s has %d characters; stored are the first %d",
        turn.conversation.pk,
        len(reply),
        MAX_TEXT_CHARS,
    )
    return clip(reply, MAX_TEXT_CHARS - len(CUT_MARK)) + CUT_MARK


def _store(turn: ProxyTurn, reply: str) -> None:
    """The user message and the reply, together or not at all."""
    with transaction.atomic():
        if turn.user_message is not None:
            message_create(
                conversation=turn.conversation, role=Role.USER, content=turn.user_message, created_at=turn.at
            )
        if reply:
            message_create(conversation=turn.conversation, role=Role.ASSISTANT, content=_storable_reply(turn, reply))


# --- Upstream ---------------------------------------------------------------------------------------


def _client() -> httpx2.Client:
    return _pooled_client(settings.ANIMA_LLM_API_KEY, settings.ANIMA_LLM_TIMEOUT)


@functools.lru_cache(maxsize=4)
def _pooled_client(api_key: str, timeout: float) -> httpx2.Client:
    # One per process (thread-safe): each turn reuses a kept-alive connection instead of a new TCP/TLS handshake.
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx2.Client(headers=headers, timeout=timeout, trust_env=False)


def _url() -> str:
    return f"{settings.ANIMA_LLM_BASE_URL.rstrip('/')}/chat/completions"


def _upstream_failure(response: httpx2.Response) -> UpstreamError:
    try:
        detail = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        detail = response.text[:300]
    return UpstreamError(response.status_code, f"the LLM server answered HTTP {response.status_code}: {detail}")


def _send(client: httpx2.Client, turn: ProxyTurn, *, stream: bool) -> httpx2.Response:
    request = client.build_request("POST", _url(), json=turn.upstream_body)
    try:
        response = client.send(request, stream=stream)
    except httpx2.TimeoutException:
        raise UpstreamError(504, f"the LLM server did not answer within {settings.ANIMA_LLM_TIMEOUT:g} s") from None
    except httpx2.HTTPError as exc:
        raise UpstreamError(502, f"cannot reach the LLM server: {exc}") from None
    if response.status_code != 200:
        response.read()
        response.close()
        raise _upstream_failure(response)
    return response


def proxy_complete(turn: ProxyTurn) -> dict[str, Any]:
    """The upstream's chat completion (markers stripped unless kept), after storing the turn."""
    response = _send(_client(), turn, stream=False)
    try:
        answer = response.json()
        reply = answer["choices"][0]["message"].get("content") or ""
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise UpstreamError(502, f"the LLM server's answer is not a chat completion: {response.text[:200]!r}") from None
    _store(turn, reply)
    if not settings.ANIMA_PROXY_KEEP_CITATIONS:
        for choice in answer["choices"]:
            message = choice.get("message") or {}
            if isinstance(message.get("content"), str):
                message["content"] = citations_stripped(message["content"])
    return answer


class UpstreamEvents:
    """The upstream's events to pass on. Closing it (the streaming response does, read or not) closes the
    upstream response: a generator's own ``finally`` never runs when it was never started, so a client gone
    before the first chunk would otherwise keep a pooled connection checked out."""

    def __init__(self, turn: ProxyTurn, response: httpx2.Response) -> None:
        self.response = response
        self._events = _events(turn, response)

    def __iter__(self) -> Iterator[bytes]:
        return self._events

    def close(self) -> None:
        self._events.close()
        self.response.close()


def proxy_stream(turn: ProxyTurn) -> UpstreamEvents:
    """Open the upstream stream (UpstreamError if it will not start) and return its events to pass on."""
    return UpstreamEvents(turn, _send(_client(), turn, stream=True))


def _events(turn: ProxyTurn, response: httpx2.Response) -> Iterator[bytes]:
    keep = settings.ANIMA_PROXY_KEEP_CITATIONS
    replies: dict[int, str] = {}
    strippers: dict[int, CitationStripper] = {}
    finished = stored = False
    try:
        for line in response.iter_lines():
            data = line[5:].strip() if line.startswith("data:") else None
            if data == "[DONE]" and finished and not stored:
                # Stored before the client hears the end, so its next turn already sees this reply.
                _store(turn, replies.get(0, ""))
                stored = True
            elif data:
                try:
                    event = json.loads(data)
                except ValueError:
                    event = None
                if isinstance(event, dict):
                    finished |= _relay(event, replies, strippers, keep=keep)
                    if not keep:
                        line = f"data: {json.dumps(event, ensure_ascii=False)}"
            yield f"{line}\n".encode()
        if not finished:
            raise httpx2.RemoteProtocolError("the stream ended before the reply finished")
        if not stored:  # a server that sends no [DONE]
            _store(turn, replies.get(0, ""))
    except httpx2.HTTPError as exc:
        yield _error_event(f"the LLM server's stream broke off ({exc}); nothing was stored")
    except Exception:
        # The 200 and part of the reply are sent: a failure can only end the stream, with an event saying so.
        logger.exception("the proxy stream in conversation %s failed", turn.conversation.pk)
        outcome = "the reply was stored" if stored else "nothing was stored"
        yield _error_event(f"Anima could not pass on this reply (see the server log); {outcome}", kind="server_error")
    finally:
        response.close()


def _error_event(message: str, *, kind: str = "upstream_error") -> bytes:
    return f"data: {json.dumps({'error': {'message': message, 'type': kind}})}\n\n".encode()


def _relay(event: dict, replies: dict[int, str], strippers: dict[int, CitationStripper], *, keep: bool) -> bool:
    """Collect each choice's text from one chunk (stripping its markers unless kept); True when one finished."""
    finished = False
    for choice in event.get("choices") or []:
        if not isinstance(choice, dict):
            continue
        index = choice.get("index", 0)
        # The chunk's own delta, even an empty one: a held-back end flushed into it must reach the client.
        delta = choice.get("delta")
        if delta is None:
            delta = choice["delta"] = {}
        piece = delta.get("content") if isinstance(delta, dict) else None
        if isinstance(piece, str):
            replies[index] = replies.get(index, "") + piece
        if not keep and isinstance(delta, dict):
            stripper = strippers.setdefault(index, CitationStripper())
            shown = stripper.feed(piece if isinstance(piece, str) else "")
            if choice.get("finish_reason"):
                shown += stripper.flush()
            if isinstance(piece, str) or shown:
                delta["content"] = shown
        finished |= bool(choice.get("finish_reason"))
    return finished
