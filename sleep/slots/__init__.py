"""Fact slots: who a fact is about, which attribute it sets, and to what.

A slot is read from a first-person disclosure ("I moved to Munich", 「我女儿满八岁了」) or from a
stored third-person fact ("Maya lives in Lisbon", with the person's name standing for "I"). Two
facts in the same slot with different values cannot both be current: the newer one supersedes
the older. Two facts in the same slot with the same value say the same thing.

The grammar is small on purpose — a subject (the person, a relative or pet, optionally named),
then one predicate per attribute — so it reads phrasings it was never shown, in Chinese and
English. Attributes that hold one value at a time (residence, job, a relative's age, a favourite
of one kind) compare values; attributes that hold many (likes, allergies, habits, plans) carry
what they are about as the slot's ``key`` and compare polarity or detail.

The modules, bottom up: ``_slot`` (the slot and its comparisons), ``_values`` (numbers and values),
``_english`` and ``_chinese`` (the two grammars); here, reading a stored fact's slot and checking a
proposed one.
"""

from __future__ import annotations

import functools
import re

from anima.core.llm.schema import schema_object, schema_string
from anima.core.relations import relation_is_pet, relation_word_read, relation_words
from anima.core.segmentation import text_ruled, text_simplified
from anima.core.text import is_chinese, without_addresses
from sleep.slots._chinese import zh_read
from sleep.slots._english import en_read
from sleep.slots._slot import SELF, Slot, restates, same_slot, same_subject, slot_resolved, slots_aliased, supersedes
from sleep.slots._values import number_value
from temporal.selectors import person_label

__all__ = [
    "SELF",
    "SLOT_RULE",
    "SLOT_SCHEMA",
    "Slot",
    "chinese",
    "en_read",
    "memory_slot",
    "number_value",
    "relation_is_pet",
    "relation_word_read",
    "relation_words",
    "restates",
    "same_slot",
    "slot_checked",
    "slot_read",
    "slot_resolved",
    "slots_aliased",
    "supersedes",
]


def chinese(text: str) -> bool:
    """Whether a statement is Chinese, judged without its e-mail addresses and links."""
    return is_chinese(without_addresses(text))


# A deep-sleep round reads the slot of each active memory in several of its passes; a reading depends on the
# text and the name only, and a Slot is frozen.
@functools.lru_cache(maxsize=8192)
def slot_read(text: str, *, name: str = "") -> Slot | None:
    """The slot a stored fact fills, read with the person's ``name`` standing for the first person; traditional
    characters are read as simplified ones (the grammar's), so a fact fills the same slot in either script, and a
    phone's apostrophe (Maya’s) as a straight one."""
    text, name = text_ruled(text), text_simplified(name)
    reader = zh_read if chinese(text) else en_read
    first = re.split(r"(?<=[。！？!?；;])|(?<=\.)\s+|[，,](?=\s*(?:and|but|so)\b)", text.strip())[0]
    # A fact with a detail after a comma (「……是一名小学老师，教语文」) fills the slot its first clause reads to.
    for clause in dict.fromkeys((first, re.split(r"[，,]", first)[0])):
        reading = reader(clause, name=name)
        if reading:
            return reading.slot
    return None


SLOT_RULE = (
    "Give each fact its slot when one can be read: subject ('self' for the person, else a relation such as "
    "'daughter', 'wife', 'cat'), name (the subject's own name, if stated), attribute (residence, workplace, job, "
    "age, birthday, email, phone, origin, diet, allergy, likes, favourite:<kind>, activity, event, marital, status), "
    "key (for many-valued attributes — likes, allergy, diet, activity, event — what it is about, e.g. 'cilantro'; "
    "else empty) and value (the place, job, number…; '+' / '-' for a like or dislike, 'no' for something stopped)."
)
_SLOT_REQUIRED = ("attribute", "value")
SLOT_SCHEMA = schema_object(
    {
        field: schema_string(max_length=120, nullable=field not in _SLOT_REQUIRED)
        for field in ("subject", "name", "attribute", "key", "value")
    },
    required=_SLOT_REQUIRED,
    nullable=True,
)


def slot_checked(proposed: Slot | None, *, text: str, name: str = "") -> Slot | None:
    """The slot a fact may merge or retire by: the one its own text reads to.

    A proposed slot (a model's answer, or one stored with the fact) counts only where the text
    says the same (it may add what the text leaves implicit, such as a relative's name); one the
    text does not state is dropped, so an invented slot can never supersede a true fact.
    """
    read = slot_read(text, name=name)
    if read is None:
        return None
    if proposed is not None and (
        restates(proposed, read)
        # The text reads as the same attribute of the same subject, and says the proposed key and value in so many
        # words: the proposal only reads them more cleanly (「喜欢 TypeScript（以前喜欢 Python）」 likes TypeScript).
        or (proposed.attribute == read.attribute and same_subject(proposed, read) and _words_stated(proposed, text))
    ):
        return proposed
    return read


# Values that stand for a polarity or a state, not words of the text.
_SYMBOLIC_VALUES = frozenset({"", "+", "-", "0", "no", "done"})


def _words_stated(slot: Slot, text: str) -> bool:
    said = " ".join(text.casefold().split())
    return all(word in said for word in (slot.key, slot.value) if word not in _SYMBOLIC_VALUES)


def memory_slot(memory) -> Slot | None:
    """The slot a semantic memory fills, as its content reads (the stored one where the content agrees)."""
    name = person_label(memory.person) if memory.person_id else ""
    return slot_checked(Slot.from_body(memory.body), text=memory.content, name=name)
