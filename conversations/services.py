"""Writes for conversations, messages and people."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import OuterRef, Subquery
from django.db.models.functions import MD5, Greatest
from django.utils import timezone
from rest_framework.authtoken.models import Token

from anima.core.errors import AnimaError
from anima.core.forgotten import IDENTITY, PERSON, forgotten_account
from anima.core.jsonl import (
    ImportReport,
    LineError,
    ProgressCallback,
    check_keys,
    datetime_field,
    json_field,
    jsonl_import,
    text_field,
)
from anima.core.segmentation import segment_text
from anima.core.text import text_bounded
from conversations.models import (
    Conversation,
    HistoryEntry,
    Identity,
    Message,
    Person,
    Platform,
    Role,
    ScopeKind,
    TokenScope,
    person_slug_valid,
)
from conversations.signals import messages_stored

IMPORT_BATCH_LINES = 200


def person_ensure(*, slug: str, display_name: str = "") -> Person:
    """The person with ``slug``, created on first sight; a given ``display_name`` also renames them."""
    person, created = Person.objects.get_or_create(slug=slug, defaults={"display_name": display_name or slug})
    if not created and display_name and person.display_name != display_name:
        person.display_name = display_name
        person.save(update_fields=["display_name"])
    return person


def person_rename(*, person: Person, display_name: str) -> Person:
    """Give ``person`` a new display name (blank: shown by slug). Prompts already built show it from
    their next rebuild, like any other change to what they hold."""
    person.display_name = display_name.strip()
    person.full_clean()
    person.save(update_fields=["display_name"])
    return person


def persons_ensure(*, slugs: Iterable[str]) -> dict[str, Person]:
    """Persons by slug, created on first sight (one query to insert, one to read back)."""
    wanted = set(slugs)
    if not wanted:
        return {}
    Person.objects.bulk_create([Person(slug=s, display_name=s) for s in sorted(wanted)], ignore_conflicts=True)
    return {p.slug: p for p in Person.objects.filter(slug__in=wanted)}


def person_slug(value: Any, *, where: str) -> str | None:
    if value is None or value == "":
        return None
    if not person_slug_valid(value):
        raise LineError(f"{where} must be a slug (lowercase letters, digits, - or _), got {value!r}")
    return value


def message_create(
    *,
    conversation: Conversation,
    role: str,
    content: str,
    name: str = "",
    tool_payload: Any = None,
    external_id: str | None = None,
    created_at: datetime | None = None,
) -> Message:
    """Store one message and touch the conversation, in one transaction (``messages_stored`` is sent inside it)."""
    with transaction.atomic():
        message = Message(
            conversation=conversation,
            role=role,
            content=text_bounded(content, field="content"),
            name=name,
            tool_payload=tool_payload,
            external_id=external_id,
            created_at=created_at or timezone.now(),
        )
        message.save()
        messages_stored.send(sender=Message, messages=[message])
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=Greatest("updated_at", message.created_at))
    return message


# --- JSONL import -------------------------------------------------------------------------------

_CONVERSATION_KEYS = {"external_id", "platform", "channel", "chat_id", "person", "title", "created_at"}
_MESSAGE_KEYS = {"external_id", "role", "content", "created_at", "name", "tool_payload"}
# Advisory-lock key of conversation import batches (concurrent imports take turns per batch).
_IMPORT_LOCK = 7302


@dataclass
class _ParsedConversation:
    line: int
    external_id: str
    platform: str
    channel: str
    chat_id: str
    person: str | None
    title: str
    created_at: datetime | None
    messages: list[Message]

    @property
    def account(self) -> tuple[str, str, str, str | None]:
        """What makes a conversation the same one: a known external id must come with the same account."""
        return (self.platform, self.channel, self.chat_id, self.person)


def _parse_conversation_line(number: int, obj: dict[str, Any]) -> _ParsedConversation:
    check_keys(obj, where="line", required={"conversation"}, optional={"messages"})
    conv = obj["conversation"]
    if not isinstance(conv, dict):
        raise LineError("conversation must be an object")
    check_keys(conv, where="conversation", required={"external_id"}, optional=_CONVERSATION_KEYS)
    external_id = text_field(conv, "external_id", where="conversation", max_length=200, required=True)
    platform = text_field(conv, "platform", where="conversation", default=Platform.WEB)
    if platform not in Platform.values:
        raise LineError(f"conversation.platform must be one of {', '.join(Platform.values)}, got {platform!r}")
    raw_messages = obj.get("messages") or []
    if not isinstance(raw_messages, list):
        raise LineError("messages must be a list")
    messages = [
        _parse_message(index, raw, conversation_external_id=external_id) for index, raw in enumerate(raw_messages)
    ]
    return _ParsedConversation(
        line=number,
        external_id=external_id,
        platform=platform,
        channel=text_field(conv, "channel", where="conversation", default=platform, max_length=64),
        chat_id=text_field(conv, "chat_id", where="conversation", max_length=200),
        person=person_slug(conv.get("person"), where="conversation.person"),
        title=text_field(conv, "title", where="conversation", max_length=300),
        created_at=datetime_field(conv, "created_at", where="conversation"),
        messages=messages,
    )


def _parse_message(index: int, raw: Any, *, conversation_external_id: str) -> Message:
    where = f"messages[{index}]"
    if not isinstance(raw, dict):
        raise LineError(f"{where} must be an object")
    check_keys(raw, where=where, required={"role", "created_at"}, optional=_MESSAGE_KEYS)
    role = raw["role"]
    if role not in Role.values:
        raise LineError(f"{where}.role must be one of {', '.join(Role.values)}, got {role!r}")
    content = text_field(raw, "content", where=where)
    created_at = datetime_field(raw, "created_at", where=where)
    external_id = text_field(raw, "external_id", where=where, max_length=200) or _derived_message_id(
        conversation_external_id, role, raw["created_at"], content
    )
    return Message(
        role=role,
        name=text_field(raw, "name", where=where, max_length=128),
        content=content,
        tool_payload=json_field(raw, "tool_payload", where=where),
        external_id=external_id,
        created_at=created_at,
        fts_segmented=segment_text(content),
    )


def _derived_message_id(conversation_external_id: str, role: str, created_at: str, content: str) -> str:
    # Stable across re-imports of the same file, so a message without an id is still idempotent.
    digest = hashlib.sha1(f"{conversation_external_id}\0{role}\0{created_at}\0{content}".encode()).hexdigest()
    return f"sha1:{digest[:24]}"


def _message_fingerprint(role: str, content: str) -> str:
    """What must match for a known message id: its role and content (PostgreSQL's md5 of it, compared in SQL)."""
    return f"{role}:{hashlib.md5(content.encode()).hexdigest()}"


def conversations_import(
    *,
    lines: Iterable[str | bytes],
    progress: ProgressCallback | None = None,
    batch_lines: int = IMPORT_BATCH_LINES,
    allow_forgotten: bool = False,
) -> ImportReport:
    """Import conversations JSONL; idempotent (existing conversations and messages are kept as they are).

    A line that contradicts what is stored or an earlier line (a known conversation on another
    account or person, a known message id with other content) is a conflict: reported, nothing
    of it stored. A line about an erased person or account is skipped with a warning unless
    ``allow_forgotten``.
    """
    return jsonl_import(
        kind="conversations",
        lines=lines,
        parse=_parse_conversation_line,
        store=_store_conversations,
        batch_lines=batch_lines,
        lock=_IMPORT_LOCK,
        progress=progress,
        forgettable=_conversation_forgettable,
        allow_forgotten=allow_forgotten,
    )


def _conversation_forgettable(p: _ParsedConversation) -> list[tuple[str, str, str]]:
    held = [(PERSON, p.person, f"person {p.person}")] if p.person else []
    if p.chat_id:
        account = forgotten_account(channel=p.channel, external_id=p.chat_id)
        held.append((IDENTITY, account, f"account {p.channel}:{p.chat_id}"))
    return held


def _conversation_conflicts(parsed: list[_ParsedConversation], report: ImportReport) -> list[_ParsedConversation]:
    """The lines that agree with what is stored and with the lines before them; the others are reported."""
    external_ids = {p.external_id for p in parsed}
    accounts = {
        c.external_id: (c.platform, c.channel, c.chat_id, c.person.slug if c.person else None)
        for c in Conversation.objects.filter(external_id__in=external_ids).select_related("person")
    }
    messages = {
        (external_id, message_id): f"{role}:{digest}"
        for external_id, message_id, role, digest in Message.objects.filter(
            conversation__external_id__in=external_ids,
            external_id__in={m.external_id for p in parsed for m in p.messages},
        )
        .annotate(digest=MD5("content"))
        .values_list("conversation__external_id", "external_id", "role", "digest")
    }
    owners = {
        (identity.channel, identity.external_id): identity.person.slug
        for identity in Identity.objects.filter(
            channel__in={p.channel for p in parsed}, external_id__in={p.chat_id for p in parsed if p.chat_id}
        ).select_related("person")
    }
    accepted = []
    for p in parsed:
        problem = _conversation_problem(p, accounts=accounts, messages=messages, owners=owners)
        if problem:
            report.errors.append((p.line, f"conflict: {problem}; nothing of this line was stored"))
            continue
        accounts.setdefault(p.external_id, p.account)
        for m in p.messages:
            messages.setdefault((p.external_id, m.external_id), _message_fingerprint(m.role, m.content))
        if p.person and p.chat_id:
            owners.setdefault((p.channel, p.chat_id), p.person)
        accepted.append(p)
    return accepted


def _conversation_problem(
    p: _ParsedConversation,
    *,
    accounts: dict[str, tuple],
    messages: dict[tuple[str, str], str],
    owners: dict[tuple[str, str], str],
) -> str:
    known = accounts.get(p.external_id)
    if known is not None and known != p.account:
        fields = ("platform", "channel", "chat_id", "person")
        differs = ", ".join(
            f"{name} {old!r} ≠ {new!r}" for name, old, new in zip(fields, known, p.account, strict=True) if old != new
        )
        return f"conversation {p.external_id!r} is already stored with another account ({differs})"
    for index, m in enumerate(p.messages):
        stored = messages.get((p.external_id, m.external_id))
        if stored is not None and stored != _message_fingerprint(m.role, m.content):
            return f"messages[{index}].external_id {m.external_id!r} is already stored with other content"
    owner = owners.get((p.channel, p.chat_id)) if p.person and p.chat_id else None
    if owner is not None and owner != p.person:
        return f"{p.channel}:{p.chat_id} is mapped to {owner!r}, not {p.person!r}"
    return ""


def _store_conversations(parsed: list[_ParsedConversation], report: ImportReport) -> None:
    """Store one batch (the caller's transaction holds the import lock)."""
    parsed = _conversation_conflicts(parsed, report)
    if not parsed:
        return
    persons = persons_ensure(slugs=[p.person for p in parsed if p.person])
    now = timezone.now()
    new_conversations = [
        Conversation(
            external_id=p.external_id,
            platform=p.platform,
            channel=p.channel,
            chat_id=p.chat_id,
            person=persons.get(p.person) if p.person else None,
            title=p.title,
            created_at=p.created_at or (p.messages[0].created_at if p.messages else now),
            updated_at=max([m.created_at for m in p.messages], default=p.created_at or now),
        )
        for p in parsed
    ]
    external_ids = [p.external_id for p in parsed]
    existing = set(Conversation.objects.filter(external_id__in=external_ids).values_list("external_id", flat=True))
    Conversation.objects.bulk_create(new_conversations, ignore_conflicts=True)
    report.count("conversations", len(set(external_ids) - existing))
    by_external_id = {c.external_id: c for c in Conversation.objects.filter(external_id__in=external_ids)}
    identities = [
        Identity(channel=p.channel, external_id=p.chat_id, person=persons[p.person])
        for p in parsed
        if p.person and p.chat_id
    ]
    Identity.objects.bulk_create(identities, ignore_conflicts=True)

    messages: list[Message] = []
    for p in parsed:
        conversation = by_external_id[p.external_id]
        for message in p.messages:
            message.conversation = conversation
            messages.append(message)
    inserted = _copy_messages(messages)
    report.count("messages", len(inserted))
    if inserted:  # a message already stored was announced when it was stored
        messages_stored.send(sender=Message, messages=inserted)
    # A conversation's updated_at follows its newest message (light sleep and cleanup read it).
    newest = Message.objects.filter(conversation=OuterRef("pk")).order_by("-created_at").values("created_at")[:1]
    Conversation.objects.filter(pk__in=[c.pk for c in by_external_id.values()]).update(
        updated_at=Greatest("updated_at", Subquery(newest))
    )
    report.imported += len(parsed)


_STAGED_COLUMNS = (
    "conversation_id",
    "role",
    "name",
    "content",
    "tool_payload",
    "external_id",
    "created_at",
    "fts_segmented",
)


def _copy_messages(messages: list[Message]) -> list[Message]:
    """Insert messages through COPY into a staging table, skipping ones already stored; returns the new ones.

    Every imported message has an external id (given or derived), so ``(conversation, external_id)``
    names the row each inserted one became: it gets that row's ``pk``.

    COPY + INSERT … SELECT … ON CONFLICT is several times faster than the ORM's
    multi-row INSERT for large imports and still lets the unique index decide
    what is a duplicate. Runs inside the caller's transaction.
    """
    columns = ", ".join(_STAGED_COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS import_messages (conversation_id bigint, role text, name text,"
            " content text, tool_payload text, external_id text, created_at timestamptz, fts_segmented text)"
            " ON COMMIT DELETE ROWS"
        )
        with cursor.cursor.copy(f"COPY import_messages ({columns}) FROM STDIN") as copy:
            for m in messages:
                payload = None if m.tool_payload is None else json.dumps(m.tool_payload, ensure_ascii=False)
                copy.write_row(
                    (
                        m.conversation_id,
                        m.role,
                        m.name,
                        m.content,
                        payload,
                        m.external_id,
                        m.created_at,
                        m.fts_segmented,
                    )
                )
        cursor.execute(
            f"INSERT INTO messages ({columns}) SELECT conversation_id, role, name, content, tool_payload::jsonb,"
            " external_id, created_at, fts_segmented FROM import_messages ON CONFLICT DO NOTHING"
            " RETURNING id, conversation_id, external_id"
        )
        returned = cursor.fetchall()
        cursor.execute("TRUNCATE import_messages")
    by_key = {}
    for m in messages:
        by_key.setdefault((m.conversation_id, m.external_id), m)
    inserted = []
    for pk, conversation_id, external_id in returned:
        message = by_key[(conversation_id, external_id)]
        message.pk = pk
        inserted.append(message)
    return inserted


# --- Identity resolution and history (person-memory.md) ------------------------------------------


def identity_map(*, channel: str, external_id: str, person_slug: str, display_name: str = "") -> Identity:
    """Map ``channel:external_id`` to a person (created on first sight); re-mapping moves the account.

    A given ``display_name`` also renames an existing person.
    """
    with transaction.atomic():
        person = person_ensure(slug=person_slug, display_name=display_name)
        identity, _ = Identity.objects.update_or_create(
            channel=channel, external_id=external_id, defaults={"person": person}
        )
    return identity


def history_append(
    *,
    content: str,
    timestamp: datetime | None = None,
    channel: str = "",
    person: Person | None = None,
    conversation: Conversation | None = None,
    session_key: str = "",
) -> HistoryEntry:
    """Append one timeline entry (global when ``person`` is None); entries are never changed afterwards.

    ``session_key``: an imported record's, as its file wrote it (written back whole on export).
    """
    entry = HistoryEntry(
        content=text_bounded(content, field="content"),
        timestamp=timestamp or timezone.now(),
        channel=channel,
        session_key=text_bounded(session_key, field="session_key", limit=255),
        person=person,
        conversation=conversation,
    )
    entry.save()
    return entry


# --- Token scopes (who is asking; read by conversations.access) ---------------------------------


def token_scope_validate(*, user, scope: str, persons: list[Person], conversations: list[Conversation]) -> None:
    """Raise AnimaError naming the field when this scope cannot be given to ``user``."""
    if user.is_staff:
        raise AnimaError(
            f"{user.get_username()} is staff: its token is operator (everything); remove staff status to scope it",
            field="user",
        )
    if scope not in ScopeKind.values:
        raise AnimaError(f"scope must be one of {', '.join(ScopeKind.values)}, got {scope!r}", field="scope")
    if scope == ScopeKind.PERSON and (len(persons) != 1 or conversations):
        raise AnimaError("a person scope names exactly one person and no conversation", field="persons")
    if scope == ScopeKind.AGENT and not (persons or conversations):
        raise AnimaError("an agent scope is bound to at least one person or conversation", field="persons")


def token_scope_set(*, user, scope: str, persons: list[Person], conversations: list[Conversation]) -> TokenScope:
    """Give ``user``'s token ``scope``, bound to ``persons`` and ``conversations`` (replacing any earlier scope)."""
    token_scope_validate(user=user, scope=scope, persons=persons, conversations=conversations)
    with transaction.atomic():
        row, _ = TokenScope.objects.update_or_create(user=user, defaults={"scope": scope, "updated_at": timezone.now()})
        row.persons.set(persons)
        row.conversations.set(conversations)
    return row


def scoped_token_ensure(
    *, username: str, scope: str, persons: list[Person], conversations: list[Conversation]
) -> tuple[Any, str | None]:
    """The non-staff user ``username`` (made when missing, with no password: it signs in by token only) given
    ``scope``, and the key of its API token when made now (None: it had one, which keeps working).

    Raises AnimaError naming the field, leaving nothing behind, when the scope cannot be given.
    """
    with transaction.atomic():
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            user = get_user_model().objects.create_user(username=username)
        token_scope_set(user=user, scope=scope, persons=persons, conversations=conversations)
        token, made = Token.objects.get_or_create(user=user)
    return user, token.key if made else None


def token_scope_clear(*, user) -> bool:
    """Take ``user``'s scope away (its token has no rights again); False when it had none."""
    deleted, _ = TokenScope.objects.filter(user=user).delete()
    return bool(deleted)
