"""Recall through subjects: a question that refers to one of the asking person's subjects only by a relation word
or another of its names ("how is my daughter doing?", 「我闺女最近怎么样？」, "what did Lily say") reaches that
subject's profile, its facts and the latest lines naming it, although it never says what they say.

The relation words are the slot grammar's (``anima.core.relations``), in both languages, so a question in
Chinese finds a daughter the facts call "daughter", and 「闺女」 finds the one they call 「女儿」. Only the asking
person's subjects are read, and only the ones something active still speaks of: a subject whose facts were all
forgotten is no one's until the next night removes it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from django.db.models import Exists, OuterRef, Q, QuerySet

from anima.core.attributes import NOTHING_ASKED, Asked, attributes_asked
from anima.core.errors import AnimaError
from anima.core.models import MemoryStatus
from anima.core.relations import (
    EN_KINDS,
    EN_RELATIONS,
    ZH_KINDS,
    ZH_RELATIONS,
    relation_covers,
    relation_en_read,
    relation_word_read,
    relation_words,
)
from anima.core.search_query import text_as_asker, text_without_names
from anima.core.segmentation import text_simplified, text_traditional_forms
from conversations.models import Conversation, Message, Person, Role
from conversations.selectors import conversations_resolving_to
from memory.models import SemanticMemory, Subject, SubjectKind, SubjectMention
from memory.search import (
    KEYWORD_BRANCHES,
    Hit,
    QuerySyntaxError,
    entity_source,
    hit_order,
    hybrid_search,
    search_query_build,
    search_text_plain,
)
from memory.selectors import SEMANTIC, SESSION, person_own_names
from memory.subjects import ENTITY_BRANCH
from memory.subjects.selectors import subject_facts, subject_get, subject_profile, subject_stated, subjects_of_person

# A subject the question names is what it asks about: its profile counts as likely relevant as a strong direct
# hit, and each next item of the subject (its facts, the best match for the question first, then the latest
# lines naming it) a step below, so a direct hit that answers better still comes first.
ENTITY_PRIOR = 0.8
ENTITY_STEP = 0.9
SUBJECT_FACTS = 10
RECENT_MENTIONS = 3

# Words that name a relation only when the asker says it is theirs ("my girl", 「我妈」): alone, anyone's.
_OWNED_ONLY = frozenset(
    "girl boy kid kids child children bird fish horse snake lizard partner bro sis bf gf".split()
    + "parent parents grandparent grandparents folks".split()  # "as a parent", "hey folks"
    + "妈 爸 先生 对象 孩子 小孩 宝宝 猫 狗".split()
)
_EN_OWNER = re.compile(r"\b(?:my|our)\s+(?:[a-z]+\s+)?$", re.I)  # "my girl", "my little girl"
# 「我家小狗」, 「我的那只猫」: a demonstrative with its measure word, or 小 / 大, may stand between.
_ZH_OWNER = re.compile(r"(?:我|咱|俺)(?:们)?(?:的|家的?)?(?:[那这][只条个])?[小大]?$")
_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")
# A question may also ask for a kind of relation ("my pets", 「我父母」).
_EN_ASKED = {**EN_RELATIONS, **EN_KINDS}
_ZH_ASKED = {**ZH_RELATIONS, **ZH_KINDS}
_ZH_ASKED_LONGEST_FIRST = tuple(sorted(_ZH_ASKED, key=len, reverse=True))


def _en_relation(word: str, *, table: dict[str, str] = EN_RELATIONS) -> str | None:
    return relation_en_read(re.sub(r"['’]s$", "", word.casefold()), table=table)  # "my daughter's teacher"


def relations_asked(text: str) -> set[str]:
    """The relations or kinds of relation ``text`` names as the asker's own: "daughter" for "how is my girl?" or
    「我闺女呢」, "pet" for "what pets do I have?"; in traditional characters too (「我的寵物」)."""
    text = text_simplified(text)
    found: set[str] = set()
    for match in _LATIN_WORD.finditer(text):
        relation = _en_relation(match.group(0), table=_EN_ASKED)
        if relation and (match.group(0).casefold() not in _OWNED_ONLY or _EN_OWNER.search(text[: match.start()])):
            found.add(relation)
    taken = [False] * len(text)
    for word in _ZH_ASKED_LONGEST_FIRST:  # longest first: 「外孙女」 is not 「孙女」, 「爸妈」 not 「妈」
        for match in re.finditer(re.escape(word), text):
            if any(taken[match.start() : match.end()]):
                continue
            taken[match.start() : match.end()] = [True] * len(word)
            if word not in _OWNED_ONLY or _ZH_OWNER.search(text[: match.start()]):
                found.add(_ZH_ASKED[word])
    return found


def _named(name: str, text: str) -> bool:
    """``name`` in ``text``, both read in simplified characters by the caller (``text_simplified``, once for all its
    names and texts: 「曉雨」 names 「晓雨」): a Latin name as a whole word, case-insensitively; a Chinese one of two
    or more characters anywhere."""
    if len(name) < 2:
        return False
    if name.isascii():
        return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text, re.I) is not None
    return name in text


def _names_read(subject: Subject) -> set[str]:
    """The subject's name and aliases in simplified characters (as ``_named`` reads them), but relation words."""
    names = {text_simplified(alias) for alias in (subject.name, *subject.aliases) if alias}
    return {name for name in names if not _is_relation_word(name)}


