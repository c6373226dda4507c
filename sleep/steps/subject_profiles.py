"""The observation profile of each subject with enough facts: one line per active fact, in the facts' language.

A subject with at least ``PROFILE_MIN_FACTS`` active facts in one language gets a profile in that language
(a subject told about in both languages: the language most of its facts are in, with only those facts, so a
profile never mixes languages). One bounded call per profile (``sleep.subject-profile``; the offline
provider answers with each fact's own words, its subject taken off the front) writes a line per fact; a line
that cites a fact it was not given, is in the other language, or says words its fact does not is refused and
listed under ``failures`` (the step is then partial; a profile with no line left keeps its previous version).
What changed since the last version (a fact superseded, expired, forgotten or new) makes a new version
through ``memory_correct``, so belief history keeps the old one; a subject that falls below the threshold
has its profile expired. A profile an operator edited or pinned is theirs: the step leaves it as it is.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from anima.core.llm import LlmBudgetExceeded, LlmError, llm_json
from anima.core.llm.schema import schema_array, schema_integer, schema_object, schema_string
from anima.core.segmentation import text_in_script_of, text_simplified
from anima.core.text import FUNCTION_WORDS
from conversations.models import Language, Person
from memory.models import SemanticMemory, Subject, SubjectKind
from memory.subjects import PROFILE_KEY, SOURCE_FACTS_KEY
from memory.subjects.selectors import subject_facts, subject_profile
from memory.subjects.services import ProfileLine, subject_profile_retire, subject_profile_write
from sleep.checks import citations_refusal, memory_protected
from sleep.context import StepContext
from sleep.slots import chinese, number_value, relation_words
from temporal.selectors import person_label

# Two facts say more than the one fact itself would; one is already its own memory.
PROFILE_MIN_FACTS = 2
# A profile is short: the newest facts of its language, this many at most.
PROFILE_MAX_FACTS = 12
LINE_MAX_CHARS = 200
PROFILE_PURPOSE = "sleep.subject-profile"
TOO_FEW = f"fewer than {PROFILE_MIN_FACTS} active facts"
PROFILE_INSTRUCTIONS = (
    "Write a short profile of `subject` for the companion's own memory: for each fact in `facts`, one line that "
    "says what that fact says about the subject, without repeating the subject's name, in the language "
    "`language` (zh: Chinese, en: English) and in the words of the fact. Use only what the fact says: no other "
    "fact, no guess, no advice. Cite each line's fact by its id. "
    'Answer JSON: {"lines": [{"fact": id, "text": "..."}]}.'
)
PROFILE_SCHEMA = schema_object(
    {
        "lines": schema_array(
            schema_object(
                {"fact": schema_integer(), "text": schema_string(min_length=1, max_length=LINE_MAX_CHARS)},
                required=["fact", "text"],
            ),
            max_items=PROFILE_MAX_FACTS,
        )
    },
    required=["lines"],
)
# A line states its own fact when it holds at least this share of the fact-free line's words.
GROUNDED_SHARE = 0.5


@dataclass
class ProfilesWritten:
    counts: Counter = field(default_factory=Counter)
    failures: list[dict] = field(default_factory=list)


def _language(facts: list[SemanticMemory]) -> str:
    zh = sum(chinese(fact.content) for fact in facts)
    return Language.ZH if zh * 2 > len(facts) else Language.EN


def _relation_word(subject: Subject, facts: list[SemanticMemory], language: str) -> str:
    """The word the facts call the subject's relation by, in ``language`` (as stated, never translated), in the
    characters of the fact that says it (女兒 where it says 女兒)."""
    for word in relation_words(subject.relation):
        if chinese(word) != (language == Language.ZH):
            continue
        for fact in facts:
            if word.casefold() in text_simplified(fact.content).casefold():
                return text_in_script_of(word, like=fact.content)
    return ""


def _framing(subject: Subject, facts: list[SemanticMemory], language: str, label: str) -> tuple[str, str]:
    """The profile's heading and intro: 「小雨」「Leo 的女儿」, "Lily" "Maya's daughter", "Lisbon" "where she lives"."""
    zh = language == Language.ZH
    if subject.kind == SubjectKind.SELF:
        return label, ""
    if subject.kind in (SubjectKind.PLACE, SubjectKind.ORGANISATION):
        lives = subject.relation == "residence"
        intro = (
            (f"{label} 住的地方" if lives else f"{label} 工作的地方")
            if zh
            else (f"where {label} lives" if lives else f"where {label} works")
        )
        return subject.name, intro
    word = _relation_word(subject, facts, language)
    intro = (f"{label} 的{word}" if zh else f"{label}'s {word}") if word else ""
    if subject.name:
        return subject.name, intro
    return (intro, "") if intro else (subject.key, "")


_CJK_RUN = re.compile(r"[\u3400-\u9fff]+")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def _pieces(text: str) -> set[str]:
    """What a line's words are checked by: Latin words of two letters or more and numbers (case-folded, no
    function word), and the character bigrams of its Chinese runs in their simplified reading (a line may write
    属虎 for a fact's 屬虎)."""
    pieces = {
        number_value(word) if word.isdigit() else word
        for word in _WORD.findall(_CJK_RUN.sub(" ", text.casefold()))
        if (len(word) >= 2 or word.isdigit()) and word not in FUNCTION_WORDS
    }
    for run in _CJK_RUN.findall(text_simplified(text)):
        pieces |= {run[i : i + 2] for i in range(len(run) - 1)} if len(run) > 1 else {run}
    return pieces


