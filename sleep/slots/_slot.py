"""What a slot is, and when two say the same thing or one supersedes the other."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from sleep.slots._values import number_value, value_normalized

SELF = "self"


@dataclass(frozen=True)
class Slot:
    subject: str  # SELF, a relation ("daughter", "cat"), or "" when only the name is known
    name: str  # the subject's own name when stated ("Lily", "豆豆"), casefolded
    attribute: str  # "residence", "job", "age", "likes", "favourite:film", "diet", ...
    key: str  # what a many-valued attribute is about ("cilantro"); "" for one-valued attributes
    value: str  # normalised value: "munich", "8", "+" / "-" for likes, "no" for a stopped habit

    def as_body(self) -> dict:
        return asdict(self)

    @classmethod
    def from_body(cls, body: dict | None) -> Slot | None:
        slot = (body or {}).get("slot")
        if not isinstance(slot, dict) or not slot.get("attribute"):
            return None
        fields = {
            field: str(slot.get(field) or "").strip() for field in ("subject", "name", "attribute", "key", "value")
        }
        fields["name"], fields["key"], fields["value"] = (
            fields["name"].casefold(),
            fields["key"].casefold(),
            value_normalized(fields["value"]),
        )
        if not fields["subject"] and not fields["name"]:
            fields["subject"] = SELF
        return cls(**fields)


def same_subject(a: Slot, b: Slot) -> bool:
    """Same person / relative / pet: equal names, or equal relations where a name is missing on one side."""
    if a.name and b.name:
        return a.name == b.name
    return bool(a.subject) and a.subject == b.subject


def slots_aliased(slots: list[Slot]) -> dict[str, str]:
    """name → relation, from the slots that state both ("my son Diego", 「我儿子叫乐乐」)."""
    aliases: dict[str, str] = {}
    for slot in slots:
        if slot.name and slot.subject and slot.subject != SELF:
            aliases.setdefault(slot.name, slot.subject)
    return aliases


def slot_resolved(slot: Slot, aliases: dict[str, str]) -> Slot:
    """``slot`` with its relation filled in when only the subject's name was said ("Diego turned 5")."""
    if slot.name and not slot.subject and slot.name in aliases:
        return replace(slot, subject=aliases[slot.name])
    return slot


def _same_key(a: str, b: str) -> bool:
    """What two many-valued facts are about: equal, or one names it more fully (「徒步」, 「山里徒步」; "cello")."""
    if a == b:
        return True
    short, long = sorted((a, b), key=len)
    if len(short) < 2 or not long:
        return False
    if short.isascii():
        return f" {short} " in f" {long} "
    return long.endswith(short)


def same_slot(a: Slot, b: Slot) -> bool:
    return a.attribute == b.attribute and _same_key(a.key, b.key) and same_subject(a, b)


def restates(a: Slot, b: Slot) -> bool:
    return same_slot(a, b) and _same_value(a.value, b.value)


def supersedes(newer: Slot, older: Slot) -> bool:
    """``newer`` replaces ``older``: the same slot with another value (a number, a polarity, a place…)."""
    return same_slot(newer, older) and not _same_value(newer.value, older.value)


def _same_value(a: str, b: str) -> bool:
    # Slots stored before numbers had one spelling may hold "two" where a new reading says "2".
    return a == b or number_value(a) == number_value(b)