def subjects_served(*, person: Person) -> QuerySet[Subject]:
    """``person``'s subjects that an active profile or fact still speaks of (``subjects_of_person``'s order)."""
    active_mention = SubjectMention.objects.filter(subject=OuterRef("pk"), memory__status=MemoryStatus.ACTIVE)
    return subjects_of_person(person=person).filter(Q(profile__status=MemoryStatus.ACTIVE) | Exists(active_mention))


def subject_served(*, person: Person, key: str) -> Subject | None:
    """One of ``person``'s served subjects by key, relation, name or alias (``subject_get``), else None."""
    subject = subject_get(person=person, key=key)
    relation = relation_word_read(key.strip())
    if subject is None and relation:  # 「闺女」 asks for the daughter the facts call 「女儿」
        subject = subject_get(person=person, key=relation)
    if subject is None or not subjects_served(person=person).filter(pk=subject.pk).exists():
        return None
    return subject


def subjects_mentioned(*, person: Person, text: str) -> list[Subject]:
    """The subjects of ``person`` that ``text`` refers to, by a name or alias or by a relation word in either
    language; never the person themself (every recall of theirs is about them)."""
    if not text.strip():
        return []
    relations = relations_asked(text)
    text = text_simplified(text)
    mentioned = []
    for subject in subjects_served(person=person).exclude(kind=SubjectKind.SELF):
        names = _names_read(subject)
        by_relation = any(relation_covers(asked, subject.relation) for asked in relations if subject.relation)
        if by_relation or any(_named(name, text) for name in names):
            mentioned.append(subject)
    return mentioned


def _is_relation_word(word: str) -> bool:
    return word in ZH_RELATIONS or _en_relation(word) is not None


def subject_recent_mentions(
    *,
    subject: Subject,
    limit: int = RECENT_MENTIONS,
    since: datetime | None = None,
    until: datetime | None = None,
    channel: str | None = None,
) -> QuerySet[Message]:
    """The latest lines of the subject's person's conversations that name it (by name or alias, not by a relation
    word every other line has), newest first."""
    names = {name for name in _names_read(subject) if len(name) >= 2}
    if not names:
        return Message.objects.none()
    naming = Q()
    # A line writes the name in either script, and traditional in a region's own forms: 「晓东」 or 「曉東」, 「为民」,
    # 「爲民」 or 「為民」.
    for form in {form for name in names for form in (name, *text_traditional_forms(name))}:
        naming |= Q(content__icontains=form)
    lines = Message.objects.filter(
        naming, conversation__in=_conversations(subject.person), role__in=[Role.USER, Role.ASSISTANT]
    ).exclude(conversation__platform="cron")
    if channel:
        lines = lines.filter(conversation__channel=channel)
    if since is not None:
        lines = lines.filter(created_at__gte=since)
    if until is not None:
        lines = lines.filter(created_at__lt=until)
    # icontains also finds "Lily" in "Lilyana": keep the lines that name it as a word.
    newest = lines.order_by("-created_at", "-pk")[: limit * 4]
    read = {m.pk: text_simplified(m.content) for m in newest}
    found = [pk for pk, content in read.items() if any(_named(name, content) for name in names)]
    return Message.objects.filter(pk__in=found[:limit]).order_by("-created_at", "-pk")