def _stated(piece: str, said: set[str], text: str) -> bool:
    if piece in said or piece in text:
        return True
    # An English word in another form ("allergic" for "allergy", "lives" for "live").
    return piece.isalpha() and piece.isascii() and len(piece) >= 4 and any(w.startswith(piece[:4]) for w in said)


def line_refusal(text: str, *, fact: SemanticMemory, language: str, names: list[str]) -> str:
    """Why a profile line may not stand for ``fact`` ("" when it may): the other language, or words (a name, a
    number, most of its content) the fact does not say."""
    if chinese(text) != (language == Language.ZH):
        return "not in the profile's language"
    said_text = " ".join([fact.content, *names]).casefold()
    said = _pieces(said_text) | {number_value(w) for w in _WORD.findall(said_text)}
    pieces = _pieces(text)
    if not pieces:
        return "says nothing"
    for piece in pieces:
        # A name or a number the fact does not hold is invented, however short the line.
        if (piece.isdigit() or (piece.isascii() and piece.isalpha() and piece.title() in text)) and not _stated(
            piece, said, said_text
        ):
            return f"says {piece!r}, which its fact does not"
    held = sum(_stated(piece, said, said_text) for piece in pieces)
    if held < GROUNDED_SHARE * len(pieces):
        return "most of it is not in its fact"
    return citations_refusal(text, person_id=fact.person_id)


def _summarises(profile: SemanticMemory, *, facts: list[SemanticMemory], heading: str, intro: str) -> bool:
    spec = profile.body.get(PROFILE_KEY) or {}
    same_framing = (spec.get("heading"), spec.get("intro")) == (heading, intro)
    return same_framing and profile.body.get(SOURCE_FACTS_KEY) == [fact.pk for fact in facts]


def _profile_lines(
    ctx: StepContext, *, subject: Subject, facts: list[SemanticMemory], language: str, label: str, written
) -> list[ProfileLine]:
    heading, intro = _framing(subject, facts, language, label)
    names = [label, subject.name, *subject.aliases]
    answer = llm_json(
        purpose=PROFILE_PURPOSE,
        instructions=PROFILE_INSTRUCTIONS,
        payload={
            "language": language,
            "person": label,
            "subject": {"heading": heading, "intro": intro, "kind": subject.kind, "names": names},
            "facts": [{"id": fact.pk, "content": fact.content} for fact in facts],
        },
        schema=PROFILE_SCHEMA,
        run_key=ctx.run_key,
        token_budget=ctx.token_budget,
        max_tokens=80 * len(facts) + 100,
    )
    by_id = {fact.pk: fact for fact in facts}
    lines: dict[int, ProfileLine] = {}
    for item in answer["lines"]:
        fact = by_id.get(item["fact"])
        text = " ".join(item["text"].split()).strip("。.；;")
        refusal = (
            "cites a fact it was not given"
            if fact is None
            else "a second line for one fact"
            if fact.pk in lines
            else line_refusal(text, fact=fact, language=language, names=names)
        )
        if refusal:
            written.failures.append({"subject": subject.pk, "fact": item["fact"], "error": f"line refused: {refusal}"})
            continue
        lines[fact.pk] = ProfileLine(fact=fact.pk, text=text)
    # In the facts' order, whatever order the answer gave.
    return [lines[fact.pk] for fact in facts if fact.pk in lines]


def subject_profiles_write(ctx: StepContext, *, person: Person, subjects: list[Subject]) -> ProfilesWritten:
    """Write, rewrite or retire the profile of each of ``person``'s ``subjects``."""
    written = ProfilesWritten()
    label = person_label(person)
    for subject in subjects:
        current = subject_profile(subject=subject)
        if current is not None and memory_protected(current):
            written.counts["kept"] += 1
            continue
        facts = list(subject_facts(subject=subject))
        language = _language(facts) if facts else Language.EN
        facts = [fact for fact in facts if (chinese(fact.content) == (language == Language.ZH))][-PROFILE_MAX_FACTS:]
        if len(facts) < PROFILE_MIN_FACTS:
            if subject_profile_retire(subject=subject, reason=TOO_FEW):
                written.counts["retired"] += 1
            continue
        heading, intro = _framing(subject, facts, language, label)
        if current is not None and _summarises(current, facts=facts, heading=heading, intro=intro):
            # The same facts (a changed text is a new fact): no call, so a model's new wording makes no new version.
            written.counts["unchanged"] += 1
            continue
        try:
            lines = _profile_lines(ctx, subject=subject, facts=facts, language=language, label=label, written=written)
        except LlmBudgetExceeded:
            raise
        except LlmError as exc:
            written.failures.append({"subject": subject.pk, "error": f"{type(exc).__name__}: {exc}"})
            continue
        if not lines:
            written.failures.append({"subject": subject.pk, "error": "no line of the answer stood"})
            continue
        action = subject_profile_write(subject=subject, heading=heading, intro=intro, lines=lines, language=language)
        written.counts[action] += 1
    return written
