"""Short-term memory summary: an LLM-authored summary rendered in place of older raw messages.

The ``update_short_term_memory`` tool writes the summary beside the messages (never instead of
them) for both scopes — user (person + conversation) and server (conversation / channel) — as
database rows, so it survives restarts. A summary is live for ``stm.summary_ttl_hours``
(24 h) after its last write; raw messages lapse after ``stm.raw_ttl_hours`` (12 h) of silence.
Past ``stm.consolidate_after_messages`` raw messages, the older ones are archived as
HistoryEntry rows (global, and the person's when the identity resolves) and folded into the
summary (by a worker when a broker is configured, else by the turn); messages are never deleted.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from anima.core.cache import cache_add_json, cache_delete, cache_get_json, cache_set_json
from anima.core.config import config_get
from anima.core.db import advisory_lock
from anima.core.llm import LlmError
from anima.core.segmentation import text_ruled
from conversations.models import (
    Conversation,
    HistoryEntry,
    Message,
    Role,
    ShortTermMemory,
    StmScope,
)
from conversations.selectors import conversation_person, message_latest_user
from temporal.tick import messages_digest

logger = logging.getLogger(__name__)

RENDERED_ROLES = (Role.USER, Role.ASSISTANT)
# "Remember that …" / 「记住…」: the user wants long-term memory, so the short-term tool is not offered.
_LONG_TERM_INTENT = re.compile(
    r"记住|记下来|别忘了|不要忘记|永远记得|长期记忆|\bremember (?:this|that|me|my)\b|\bdon'?t forget\b|"
    r"\bkeep in mind\b|\bsave (?:this|that) to (?:your )?memory\b|\bnote (?:this|that) down\b",
    re.IGNORECASE,
)


def long_term_intent_detect(*, text: str) -> bool:
    """True when the user explicitly asks the companion to remember something for the long term (「記住」 too)."""
    return bool(_LONG_TERM_INTENT.search(text_ruled(text or "")))


def _turn(conversation: Conversation, *, turn_id: str | None, long_term_intent: bool | None) -> tuple[str, bool]:
    """The turn's id and whether it asks for long-term memory (「记住…」, "remember this").

    What is not given comes from the turn's user message (the latest one), read once.
    """
    latest = message_latest_user(conversation=conversation) if turn_id is None or long_term_intent is None else None
    if turn_id is None:
        turn_id = str(latest.pk) if latest else ""
    if long_term_intent is None:
        long_term_intent = long_term_intent_detect(text=latest.content if latest else "")
    return turn_id, long_term_intent


def _updated_in_turn(conversation: Conversation, turn: str) -> bool:
    # No turn (no user message yet) is never one the summary was updated in.
    return bool(turn) and ShortTermMemory.objects.filter(conversation=conversation, last_turn_id=turn).exists()


def _latest_message(conversation: Conversation) -> Message | None:
    return conversation.messages.filter(role__in=RENDERED_ROLES).order_by("-created_at", "-pk").first()


def stm_tool_available(
    *, conversation: Conversation, turn_id: str | None = None, long_term_intent: bool | None = None
) -> bool:
    """Whether ``update_short_term_memory`` may be offered in this turn (the seed's two guards).

    ``long_term_intent`` None reads it from the turn's user message.
    """
    turn, long_term_intent = _turn(conversation, turn_id=turn_id, long_term_intent=long_term_intent)
    return not long_term_intent and not _updated_in_turn(conversation, turn)


def update_short_term_memory(
    *,
    conversation: Conversation,
    summary: str,
    turn_id: str | None = None,
    long_term_intent: bool | None = None,
    now: datetime | None = None,
) -> dict:
    """The tool: store ``summary`` (silently cut to ``stm.max_summary_chars``) for both scopes.

    Covers every message stored so far. Refused when the turn shows explicit long-term-memory
    intent or the tool already succeeded in this turn (``turn_id``, default: the latest user
    message; ``long_term_intent`` None reads it from that message). ``now`` simulates the clock (tests, ``--at``).
    Returns ``{success, message}`` or ``{success: False, error}``.
    """
    turn, long_term_intent = _turn(conversation, turn_id=turn_id, long_term_intent=long_term_intent)
    if long_term_intent:
        return {"success": False, "error": "not available: the user asked for long-term memory; use memory_remember"}
    # PostgreSQL text cannot hold NUL; a model that emits one still gets its summary stored.
    text = summary.replace("\x00", "").strip() if isinstance(summary, str) else ""
    if not text:
        return {"success": False, "error": "summary must be a non-empty string"}
    now = now or timezone.now()
    latest = _latest_message(conversation)
    with transaction.atomic():
        # Lock the conversation so two calls in one turn cannot both pass the guard.
        Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
        if _updated_in_turn(conversation, turn):
            return {"success": False, "error": "the short-term memory was already updated in this turn"}
        text = text[: config_get(section="stm")["max_summary_chars"]]
        _write(
            conversation=conversation,
            summary=text,
            covers_until=latest.created_at if latest else now,
            covers_until_message_id=latest.pk if latest else None,
            turn_id=turn,
            at=now,
        )
    return {"success": True, "message": f"short-term memory updated ({len(text)} characters)"}


def _write(
    *,
    conversation: Conversation,
    summary: str,
    covers_until: datetime,
    covers_until_message_id: int | None,
    turn_id: str | None,
    at: datetime,
) -> None:
    person = conversation_person(conversation=conversation)
    channel = conversation.channel_name
    for scope in (StmScope.USER, StmScope.SERVER):
        defaults = {
            "person": person if scope == StmScope.USER else None,
            "channel": channel,
            "summary": summary,
            "covers_until": covers_until,
            "covers_until_message_id": covers_until_message_id,
            "updated_at": at,
        }
        if turn_id is not None:
            defaults["last_turn_id"] = turn_id
        ShortTermMemory.objects.update_or_create(conversation=conversation, scope=scope, defaults=defaults)


@dataclass(frozen=True)
class ShortTermView:
    """What turn assembly renders of a conversation: the live summary (if any) and the raw messages after it."""

    summary: str
    summary_until: datetime | None
    messages: list[Message]


def _after(messages: QuerySet[Message], *, at: datetime, message_id: int | None) -> QuerySet[Message]:
    if message_id is None:
        return messages.filter(created_at__gt=at)
    return messages.filter(Q(created_at__gt=at) | Q(created_at=at, pk__gt=message_id))


def _view(*, conversation: Conversation, now: datetime, config: dict, stored: ShortTermMemory | None) -> ShortTermView:
    """The live summary and the raw messages it does not cover, up to ``now``.

    ``stored`` is the conversation's summary row (``_summary_row``); it is live until ``summary_ttl_hours``
    after its last update. Raw messages before a silence of ``raw_ttl_hours`` (or older than that when the
    conversation has been quiet since) have lapsed from short-term memory; recall still finds them.
    """
    messages = conversation.messages.filter(role__in=RENDERED_ROLES, created_at__lte=now)
    live = stored is not None and stored.updated_at > now - timedelta(hours=config["summary_ttl_hours"])
    row = stored if live else None
    if row is not None:
        messages = _after(messages, at=row.covers_until, message_id=row.covers_until_message_id)
    raw = list(messages.order_by("created_at", "pk"))
    raw_ttl = timedelta(hours=config["raw_ttl_hours"])
    moments = [m.created_at for m in raw] + [now]
    start = 0
    for index in range(1, len(moments)):
        if moments[index] - moments[index - 1] >= raw_ttl:
            start = index
    return ShortTermView(
        summary=row.summary if row else "", summary_until=row.covers_until if row else None, messages=raw[start:]
    )


def _summary_row(*, conversation: Conversation) -> ShortTermMemory | None:
    """The conversation's summary row, of any age."""
    scope = StmScope.USER if conversation_person(conversation=conversation) else StmScope.SERVER
    return ShortTermMemory.objects.filter(conversation=conversation, scope=scope).first()


# anima.agent.tasks.short_term_consolidate_task, named: that module is the adapter over this one.
CONSOLIDATE_TASK = "anima.agent.tasks.short_term_consolidate_task"


def short_term_prepare(*, conversation: Conversation, now: datetime) -> ShortTermView:
    """The view turn assembly renders, consolidated first when past ``stm.consolidate_after_messages``.

    With a broker a worker consolidates (``short_term_consolidate``) once the turn commits, so the turn
    never waits for the model: this view stays raw and the next turn renders the summary. Without one
    the turn consolidates in place.
    """
    config, view, pending = _state(conversation=conversation, now=now)
    if len(pending) <= config["consolidate_after_messages"] or _postponed(conversation=conversation, now=now):
        return view
    if settings.CELERY_BROKER_URL:
        _consolidation_queue(conversation=conversation, now=now)
        return view
    return short_term_consolidate(conversation=conversation, now=now) or view


# A conversation stays due until the worker is done with it, and the turns meanwhile do not each send a task: one is
# in flight at a time (per web process on the in-process cache, in all with REDIS_URL). Past this, one that no worker
# finished (lost with a broker that keeps nothing) is sent again.
QUEUED_SECONDS = 300


def _queued_key(conversation: Conversation) -> str:
    return f"anima:stm:queued:{conversation.pk}"


def _consolidation_queue(*, conversation: Conversation, now: datetime) -> None:
    """Send the consolidation task once the turn commits, unless one sent for this conversation is not done yet."""
    key = _queued_key(conversation)
    kwargs = {"conversation_id": conversation.pk, "now": now.isoformat()}

    def send() -> None:
        if not cache_add_json(key=key, value=kwargs["now"], timeout_seconds=QUEUED_SECONDS):
            return
        try:
            current_app.send_task(CONSOLIDATE_TASK, kwargs=kwargs)
        except Exception:
            cache_delete(key=key)  # not sent: the next due turn sends it
            raise

    # Robust: a broker that does not answer is logged, and the turn still gets its answer (a later one sends again).
    transaction.on_commit(send, robust=True)


def _state(*, conversation: Conversation, now: datetime) -> tuple[dict, ShortTermView, list[Message]]:
    """The stm config, the view, and its raw messages no summary has covered yet."""
    config = config_get(section="stm")
    covered = _summary_row(conversation=conversation)
    view = _view(conversation=conversation, now=now, config=config, stored=covered)
    if covered is None:
        return config, view, view.messages
    # An expired summary no longer renders, but what it covered is archived already: never twice.
    mark = (covered.covers_until, covered.covers_until_message_id or 0)
    return config, view, [m for m in view.messages if (m.created_at, m.pk) > mark]


def _postponed_key(conversation: Conversation) -> str:
    return f"anima:stm:postponed:{conversation.pk}"


def _postponed(*, conversation: Conversation, now: datetime) -> bool:
    """Whether a failed consolidation put the next attempt after ``now`` (the turn's clock, simulated or not)."""
    until = cache_get_json(key=_postponed_key(conversation))
    try:
        return isinstance(until, str) and now < datetime.fromisoformat(until)
    except ValueError:
        return False  # not a moment we wrote: nothing is postponed


def short_term_consolidate(*, conversation: Conversation, now: datetime) -> ShortTermView | None:
    """Consolidate when past ``stm.consolidate_after_messages``; the view afterwards, or None when another turn
    or worker is consolidating this conversation right now (one model call at a time per conversation).

    Archives all but the newest half-threshold raw messages: one global HistoryEntry and, when the
    identity resolves, one for the person, whose digest is folded into the summary, which then covers
    them. Messages are never deleted. An LLM failure leaves everything raw, and turns render it raw without
    asking the model again for ``stm.retry_after_minutes``. Safe to repeat: what is consolidated is not due again.
    """
    with advisory_lock(f"stm:{conversation.pk}") as claimed:
        if not claimed:
            return None
        try:
            return _consolidate(conversation=conversation, now=now)
        finally:
            cache_delete(key=_queued_key(conversation))  # a later due turn may send the task again


def _consolidate(*, conversation: Conversation, now: datetime) -> ShortTermView:
    config, view, pending = _state(conversation=conversation, now=now)
    threshold = config["consolidate_after_messages"]
    if len(pending) <= threshold:
        return view
    archived = pending[: len(pending) - threshold // 2]
    cap = config["max_summary_chars"]
    try:
        digest = messages_digest(conversation=conversation, messages=archived, earlier=[], max_chars=cap).summary
    except LlmError as exc:
        # A model that is down or answers nothing usable is not asked again by every turn (each waiting for it).
        minutes = config["retry_after_minutes"]
        until = now + timedelta(minutes=minutes)
        cache_set_json(key=_postponed_key(conversation), value=until.isoformat(), timeout_seconds=minutes * 60)
        logger.warning(
            "short-term consolidation of conversation %s postponed for %d min: %s", conversation.pk, minutes, exc
        )
        return view
    person = conversation_person(conversation=conversation)
    last = archived[-1]
    with transaction.atomic():
        Conversation.objects.select_for_update().filter(pk=conversation.pk).first()
        stored = _summary_row(conversation=conversation)
        current = _view(conversation=conversation, now=now, config=config, stored=stored)
        if not current.messages or current.messages[0].pk != view.messages[0].pk:
            return current  # consolidated meanwhile (a summary written through the tool)
        for owner in (None, person) if person else (None,):
            HistoryEntry.objects.create(
                timestamp=last.created_at,
                content=digest,
                channel=conversation.channel_name,
                person=owner,
                conversation=conversation,
            )
        # The newest material wins the cap: the older summary gives way from its start.
        merged = f"{view.summary}\n{digest}" if view.summary else digest
        _write(
            conversation=conversation,
            summary=merged[-cap:].lstrip(),
            covers_until=last.created_at,
            covers_until_message_id=last.pk,
            turn_id=None,
            at=now,
        )
    return _view(conversation=conversation, now=now, config=config, stored=_summary_row(conversation=conversation))