def _conversations(person: Person) -> QuerySet[Conversation]:
    return Conversation.objects.filter(conversations_resolving_to(person=person))


def subject_items(
    *,
    subject: Subject,
    hits: Sequence[Hit],
    memory_types: Sequence[str],
    query: str = "",
    asked: Asked = NOTHING_ASKED,
    since: datetime | None = None,
    until: datetime | None = None,
    channel: str | None = None,
) -> list[tuple[str, int]]:
    """(source, id) of what recall gives for ``subject``: its profile, then its facts (those stating an attribute
    the query ``asked`` first, then those a word the ``query`` asks of it finds, then in the order of the query's own
    ``hits``, then the newest), then the latest lines naming it (of ``channel``'s conversations, when given); of
    ``memory_types`` only."""
    items: list[tuple[str, int]] = []
    if SEMANTIC in memory_types:
        profile = subject_profile(subject=subject)
        if profile is not None and _within(profile.created_at, since, until):
            items.append((SEMANTIC, profile.pk))
        facts = [m for m in subject_facts(subject=subject) if _within(m.created_at, since, until)]
        items += [(SEMANTIC, m.pk) for m in _facts_ordered(subject, facts, hits=hits, query=query, asked=asked)]
    if SESSION in memory_types:
        lines = subject_recent_mentions(subject=subject, since=since, until=until, channel=channel)
        items += [(SESSION, pk) for pk in lines.values_list("pk", flat=True)]
    return items


def _facts_ordered(
    subject: Subject, facts: list[SemanticMemory], *, hits: Sequence[Hit], query: str, asked: Asked
) -> list[SemanticMemory]:
    """The first SUBJECT_FACTS of ``facts``: those stating what was ``asked`` ("how old is she?": her age), then
    those a word of the question finds (its words but those naming the subject), then recall's own order
    (calibrated score, the fused z, the best rank), then the newest."""
    stated = subject_stated(subject=subject) if asked.attributes else {}
    worded = _asked_about(subject=subject, facts=[m.pk for m in facts], query=query)
    found = {hit.id: position for position, hit in enumerate(hits) if hit.source == SEMANTIC}
    return sorted(
        facts,
        key=lambda m: (
            not asked.covers(stated.get(m.pk, "")),
            worded.get(m.pk, len(worded)),
            found.get(m.pk, len(found)),
            -m.created_at.timestamp(),
            -m.pk,
        ),
    )[:SUBJECT_FACTS]


def _self_items(
    *,
    person: Person,
    hits: Sequence[Hit],
    asked: Asked,
    memory_types: Sequence[str],
    since: datetime | None,
    until: datetime | None,
) -> list[tuple[str, int]]:
    """(source, id) of the person's own facts stating what they ``asked`` of themself ("where do I live?"): not
    their profile nor their lines, which every recall of theirs is about."""
    subject = subjects_served(person=person).filter(kind=SubjectKind.SELF).first()
    if subject is None or SEMANTIC not in memory_types:
        return []
    stated = subject_stated(subject=subject)
    facts = [
        m
        for m in subject_facts(subject=subject)
        if asked.covers(stated.get(m.pk, "")) and _within(m.created_at, since, until)
    ]
    return [(SEMANTIC, m.pk) for m in _facts_ordered(subject, facts, hits=hits, query="", asked=NOTHING_ASKED)]


