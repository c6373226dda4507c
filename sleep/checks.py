"""What a model (broken or hostile) proposes is checked here before it changes memory.

Each check returns the reason to refuse, or "" when the change may go ahead; the caller leaves
the change out and records the reason beside it (the step's output, shown on the Sleep page).
The checks read only the texts and the rows concerned, never the model's own explanation.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import date

from anima.core.segmentation import jieba_get, text_ruled, text_simplified
from anima.core.text import FUNCTION_WORDS, clip, normalized
from conversations.models import Person
from memory.citations import cited_foreign
from memory.models import SemanticMemory
from memory.services import EDITED_BY, PINNED_BY
from sleep.slots import Slot, memory_slot, slot_checked, supersedes
from temporal.selectors import DayConversation, person_label, person_names, persons_named

# --------------------------------------------------------------------------- comparing texts

# Words that say when or how sure, not what: two texts differing only by them state the same thing.
_FILLER = FUNCTION_WORDS | frozenset(
    "now anymore any more still already really also just currently these days nowadays lately recently "
    "现在 已经 还 也 都 一直 目前 最近 如今 真的 其实 了 的".split()
)
_CJK_RUN = re.compile(r"[\u3400-\u9fff]+")
_WORD = re.compile(r"[^\W_]+")


def text_units(text: str) -> set[str]:
    """What a text is made of, comparable across rewordings: Latin words (case-folded, a plural or third-person
    -s dropped) and the character pairs of its Chinese runs, without filler words. Chinese is read in simplified
    characters: a model may write 「对花生过敏」 for what the person wrote 「對花生過敏」."""
    units: set[str] = set()
    for run in _CJK_RUN.findall(text_simplified(text)):
        kept = "".join(word for word in jieba_get().cut(run) if word not in _FILLER)
        if len(kept) == 1:
            units.add(kept)
        else:
            units.update(kept[i : i + 2] for i in range(len(kept) - 1))
    for word in _WORD.findall(_CJK_RUN.sub(" ", text)):
        word = normalized(word)
        if word and word not in _FILLER:
            units.add(word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word)
    return units


def units_supported(part: set[str], source: set[str]) -> float:
    """The share of ``part`` found in ``source`` (1.0 for an empty part)."""
    return len(part & source) / len(part) if part else 1.0


# --------------------------------------------------------------------------- explicit contradiction

# Negations, Chinese and English, and the words that put a statement in the past ("used to", 「以前」: it
# holds no more). A word merely containing one counts too: the check also needs the rest of the two
# statements to be the same, which such a word rarely leaves.
_NEGATION = re.compile(
    r"不再|不是|不会|不能|不想|没有|从不|从未|不(?!错|过|断|少|久|同|但)|没(?!关系)|以前|曾经|原来|过去|"
    r"\b(?:not|never|no longer|no|none|neither|nor|without|isn't|aren't|wasn't|weren't|doesn't|don't|didn't|"
    r"won't|can't|cannot|hasn't|haven't|hadn't|shouldn't|wouldn't|used to|formerly)\b|n't\b",
    re.IGNORECASE,
)
_CLAUSE_SPLIT = re.compile(
    r"[。！？!?；;，,：:()（）\n]|但是|不过|可是|(?<=\.)\s+|\s+(?:but|and|while|whereas|though)\s+", re.IGNORECASE
)
# Words a negated statement may add to the one it denies ("any more", 「了」 are filler already): one or two.
_NEGATION_SLACK = 2


def _clauses(text: str) -> list[tuple[int, set[str]]]:
    """Each clause of ``text`` as (negations in it, its units without them), read in simplified characters (沒有 is
    没有) and with straight apostrophes (isn’t is isn't)."""
    found = []
    for clause in _CLAUSE_SPLIT.split(text_ruled(text)):
        negations = len(_NEGATION.findall(clause))
        units = text_units(_NEGATION.sub(" ", clause))
        if units:
            found.append((negations, units))
    return found


def negates(a: str, b: str, *, names: Iterable[str] = ()) -> bool:
    """Whether one text denies what the other states: a clause of each says the same thing (up to a word or two
    of slack) once negations are set aside, and exactly one of the two is negated ("Maya is allergic to
    peanuts" / "Maya is not allergic to peanuts", 「Leo 喜欢猫」 / 「Leo 不再喜欢猫了」)."""
    name_units = set().union(*(text_units(name) for name in names)) if names else set()
    for neg_a, units_a in _clauses(a):
        for neg_b, units_b in _clauses(b):
            if (neg_a % 2) == (neg_b % 2):
                continue
            small, large = sorted((units_a, units_b), key=len)
            if not small - name_units:
                continue  # only a name in common says nothing of what is denied
            if small <= large and len(large - small) <= _NEGATION_SLACK:
                return True
    return False


def memory_when(memory: SemanticMemory) -> tuple[date, str, int]:
    """When a memory was stated, for ordering: its day, its first sighting, its id."""
    return (memory.source_day or date.min, (memory.body or {}).get("observed_at") or "", memory.pk)


def _names(memory: SemanticMemory) -> tuple[str, ...]:
    return person_names(person=memory.person) if memory.person_id else ()


def retire_refusal(memory: SemanticMemory, successor: SemanticMemory | None) -> str:
    """Why the model may not retire ``memory`` in favour of ``successor`` ("" when it may).

    A retire is justified by the two texts alone: the successor is newer and states the same slot (the same
    subject and attribute, as each text reads) with another value, or one text explicitly denies the other.
    """
    if successor is None:
        return "no successor named: a retire needs the newer or the contradicting fact"
    old_slot, new_slot = memory_slot(memory), memory_slot(successor)
    if old_slot is not None and new_slot is not None and supersedes(new_slot, old_slot):
        if memory_when(successor) >= memory_when(memory):
            return ""
        return f"#{successor.pk} states the same {old_slot.attribute} but is older than #{memory.pk}"
    if negates(memory.content, successor.content, names=_names(memory)):
        return ""
    return (
        f"not justified: #{successor.pk} neither states the same subject and attribute with another value "
        f"nor denies #{memory.pk}"
    )


# --------------------------------------------------------------------------- protected memories


def memory_protected(memory: SemanticMemory, *, own_pin_ok: bool = False) -> str:
    """Why the model may not change ``memory`` ("" when it may): it is pinned, or an operator edited it.

    ``own_pin_ok``: a pin the nightly review itself made does not protect against its own unpinning.
    """
    body = memory.body or {}
    if memory.pinned and not (own_pin_ok and body.get(PINNED_BY)):
        return f"#{memory.pk} is pinned"
    if body.get(EDITED_BY):
        return f"#{memory.pk} was edited by {body[EDITED_BY]}"
    return ""


def citations_refusal(text: str, *, person_id: int | None) -> str:
    """Why ``text`` may not be stored for ``person_id``: it cites another person's memories."""
    foreign = cited_foreign(text=text, person_id=person_id)
    if not foreign:
        return ""
    return "cites another person's memories: " + ", ".join(f"#{pk}" for pk in foreign)


# --------------------------------------------------------------------------- splits and merges

# A part of a split may reword its source a little, not add facts of its own. Measured on two sources
# (「Leo 住在杭州，在阿里巴巴工作，女儿小雨属虎。」 and an English twin): sentences of the source score 1.0,
# paraphrases 0.6-0.75 (「Leo 在阿里巴巴上班」 0.67, 「Leo 的女儿叫小雨」 0.6, "Maya has a cat named Miso"
# 0.75), a part adding a fact 0.5 ("Maya is a night-shift nurse" from "works nights at the children's
# hospital") and invented ones 0.0 ("INJECTED a").
PART_SUPPORT = 0.6
# Together the parts must keep most of what the source said.
SPLIT_COVERAGE = 0.6
# Each source of a merge shares at least this much of what it says with the others, or they with it (beyond the
# person's name): one may say more than another, not something else.
MERGE_OVERLAP = 0.5


def split_refusal(source: SemanticMemory, parts: list[dict]) -> str:
    """Why ``parts`` (each with its ``content``) are no split of ``source`` ("" when they are)."""
    parts = [part["content"] for part in parts]
    if len({normalized(part) for part in parts}) < 2:
        return "a split needs two different parts"
    whole = text_units(source.content)
    units = [text_units(part) for part in parts]
    for part, part_units in zip(parts, units, strict=True):
        if units_supported(part_units, whole) < PART_SUPPORT:
            return f"part {part[:60]!r} says what #{source.pk} does not"
        if refusal := citations_refusal(part, person_id=source.person_id):
            return refusal
    if units_supported(whole, set().union(*units)) < SPLIT_COVERAGE:
        return f"the parts leave out most of #{source.pk}"
    return ""


def merge_refusal(sources: list[SemanticMemory], content: str) -> str:
    """Why ``content`` may not replace ``sources`` ("" when it may): they must say the same thing (one may say
    more), and it must say what they say, all of it and nothing else."""
    names = set().union(*(text_units(name) for source in sources for name in _names(source)))
    units = {source.pk: text_units(source.content) for source in sources}
    everything = set().union(*units.values())
    merged = text_units(content)
    for source in sources:
        own = units[source.pk] - names
        others = set().union(*(units[o.pk] for o in sources if o is not source)) - names
        shared = len(own & others) / max(min(len(own), len(others)), 1)
        if own and others and shared < MERGE_OVERLAP:
            return f"#{source.pk} says something the others do not: no duplicate"
        if units_supported(units[source.pk], merged) < PART_SUPPORT:
            return f"the merged text leaves out what #{source.pk} says"
    if units_supported(merged, everything) < PART_SUPPORT:
        return "the merged text says what its sources do not"
    return citations_refusal(content, person_id=sources[0].person_id)


# --------------------------------------------------------------------------- how much one night may change


class NightLimit:
    """At most a share of each owner's memories active when the night began change in one night.

    An owner is whose memories they are (a person, else the one conversation they came from): a model that
    goes wrong on one person's memories cannot retire most of them, and one busy day for many people does not
    hold back another's changes. A change counts the memories it takes out of what is held: a retire or a
    split one, a merge of N memories N - 1 (what they said stays, in one memory), a pin or an unpin one.
    """

    def __init__(self, *, inventory: dict[str, int], share: float, floor: int) -> None:
        self.inventory = inventory
        self.share = share
        self.floor = floor
        self.used: dict[str, int] = {}

    def allowed(self, owner: str) -> int:
        return max(self.floor, math.ceil(self.share * self.inventory.get(owner, 0)))

    def take(self, count: int = 1, *, owner: str) -> str:
        """Reserve ``count`` changes of ``owner``'s memories; the reason to refuse when the night has none left."""
        used = self.used.get(owner, 0)
        if used + count > self.allowed(owner):
            held = self.inventory.get(owner, 0)
            return f"the night's change limit for these memories' owner is reached ({self.allowed(owner)} of {held})"
        self.used[owner] = used + count
        return ""


# --------------------------------------------------------------------------- facts light sleep stores

_FIRST_OR_SECOND_PERSON = re.compile(
    r"^\s*(?:(?:I|I'm|I'll|I've|I'd|me|my|we|we're|we'll|our|us|you|you're|you'll|you've|your)\b|"
    r"(?:我|我们|咱们|咱|你|你们|您))",
    re.IGNORECASE,
)
# A fact this much made of one assistant line, and far less of what the user said, is the assistant's line.
COPY_SHARE = 0.8
USER_SHARE = 0.5
# At least this share of what any fact says must be in the user's own lines, else it is invented (or another
# conversation's). Rewordings keep half or more ("Maya lives in Lisbon" from "I moved to Lisbon last month" 0.5,
# 「Leo 的女儿叫小雨」 from 「我女儿小雨属虎」 0.5); what a small model made up keeps none ("Leo is allergic to
# peanuts" from a Chinese dialogue about work, 0.0).
GROUNDED_SHARE = 0.4
_QUESTION = re.compile(r"[?？]\s*$")


def fact_refusal(content: str, *, person: Person | None, others: list[Person], dialogue: list[dict]) -> str:
    """Why a fact may not be stored about ``person`` ("" when it may).

    It must be about its person: not told in the first or second person (the assistant's voice, or the
    assistant talking to the user), not about another known person ``others`` unless it names its own; a
    statement, not a question; mostly what the user said (beyond names and numbers), not a copy of what the
    assistant said that the user did not say; and cite nobody else's memories.
    """
    if _FIRST_OR_SECOND_PERSON.match(content):
        return "told as 'I' or 'you', not about the person by name"
    named = persons_named(content, persons=others)
    if named and not (person is not None and persons_named(content, persons=[person])):
        return f"about {person_label(named[0])}, not {person_label(person) or 'this conversation’s person'}"
    if _QUESTION.search(content):
        return "a question, not something the person said"
    own = {unit for name in ([person_label(person), person.slug] if person else []) for unit in text_units(name)}
    units = text_units(content) - own
    said = text_units(" ".join(turn["content"] for turn in dialogue if turn["role"] == "user"))
    names = {normalized(name) for name in ([person_label(person), person.slug] if person else [])}
    if not any(not word.isdigit() and normalized(word) not in names for word in _WORD.findall(content)):
        return "nothing but names and numbers"
    # Numbers are left out: a model may write the date a "tomorrow" meant, or a figure in digits.
    words = {unit for unit in units if not unit.isdigit()}
    for turn in dialogue:
        if turn["role"] == "assistant" and units_supported(units, text_units(turn["content"])) >= COPY_SHARE:
            if units_supported(units, said) < USER_SHARE:
                return "a copy of the assistant's line, not something the person said"
    if words and units_supported(words, said) < GROUNDED_SHARE:
        return "not what the person said: most of it is in none of their lines"
    return citations_refusal(content, person_id=person.pk if person else None)


class FactChecks:
    """The checks of what the model proposes for one conversation's facts; each refusal goes in the report."""

    def __init__(self, item: DayConversation, report: dict) -> None:
        self.item = item
        self.report = report
        self.dialogue = item.dialogue()
        person = item.person
        self.others = list(Person.objects.exclude(pk=person.pk) if person else Person.objects.all())

    def _refuse(self, action: str, what: str | int, reason: str) -> bool:
        if reason:
            self.report["refused"].append({"action": action, "what": what, "reason": reason})
        return bool(reason)

    def fact(self, action: str, content: str) -> bool:
        """Whether the fact text ``content`` is refused ("" is a change that leaves the text as it is)."""
        reason = content and fact_refusal(content, person=self.item.person, others=self.others, dialogue=self.dialogue)
        return self._refuse(action, clip(content, 120), reason)

    def memory(self, action: str, pk: int, memory: SemanticMemory | None) -> bool:
        """Whether the model may not change the existing memory ``pk``."""
        reason = memory_protected(memory) if memory is not None else "not a memory of this conversation"
        return self._refuse(action, pk, reason)

    def slot(self, fact: dict) -> Slot | None:
        """The slot a new fact is stored with: what its own text reads; one the model gave that the text does
        not state is left out (and noted)."""
        proposed = Slot.from_body({"slot": fact.get("slot")})
        slot = slot_checked(proposed, text=fact["content"], name=self.item.person_name)
        if proposed is not None and slot != proposed:
            said = f"{proposed.attribute}{f'[{proposed.key}]' if proposed.key else ''}={proposed.value}"
            self._refuse("slot", clip(fact["content"], 120), f"slot {said} is not what the text states")
        return slot
