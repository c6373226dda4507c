"""Reads over conversations, people and the history timeline."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import date, datetime

from django.conf import settings
from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db.models import Exists, F, FloatField, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Coalesce, NullIf

from anima.core.calendar import moment_bound
from anima.core.models import FTS_CONFIG
from anima.core.search_query import search_query_build
from anima.core.segmentation import text_simplified
from anima.core.text import is_chinese, without_addresses
from conversations.models import Conversation, HistoryEntry, Identity, Language, Message, Person, Platform, Role

HISTORY_MAX_LIMIT = 200
# How many of a conversation's latest messages tell its language.
LANGUAGE_SAMPLE_MESSAGES = 20
# Messages read to find the language most of the companion's conversations are held in.
COMPANION_SAMPLE_MESSAGES = 500
_WORD_RE = re.compile(r"\w+")


def history_search(
    *,
    text: str = "",
    since: date | datetime | None = None,
    until: date | datetime | None = None,
    channel: str | None = None,
    person: Person | None = None,
    global_only: bool = False,
    with_global: bool = False,
    private: bool = False,
    limit: int | None = None,
) -> QuerySet[HistoryEntry]:
    """Timeline entries filtered by text, time range (inclusive), channel and person.

    Text is read by the query language of memory recall (``anima.core.search_query``): words
    are OR-ed, ``AND`` / ``OR`` / ``NOT`` and ``"quoted phrases"`` are honoured, and a
    malformed query raises QuerySyntaxError. It matches the segmented full-text index
    (ranked) or, for plain words, also a substring of the entry; text without a word
    character is no filter, and without text entries come oldest first. ``person`` gives
    that person's timeline (with the global one too when ``with_global``), ``global_only`` the
    global one (person-less), neither gives every timeline. ``private`` (what a person or an agent
    sees, not an operator) leaves out global entries archived from a conversation of someone else than
    ``person``: the global timeline keeps every consolidation, so it also holds people's own digests.
    """
    entries = HistoryEntry.objects.select_related("person")
    if since is not None:
        entries = entries.filter(timestamp__gte=moment_bound(since))
    if isinstance(until, datetime):
        entries = entries.filter(timestamp__lte=until)
    elif until is not None:
        entries = entries.filter(timestamp__lt=moment_bound(until, end_of_day=True))
    if channel:
        entries = entries.filter(channel=channel)
    if person is not None:
        entries = (
            entries.filter(Q(person=person) | Q(person__isnull=True)) if with_global else entries.filter(person=person)
        )
    elif global_only:
        entries = entries.filter(person__isnull=True)
    if private:
        # A global entry is someone's when the same consolidation also wrote it to a person's timeline, or the same
        # import copied it there (a record of their session).
        someones = HistoryEntry.objects.filter(
            conversation=OuterRef("conversation"), timestamp=OuterRef("timestamp"), person__isnull=False
        )
        copied = HistoryEntry.objects.filter(
            session_key=OuterRef("session_key"), timestamp=OuterRef("timestamp"), person__isnull=False
        ).exclude(session_key="")
        if person is not None:
            someones, copied = someones.exclude(person=person), copied.exclude(person=person)
        entries = entries.exclude(Q(person__isnull=True) & (Exists(someones) | Exists(copied)))
    text = (text or "").strip()
    query = search_query_build(text=text) if _WORD_RE.search(text) else None
    if query is None:
        entries = entries.order_by("timestamp", "id")
    elif query.explicit and not query.tsquery:
        # Operators or quotes around nothing searchable (e.g. a quoted stopword): nothing matches.
        entries = entries.none()
    else:
        # Explicit syntax is for full-text search alone: a substring cannot honour NOT or a phrase.
        matches = Q() if query.explicit else Q(content__icontains=text)
        rank = Value(0.0, output_field=FloatField())
        if query.tsquery:
            tsquery = SearchQuery(query.tsquery, config=FTS_CONFIG, search_type="raw")
            matches |= Q(search_fts=tsquery)
            rank = SearchRank(F("search_fts"), tsquery)
        entries = entries.filter(matches).annotate(rank=rank).order_by("-rank", "-timestamp", "-id")
    if limit is not None:
        entries = entries[: max(1, min(limit, HISTORY_MAX_LIMIT))]
    return entries


def persons_with_identities() -> QuerySet[Person]:
    return Person.objects.prefetch_related("identities").order_by("slug")


def message_latest_user(*, conversation: Conversation) -> Message | None:
    """The conversation's latest user message (the current turn's): newest first, ties by id."""
    return Message.objects.filter(conversation=conversation, role=Role.USER).order_by("-created_at", "-id").first()


def messages_latest(*, conversation: Conversation, count: int) -> list[Message]:
    """The conversation's ``count`` latest user and assistant messages with text, oldest first (ties by id)."""
    if count <= 0:
        return []
    rows = (
        Message.objects.filter(conversation=conversation, role__in=(Role.USER, Role.ASSISTANT))
        .exclude(content="")
        .order_by("-created_at", "-id")[:count]
    )
    return list(reversed(rows))