def _asked_about(*, subject: Subject, facts: Sequence[int], query: str) -> dict[int, int]:
    """Rank of each of ``facts`` that a word of ``query`` other than the subject's names and relation words matches
    (keyword branches): "小雨怕什么" asks 「怕」 of 小雨, whom every one of her facts names or calls 「女儿」."""
    words = {subject.name, *subject.aliases, *relation_words(subject.relation)}
    rest = text_without_names(query, names=[word for word in words if len(word) >= 2])
    if not facts or not rest.strip() or rest.strip() == query.strip():
        return {}
    ids = ",".join(str(int(pk)) for pk in facts)
    where = f"t.id = ANY(ARRAY[{ids}]::bigint[])"  # ids read from the database: integers, no user input
    source = entity_source(name=SEMANTIC, where_sql=where, person_id=subject.person_id, since=None, until=None)
    try:
        hits = hybrid_search(
            query=search_query_build(text=search_text_plain(rest)),
            sources=[source],
            limit=len(facts),
            branches=KEYWORD_BRANCHES,
        )
    except QuerySyntaxError:
        return {}
    return {hit.id: position for position, hit in enumerate(hits)}


def _within(moment: datetime, since: datetime | None, until: datetime | None) -> bool:
    return (since is None or moment >= since) and (until is None or moment < until)


def entity_fuse(*, hits: Sequence[Hit], items: Sequence[Sequence[tuple[str, int]]], only: bool = False) -> list[Hit]:
    """``hits`` with each subject's ``items`` fused in: an item at position p scores at least
    ENTITY_PRIOR × ENTITY_STEP^p and carries the ``entity`` branch at rank p + 1. ``only``: just the items, in
    their order (a recall asking about one subject)."""
    by_key = {(hit.source, hit.id): hit for hit in hits}
    brought: dict[tuple[str, int], int] = {}
    for subject_items_ in items:
        for position, key in enumerate(subject_items_):
            hit = by_key.get(key) or by_key.setdefault(key, Hit(source=key[0], id=key[1]))
            boost = ENTITY_PRIOR * ENTITY_STEP**position
            hit.ranks[ENTITY_BRANCH] = min(hit.ranks.get(ENTITY_BRANCH, position + 1), position + 1)
            hit.scores[ENTITY_BRANCH] = max(hit.scores.get(ENTITY_BRANCH, 0.0), boost)
            hit.score = max(hit.score, boost)
            brought[key] = min(brought.get(key, position), position)
    if only:
        return sorted((by_key[key] for key in brought), key=lambda hit: (brought[(hit.source, hit.id)], hit_order(hit)))
    return sorted(by_key.values(), key=hit_order)


class UnknownSubject(AnimaError):
    default_field = "entity"


def entity_expand(
    *,
    hits: list[Hit],
    person: Person | None,
    query: str,
    entity: str | None,
    expand: bool,
    memory_types: Sequence[str],
    since: datetime | None,
    until: datetime | None,
    channel: str | None = None,
) -> list[Hit]:
    """Recall's hits with the subjects of ``person`` the ``query`` names fused in (``expand``); or, asked about
    one ``entity`` (a key, relation, name or alias), only that subject's items. A question naming no subject,
    or no person to ask for, keeps its hits as they are."""
    bounds = {"memory_types": memory_types, "since": since, "until": until, "channel": channel}
    if entity:
        subject = subject_served(person=person, key=entity) if person is not None else None
        if subject is None:
            # The same answer whether nobody or someone else has it: a name reveals nothing.
            raise UnknownSubject(f"no subject {entity!r} among the memories of the person asked about")
        items = subject_items(subject=subject, hits=hits, query=query, asked=attributes_asked(query), **bounds)
        return entity_fuse(hits=hits, items=[items], only=True)
    if not expand or person is None:
        return hits
    # In the person's own recall their name is the asker: "What is Maya's job?" asks what "What is my job?" does.
    as_asker = text_as_asker(query, names=person_own_names(person=person))
    asked = attributes_asked(as_asker)
    subjects = subjects_mentioned(person=person, text=as_asker)
    items = [subject_items(subject=subject, hits=hits, query=query, asked=asked, **bounds) for subject in subjects]
    if not subjects and asked.of_self and not relations_asked(as_asker):
        items.append(
            _self_items(person=person, hits=hits, asked=asked, memory_types=memory_types, since=since, until=until)
        )
    if not any(items):
        return hits
    return entity_fuse(hits=hits, items=items)
