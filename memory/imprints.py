"""Emotional imprints (情感印记): a strong feeling about one matter that recurs across conversations.

An anchor is one conversation's moment of feeling (light sleep writes it); an imprint is what several of
one person's anchors share. The rule, over the 30 days up to the slept day:

- only anchors attributed to a person (``Entity.person``, set from ``conversation_person`` when light sleep
  wrote them); a person-less anchor could be anyone's, and two people's anchors are never compared;
- only strong ones: intensity ≥ ``MIN_INTENSITY`` (0.5, the middle of the scale; a dream needs one above it);
- the same feeling: the same valence sign (an anchor of valence 0 has none and never recurs as a feeling);
- about the same matter: its *matter words*, the content words of what it is about (its ``source_segment``,
  the passage of the dialogue, else its own text), segmented by jieba in both languages (a Chinese compound
  also stands for the dictionary words inside it, as search segmentation reads it), without function, time
  and filler words, the person's own names, and words that name a feeling (the feeling is compared by its
  sign, so "anxious" about rent and "anxious" about an exam are two matters);
- recurring: a matter word of such anchors on at least ``MIN_DAYS`` (3) distinct days. The anchors holding a
  recurring word are one group; two recurring words held by one anchor join their groups.

Each group becomes one imprint: a limbic block (append-only like every limbic block) with ``memory_type``
imprint, under the diary entry of its last day, with its anchors' ids, days, the intensity-weighted valence
and arousal, the mean and peak intensity and the recurring words. Its text is first person, in the language
of its strongest anchor, made of that anchor's own words (no model is asked).

A re-run writes nothing new: a group whose anchors all belong to one of the person's imprints is already
imprinted. A group that grew (a fourth day) is written again as a new imprint naming the ones it replaces in
``body.supersedes`` and keeping their anchors (also those now older than the 30 days); readers show the
imprints no other imprint supersedes.

Why not the dense embeddings: with the bundled multilingual-e5-small, one person's anchors about one matter
and about others scored alike (``bench/imprint_similarity.py``, six passages per language: English same matter
0.872-0.906, other matters 0.842-0.901; Chinese 0.939-0.960 against 0.893-0.947), so no cosine tells one matter
from another; shared matter words told all 30 pairs apart.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from django.db import transaction

from anima.core.models import BlockTag, MemoryType
from anima.core.segmentation import text_in_script_of, text_simplified, word_parts, word_tags
from anima.core.text import KEYWORD_STOPWORDS, is_chinese
from conversations.models import Conversation, Language, Person
from conversations.selectors import conversation_person
from memory.models import LimbicBlock
from memory.mood import anchor_figures
from memory.services import diary_block_create, diary_entries_ensure
from memory.tendency import weighted_mean

WINDOW_DAYS = 30
MIN_INTENSITY = 0.5
MIN_DAYS = 3
# The prompt shows the person's latest few imprints: each is one line, the rest stay recallable.
PROMPT_LIMIT = 3
EXTERNAL_ID_PREFIX = "imprint:"
_DIGITS = 4

# jieba's tags of words that never name a matter: time words, numerals, measure words, pronouns, adverbs,
# prepositions, conjunctions, particles, modal and onomatopoeic words, adjectives and status words (how a
# thing is, as in 「压力好大」, is the feeling's side), punctuation, locality and place words (上面, 家里).
_NOT_MATTER_TAGS = ("t", "m", "q", "r", "d", "p", "c", "u", "y", "e", "o", "a", "z", "x", "f", "s")
# English has no tags from jieba: words of time and manner that recur whatever the matter.
_EN_NOT_MATTER = frozenset(
    "still keep keeps kept next last week weeks month months year years day days hour hours first lot stop "
    "can't cant won't wont let lets want wants wanted need needs needed try trying tried make makes made "
    "say tell told ask asked know knew think thought right left back even yet already honestly literally "
    "basically seriously totally absolutely pretty kinda sorta guess mean means stuff anyway though everything "
    "everyone someone somebody people".split()
)
# Words naming a feeling (and the light-sleep anchors' own phrasing of one): the feeling is its valence.
_FEELING_WORDS = frozenset(
    """
    anxious anxiety worried worry worrying worries nervous stressed stress stressful scared afraid fear fearful
    frightened terrified panic panicking dread sad sadness upset unhappy depressed lonely miserable hurt
    heartbroken cry crying angry anger mad furious annoyed frustrated frustrating tired exhausted overwhelmed
    guilty ashamed embarrassed disappointed jealous hopeless hopeful happy happiness glad joy joyful excited
    exciting thrilled proud relieved relief calm grateful thankful delighted content concern concerned
    tender alongside genuinely mood feeling feelings emotion emotions sleep
    担心 担忧 焦虑 紧张 害怕 恐惧 不安 慌 发慌 难过 伤心 难受 痛苦 委屈 孤独 寂寞 失望 沮丧 郁闷 烦 烦躁 烦恼
    生气 愤怒 恼火 累 疲惫 心累 压力 崩溃 开心 高兴 快乐 兴奋 激动 感动 欣慰 轻松 放松 如释重负 骄傲 自豪
    满足 感激 感到 感受 心疼 牵挂 由衷 心情 情绪 睡不着 睡不好 失眠
    """.split()
)


@dataclass(frozen=True)
class Moment:
    """An anchor as the rule reads it."""

    id: int
    day: date
    person_id: int
    valence: float
    arousal: float
    intensity: float
    content: str
    matter: str
    semantic_memory_ids: tuple[int, ...] = ()
    conversation_id: int | None = None


@dataclass(frozen=True)
class ImprintGroup:
    """Anchors of one person about one recurring matter, oldest first, and the words that recur."""

    moments: tuple[Moment, ...]
    words: tuple[str, ...]

    @property
    def anchor_ids(self) -> list[int]:
        return sorted(m.id for m in self.moments)

    @property
    def days(self) -> list[date]:
        return sorted({m.day for m in self.moments})

    @property
    def strongest(self) -> Moment:
        return max(self.moments, key=lambda m: (m.intensity, m.day, m.id))


# --- The rule (no I/O) -----------------------------------------------------------------------------


def _normal(word: str) -> str:
    word = word.strip().casefold()
    # A plural and its singular are one matter ("interviews", "interview").
    if word.isascii() and len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


_NOT_MATTER = frozenset(_normal(w) for w in KEYWORD_STOPWORDS | _EN_NOT_MATTER | _FEELING_WORDS)


def matter_words(text: str, *, names: Iterable[str] = ()) -> frozenset[str]:
    """The content words of ``text`` that can name what a feeling is about (see the module's rule)."""
    skip = _NOT_MATTER | {_normal(text_simplified(name)) for name in names if name}
    words = set()
    # Read in simplified characters, as the feeling words and jieba's dictionary are written (面試 is 面试).
    for token, tag in word_tags(text_simplified(text)):
        word = _normal(token)
        if not word or not any(ch.isalnum() for ch in word) or word in skip:
            continue
        # A word of a script written with spaces (café, Zoë, привет: tagged "eng") is a word as an English one is.
        if word.isascii() or tag == "eng":
            if len(word) >= 3 and word.isalpha():
                words.add(word)
            continue
        # A compound names its parts' matter too: 面试官 (interviewer) is about 面试 (the interview); one made of
        # words that name none (今天下午: 今天, 下午) names none either.
        parts = word_parts(word, tag)
        kept = {p for p, t in parts if len(p) >= 2 and p not in skip and not t.startswith(_NOT_MATTER_TAGS)}
        if any(p != word for p, _ in parts) and not kept - {word}:
            continue
        words.update(kept)
    return frozenset(words)


def _sign(value: float) -> int:
    return (value > 0) - (value < 0)


def imprint_groups(moments: Sequence[Moment], *, names: Iterable[str] = ()) -> list[ImprintGroup]:
    """One person's groups of strong moments with the same feeling recurring about one matter on ≥ MIN_DAYS days.

    ``moments`` must all be one person's (a ValueError otherwise): groups never mix people.
    """
    if len({m.person_id for m in moments}) > 1:
        raise ValueError("imprint groups are made of one person's anchors")
    names = list(names)
    groups = []
    for sign in (-1, 1):
        strong = [m for m in moments if m.intensity >= MIN_INTENSITY and _sign(m.valence) == sign]
        held: dict[str, list[Moment]] = defaultdict(list)
        for moment in strong:
            for word in matter_words(moment.matter, names=names):
                held[word].append(moment)
        recurring = {w: ms for w, ms in held.items() if len({m.day for m in ms}) >= MIN_DAYS}
        groups.extend(_joined(recurring))
    return sorted(groups, key=lambda g: (g.days[0], g.anchor_ids))


def _joined(recurring: dict[str, list[Moment]]) -> list[ImprintGroup]:
    """Union of the recurring words' moments: words held by one moment are one matter."""
    parent: dict[int, int] = {}

    def find(pk: int) -> int:
        parent.setdefault(pk, pk)
        while parent[pk] != pk:
            parent[pk] = parent[parent[pk]]
            pk = parent[pk]
        return pk

    moments: dict[int, Moment] = {}
    for held in recurring.values():
        for moment in held:
            moments[moment.id] = moment
            parent[find(moment.id)] = find(held[0].id)
    members: dict[int, list[Moment]] = defaultdict(list)
    for pk, moment in moments.items():
        members[find(pk)].append(moment)
    words: dict[int, set[str]] = defaultdict(set)
    for word, held in recurring.items():
        words[find(held[0].id)].add(word)
    return [
        ImprintGroup(moments=tuple(sorted(group, key=lambda m: (m.day, m.id))), words=tuple(sorted(words[root])))
        for root, group in members.items()
    ]


def imprint_text(group: ImprintGroup) -> str:
    """First person, in the strongest anchor's language, around that anchor's own words."""
    strongest, days = group.strongest, group.days
    first, last = days[0].isoformat(), days[-1].isoformat()
    if is_chinese(strongest.content):
        return f"这份感受一再回到我心里（{first}至{last}，共{len(days)}天）：{strongest.content}"
    return f"This feeling keeps coming back to me ({len(days)} days, {first} to {last}): {strongest.content}"


def imprint_body(group: ImprintGroup, *, supersedes: Sequence[int] = ()) -> dict[str, Any]:
    moments, days = group.moments, group.days
    weights = [m.intensity for m in moments]
    return {
        "kind": "imprint",
        "anchor_ids": group.anchor_ids,
        "days": [day.isoformat() for day in days],
        "first_day": days[0].isoformat(),
        "last_day": days[-1].isoformat(),
        "valence": round(weighted_mean([m.valence for m in moments], weights), _DIGITS),
        "arousal": round(weighted_mean([m.arousal for m in moments], weights), _DIGITS),
        "intensity": round(sum(weights) / len(weights), _DIGITS),
        "peak_intensity": max(weights),
        "strongest_anchor_id": group.strongest.id,
        "words": list(group.words),
        # Cited as the anchors cite them: forgetting one of these facts sweeps the imprint as it sweeps them.
        "semantic_memory_ids": sorted({pk for m in moments for pk in m.semantic_memory_ids}),
        "conversation_ids": sorted({m.conversation_id for m in moments if m.conversation_id}),
        "supersedes": sorted(supersedes),
    }


def imprint_external_id(*, person_id: int, anchor_ids: Sequence[int]) -> str:
    digest = hashlib.sha1(",".join(str(pk) for pk in sorted(anchor_ids)).encode()).hexdigest()[:16]
    return f"{EXTERNAL_ID_PREFIX}{person_id}:{digest}"


# --- The nightly write ----------------------------------------------------------------------------


def _moment(block: LimbicBlock) -> Moment | None:
    figures = anchor_figures(block.body)
    if figures is None or block.source_day is None or block.person_id is None:
        return None
    valence, arousal, intensity = figures
    body = block.body
    segment = body.get("source_segment")
    cited = body.get("semantic_memory_ids")
    return Moment(
        id=block.pk,
        day=block.source_day,
        person_id=block.person_id,
        valence=valence,
        arousal=arousal,
        intensity=intensity,
        content=block.content,
        matter=segment.strip() if isinstance(segment, str) and segment.strip() else block.content,
        semantic_memory_ids=tuple(pk for pk in cited if isinstance(pk, int)) if isinstance(cited, list) else (),
        conversation_id=block.source_conversation_id,
    )


def _anchor_ids(imprint: LimbicBlock) -> set[int]:
    ids = (imprint.body or {}).get("anchor_ids")
    return {pk for pk in ids if isinstance(pk, int)} if isinstance(ids, list) else set()


def imprints_refresh(*, day: date) -> dict[str, Any]:
    """Write the imprints of the 30 days up to ``day``, person by person (see the module's rule).

    Idempotent: a group already imprinted is skipped; one that grew supersedes the imprints it overlaps.
    """
    since = day - timedelta(days=WINDOW_DAYS - 1)
    blocks = LimbicBlock.anchors.filter(source_day__gte=since, source_day__lte=day, person__isnull=False)
    by_person: dict[int, list[Moment]] = defaultdict(list)
    for block in blocks.order_by("source_day", "id"):
        moment = _moment(block)
        if moment is not None:
            by_person[moment.person_id].append(moment)
    persons = Person.objects.in_bulk(list(by_person))
    created, unchanged = [], 0
    for person_id, moments in sorted(by_person.items()):
        person = persons[person_id]
        for group in imprint_groups(moments, names=[person.display_name, person.slug]):
            imprint = _imprint_write(person=person, group=group)
            if imprint is None:
                unchanged += 1
            else:
                created.append(imprint.pk)
    # Ids only: the step's output is an audit row, not a place for what was felt.
    return {"day": day.isoformat(), "persons": len(by_person), "created": created, "unchanged": unchanged}


def _imprint_write(*, person: Person, group: ImprintGroup) -> LimbicBlock | None:
    """The group's imprint, superseding the person's current ones it overlaps; None when already imprinted."""
    ids = set(group.anchor_ids)
    with transaction.atomic():
        # One night at a time writes a person's imprints: the row lock keeps two runs from both writing.
        Person.objects.select_for_update().filter(pk=person.pk).first()
        theirs = list(LimbicBlock.imprints.filter(person=person))
        if any(ids <= _anchor_ids(imprint) for imprint in theirs):
            return None
        replaced = [imprint for imprint in imprints_current(theirs) if ids & _anchor_ids(imprint)]
        group = _with_earlier(group, replaced)
        last_day = group.days[-1]
        diary = diary_entries_ensure(days=[last_day])[last_day]
        return diary_block_create(
            diary=diary,
            tag=BlockTag.LIMBIC,
            memory_type=MemoryType.IMPRINT,
            content=imprint_text(group),
            body=imprint_body(group, supersedes=[imprint.pk for imprint in replaced]),
            external_id=imprint_external_id(person_id=person.pk, anchor_ids=group.anchor_ids),
            person=person,
        )


def _with_earlier(group: ImprintGroup, replaced: Sequence[LimbicBlock]) -> ImprintGroup:
    """The group with the anchors of the imprints it replaces that lie before its 30 days: a feeling that has kept
    coming back for longer than the window is still one imprint, from its first day."""
    earlier = {pk for imprint in replaced for pk in _anchor_ids(imprint)} - set(group.anchor_ids)
    moments = [m for m in map(_moment, LimbicBlock.anchors.filter(pk__in=earlier)) if m is not None]
    if not moments:
        return group
    words = {w for imprint in replaced for w in (imprint.body or {}).get("words", []) if isinstance(w, str)}
    return ImprintGroup(
        moments=tuple(sorted([*group.moments, *moments], key=lambda m: (m.day, m.id))),
        words=tuple(sorted(words | set(group.words))),
    )


# --- Reads ----------------------------------------------------------------------------------------


def imprints_current(imprints: Iterable[LimbicBlock]) -> list[LimbicBlock]:
    """Those of ``imprints`` no other of them supersedes, the latest last day first."""
    imprints = list(imprints)
    superseded = {pk for imprint in imprints for pk in (imprint.body or {}).get("supersedes", [])}
    current = [imprint for imprint in imprints if imprint.pk not in superseded]
    return sorted(current, key=lambda i: ((i.body or {}).get("last_day", ""), i.pk), reverse=True)


def imprints_of_person(*, person: Person) -> list[LimbicBlock]:
    """``person``'s current imprints (the newest version of each), the most recent first; nobody else's."""
    return imprints_current(LimbicBlock.imprints.filter(person=person))


def imprints_of_anchors(*, anchor_ids: Iterable[int]) -> list[int]:
    """Ids of the imprints made of any of ``anchor_ids``: an anchor gone (forgotten), its imprints go with it."""
    wanted = set(anchor_ids)
    if not wanted:
        return []
    # Imprints are few (a handful per person and month): read them rather than build a query per anchor.
    return sorted(imprint.pk for imprint in LimbicBlock.imprints.only("pk", "body") if wanted & _anchor_ids(imprint))


IMPRINT_HEADING = {
    Language.EN: "## Feelings that keep coming back",
    Language.ZH: "## 反复出现的感受",
}


def imprint_prompt_section(*, conversation: Conversation, language: str, script: str = "") -> str:
    """The latest imprints of the conversation's own person under a heading in ``language`` (its Chinese in
    ``script``'s characters, ``conversation_script``); else empty.

    Only the person the conversation resolves to: never another person's imprint.
    """
    person = conversation_person(conversation=conversation)
    if person is None:
        return ""
    imprints = imprints_of_person(person=person)[:PROMPT_LIMIT]
    if not imprints:
        return ""
    heading = text_in_script_of(IMPRINT_HEADING[language], like=script)
    return "\n".join([heading, *(f"- {imprint.content}" for imprint in imprints)])