def identity_resolve(*, channel: str, external_id: str) -> Person | None:
    """The person a channel account belongs to, or None when it is not mapped."""
    identity = Identity.objects.select_related("person").filter(channel=channel, external_id=external_id).first()
    return identity.person if identity else None


def conversation_person(*, conversation: Conversation) -> Person | None:
    """The person behind the conversation: its own person, else the identity its channel account resolves to."""
    if conversation.person_id:
        return conversation.person
    if conversation.chat_id:
        return identity_resolve(channel=conversation.channel_name, external_id=conversation.chat_id)
    return None


def conversations_of_persons(*, person_ids: Iterable[int]) -> Q:
    """Conversations whose person (as ``conversation_person`` resolves it) is one of ``person_ids``."""
    ids = list(person_ids)
    mapped = Identity.objects.filter(
        person_id__in=ids,
        channel=Coalesce(NullIf(OuterRef("channel"), Value("")), OuterRef("platform")),
        external_id=OuterRef("chat_id"),
    )
    return Q(person_id__in=ids) | (Q(person__isnull=True) & Exists(mapped))


def conversations_resolving_to(*, person: Person | None) -> Q:
    """Conversations whose person (as ``conversation_person`` resolves it) is ``person``; None: nobody known."""
    if person is not None:
        return conversations_of_persons(person_ids=[person.pk])
    mapped = Identity.objects.filter(
        channel=Coalesce(NullIf(OuterRef("channel"), Value("")), OuterRef("platform")), external_id=OuterRef("chat_id")
    )
    return Q(person__isnull=True) & (Q(chat_id="") | ~Exists(mapped))


def conversations_persons(*, conversation_ids: Iterable[int]) -> dict[int, int | None]:
    """Person id (as ``conversation_person`` resolves it) of each conversation, None when unknown."""
    rows = Conversation.objects.filter(pk__in=list(conversation_ids)).values_list(
        "pk", "person_id", "channel", "platform", "chat_id"
    )
    owners: dict[int, int | None] = {}
    accounts: dict[tuple[str, str], list[int]] = {}
    for pk, person_id, channel, platform, chat_id in rows:
        owners[pk] = person_id
        if person_id is None and chat_id:
            accounts.setdefault((channel or platform, chat_id), []).append(pk)
    if accounts:
        wanted = Q()
        for channel, chat_id in accounts:
            wanted |= Q(channel=channel, external_id=chat_id)
        for channel, chat_id, person_id in Identity.objects.filter(wanted).values_list(
            "channel", "external_id", "person_id"
        ):
            for pk in accounts.get((channel, chat_id), []):
                owners[pk] = person_id
    return owners


def _language_of(texts: Iterable[str]) -> str | None:
    """ "zh" or "en" by the majority script of ``texts`` (``is_chinese``), None when they hold no letter."""
    text = without_addresses("\n".join(texts))
    if not any(char.isalpha() for char in text):
        return None
    return Language.ZH if is_chinese(text) else Language.EN


def companion_language() -> str:
    """The companion's own language: ANIMA_COMPANION_LANGUAGE, else the majority of its recent dialogue ("en" when
    there is none). Its own calls speak it, and a prompt falls back to it."""
    if settings.ANIMA_COMPANION_LANGUAGE != "auto":
        return settings.ANIMA_COMPANION_LANGUAGE
    recent = (
        Message.objects.filter(role__in=(Role.USER, Role.ASSISTANT))
        .exclude(conversation__platform__in=(Platform.CRON, Platform.DEBUG))
        .order_by("-id")
        .values_list("content", flat=True)[:COMPANION_SAMPLE_MESSAGES]
    )
    votes = [language for text in recent if (language := _language_of([text])) is not None]
    return Language.ZH if votes and votes.count(Language.ZH) * 2 >= len(votes) else Language.EN


def languages_in_use(*, since: datetime) -> list[str]:
    """The companion's language first, then the other languages conversations with user messages since ``since``
    are held in (``conversation_language``): what the self layer is kept in."""
    languages = [companion_language()]
    active = (
        Conversation.objects.filter(messages__role=Role.USER, messages__created_at__gte=since)
        .exclude(platform__in=(Platform.CRON, Platform.DEBUG))
        .select_related("person")
        .distinct()
    )
    for conversation in active.iterator():
        language = conversation_language(conversation=conversation)
        if language not in languages:
            languages.append(language)
            if len(languages) == len(Language.values):
                break
    return languages


def _user_texts_latest(conversation: Conversation) -> list[str]:
    """The conversation's latest user messages, newest first: what tells its language and its characters."""
    return list(
        Message.objects.filter(conversation=conversation, role=Role.USER)
        .order_by("-created_at", "-id")
        .values_list("content", flat=True)[:LANGUAGE_SAMPLE_MESSAGES]
    )


def conversation_script(*, conversation: Conversation, pending: str = "") -> str:
    """What a Chinese prompt's framing is written like (``text_in_script_of``'s ``like``): the conversation's latest
    user messages in traditional characters when most of those in Chinese are (「我的貓」), else "" (simplified).

    A conversation with none yet follows ``pending``. Memories keep the characters they were written in; only what
    Anima writes around them (headings, instructions) follows the conversation, as its language does.
    """
    texts = _user_texts_latest(conversation) or [pending]
    chinese = [text for text in texts if _language_of([text]) == Language.ZH]
    traditional = [text for text in chinese if text_simplified(text) != text]
    return "\n".join(traditional) if traditional and len(traditional) * 2 > len(chinese) else ""


def conversation_language(*, conversation: Conversation, pending: str = "") -> str:
    """ "zh" or "en": the one language a conversation's prompts are framed in (headings, instructions).

    Its person's setting, if they have one; else the majority of its latest user messages; a conversation with none
    yet is held in the language of ``pending`` (the message of the turn being prepared, not stored yet), else its
    person's (their other conversations), else its title's, else the companion's.
    """
    person = conversation_person(conversation=conversation)
    if person is not None and person.language:
        return person.language
    found = _language_of(_user_texts_latest(conversation) or [pending])
    if found is None and person is not None:
        theirs = (
            Message.objects.filter(
                conversation__in=Conversation.objects.filter(conversations_of_persons(person_ids=[person.pk])),
                role=Role.USER,
            )
            .order_by("-created_at", "-id")
            .values_list("content", flat=True)[:LANGUAGE_SAMPLE_MESSAGES]
        )
        found = _language_of(theirs)
    return found or _language_of([conversation.title]) or companion_language()
