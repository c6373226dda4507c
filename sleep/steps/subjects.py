"""subjects: who and what each person's facts are about, read from their slots, and a profile of each.

The build is deterministic, the same for every provider: each active fact's slot (``memory_slot``, the
slot its own text states) names its subject — the person (``self``), a relative or pet by relation and
name ("daughter" 小雨), a place it sets as a residence or workplace. A relation and a name are one
subject where a fact states both (「Leo 的女儿小雨」); a fact giving only one of them joins the one subject
it can mean, and none when it could mean two (two daughters, or a daughter and a friend both called Lily:
sharing a first name is no evidence). A fact saying a subject has another name (「英文名叫 Lily」, "also
called Lily") makes the two one. A fact also mentions every subject whose name it contains, unless
two subjects share that name; a fact about no one else is about the person.

Re-running a night reads the same facts and changes nothing; facts no longer active leave their subjects,
and a subject left with none goes. Then ``sleep.steps.subject_profiles`` writes the profiles.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from anima.core.segmentation import text_simplified, word_tags
from conversations.models import Person
from memory.models import SemanticMemory, Subject, SubjectKind
from memory.subjects import SELF_KEY
from memory.subjects.selectors import active_facts
from memory.subjects.services import SubjectSpec, subjects_sync
from sleep.context import StepContext
from sleep.slots import SELF, Slot, chinese, memory_slot, relation_is_pet, relation_word_read, relation_words
from sleep.steps.subject_profiles import subject_profiles_write
from temporal.selectors import person_label

# Attributes whose value is somewhere the person is: a place, or an organisation they work at.
PLACE_ATTRIBUTES = ("residence", "workplace")
PLACE = "place"
RETIRED = "its subject is no longer in any active fact"

# Another name stated for a subject: 「英文名叫 Lily」, 「小名是豆豆」, "her Chinese name is 小雨", "also called Lily".
_NAME = r"(?P<alias>[A-Z][A-Za-z'-]{1,30}|[\u4e00-\u9fff]{2,4})"
# People the grammar has no slot for: a name after one of these is someone else than a relative of that name.
_OTHER_RELATIONS = frozenset(
    "friend friends colleague coworker co-worker boss manager neighbour neighbor classmate roommate teacher "
    "doctor 朋友 好友 同事 老板 领导 邻居 同学 室友 老师 医生".split()
)
# The word right before a name: 「朋友小雨」, "friend Lily", "sister, Lily".
_WORD_BEFORE = re.compile(r"([A-Za-z-]+|[\u4e00-\u9fff]{1,3})[\s,，]*$")
_ALIAS_STATEMENTS = (
    re.compile(rf"(?:英文名|中文名|小名|大名|昵称|乳名|全名|名字)(?:字)?\s*(?:是|叫|为)?\s*[「“\"]?{_NAME}"),
    re.compile(rf"\b(?:English|Chinese|full|nick|pet|real)\s*name\s+is\s+[\"“]?{_NAME}", re.I),
    re.compile(rf"\b(?:also called|also known as|goes by|nicknamed|known as)\s+[\"“]?{_NAME}"),
)


@dataclass
class _Draft:
    key: str
    kind: str
    relation: str
    name: str = ""  # casefolded, as the slot reads it
    facts: set[int] = field(default_factory=set)
    aliases: set[str] = field(default_factory=set)  # other names, as stated
    stated: dict[int, str] = field(default_factory=dict)  # fact -> the attribute its slot states of this subject


def _person_key(relation: str, name: str) -> str:
    return f"{relation}:{name}"


def _occurs(word: str, text: str) -> bool:
    """``word`` in ``text``, case-insensitively; a Latin word only as a whole word ("Ann" is not in "Anna")."""
    if not word:
        return False
    if word.isascii():
        return re.search(rf"(?<![\w]){re.escape(word)}(?![\w])", text, re.I) is not None
    return word.casefold() in text.casefold()


def _as_stated(word: str, texts: Iterable[str]) -> str:
    """``word`` (casefolded and in simplified characters, as the slot grammar reads it) as a fact writes it: "lily" →
    "Lily", 晓东 → 曉東."""
    for text in texts:
        plain = text_simplified(text)
        found = re.search(re.escape(word), plain, re.I)
        if found:
            return text[found.start() : found.end()] if len(plain) == len(text) else found.group(0)
    return word


def _place_kind(slot: Slot, text: str) -> str:
    if slot.attribute == "residence":
        return SubjectKind.PLACE
    if chinese(text):
        tags = dict(word_tags(text))
        return SubjectKind.PLACE if tags.get(_as_stated(slot.value, [text])) == "ns" else SubjectKind.ORGANISATION
    in_place = re.search(rf"\bin\s+(?:the\s+)?{re.escape(slot.value)}\b", text, re.I)
    return SubjectKind.PLACE if in_place else SubjectKind.ORGANISATION


def _slot_target(slot: Slot, *, names_of: dict[str, set[str]], relations_of: dict[str, set[str]]) -> str | None:
    """The key of the subject ``slot`` is about, None when it could be two."""
    if slot.subject == SELF:
        return SELF_KEY
    if slot.subject and slot.name:
        return _person_key(slot.subject, slot.name)
    if slot.subject:
        named = names_of.get(slot.subject, set())
        if len(named) > 1:
            return None
        return _person_key(slot.subject, next(iter(named)) if named else "")
    relations = relations_of.get(slot.name, set())
    if len(relations) > 1:
        return None
    return _person_key(next(iter(relations)) if relations else "", slot.name)


def subjects_read(*, person: Person, facts: list[SemanticMemory]) -> list[SubjectSpec]:
    """``person``'s subjects as their active ``facts`` state them (only theirs: never another person's)."""
    label = person_label(person)
    # Read in simplified characters, as the slots are: a name or a relation word is found in a fact in either script.
    texts = {m.pk: text_simplified(m.content) for m in facts}
    slots = {m.pk: slot for m in facts if (slot := memory_slot(m)) is not None}
    names_of: dict[str, set[str]] = {}
    relations_of: dict[str, set[str]] = {}
    for slot in slots.values():
        if slot.name and slot.subject and slot.subject != SELF:
            names_of.setdefault(slot.subject, set()).add(slot.name)
            relations_of.setdefault(slot.name, set()).add(slot.subject)
    drafts: dict[str, _Draft] = {SELF_KEY: _Draft(key=SELF_KEY, kind=SubjectKind.SELF, relation=SELF)}
    for pk, slot in slots.items():
        key = _slot_target(slot, names_of=names_of, relations_of=relations_of)
        if key is not None and key != SELF_KEY:
            relation, _, name = key.rpartition(":")  # a breed's relation has a colon of its own
            kind = SubjectKind.PERSON if relation else SubjectKind.OTHER
            kind = SubjectKind.PET if relation_is_pet(relation) else kind
            drafts.setdefault(key, _Draft(key=key, kind=kind, relation=relation, name=name))
        if key is not None:
            drafts[key].facts.add(pk)
            drafts[key].stated[pk] = slot.attribute
        if slot.attribute in PLACE_ATTRIBUTES and slot.value and key == SELF_KEY:
            place = f"{PLACE}:{slot.value}"
            kind = _place_kind(slot, texts[pk])
            draft = drafts.setdefault(place, _Draft(key=place, kind=kind, relation=slot.attribute, name=slot.value))
            draft.facts.add(pk)
    # Names first, so a fact stating another name is found by the name it gives; then the names it added.
    _mentions_by_name(drafts, texts, person=label)
    _aliases_joined(drafts, texts)
    _mentions_by_name(drafts, texts, person=label)
    about_someone = set().union(*(d.facts for key, d in drafts.items() if key != SELF_KEY))
    drafts[SELF_KEY].facts |= {pk for pk in texts if pk not in slots and pk not in about_someone}
    stated = {m.pk: m.content for m in facts}
    return [_spec(draft, texts, stated, label=label) for _, draft in sorted(drafts.items()) if draft.facts]


def _aliases_joined(drafts: dict[str, _Draft], texts: dict[int, str]) -> None:
    """A subject's other name stated in one of its facts is an alias, and the subject read by that name
    (with the same relation, or none) is the same one."""
    for key, draft in list(drafts.items()):
        if key not in drafts or not draft.name or draft.kind not in (SubjectKind.PERSON, SubjectKind.PET):
            continue
        for pk in sorted(draft.facts):
            for pattern in _ALIAS_STATEMENTS:
                for found in pattern.finditer(texts[pk]):
                    alias = found.group("alias")
                    if alias.casefold() == draft.name:
                        continue
                    draft.aliases.add(alias)
                    for other in (_person_key(draft.relation, alias.casefold()), _person_key("", alias.casefold())):
                        if other != key and other in drafts:
                            joined = drafts.pop(other)
                            draft.facts |= joined.facts
                            draft.stated = joined.stated | draft.stated


def _mentions_by_name(drafts: dict[str, _Draft], texts: dict[int, str], *, person: str) -> None:
    """A fact naming a subject mentions it, when no other subject (nor the person) goes by that name."""
    by_name: dict[str, set[str]] = {}
    for key, draft in drafts.items():
        for name in {draft.name, *(alias.casefold() for alias in draft.aliases)}:
            if len(name) >= 2 and name != person.casefold():
                by_name.setdefault(name, set()).add(key)
    for name, keys in by_name.items():
        if len(keys) != 1:
            continue
        draft = drafts[next(iter(keys))]
        draft.facts |= {
            pk for pk, text in texts.items() if _occurs(name, text) and not _someone_else(name, text, draft)
        }


def _someone_else(name: str, text: str, draft: _Draft) -> bool:
    """Whether ``text`` calls someone of ``name`` by another relation than ``draft``'s ("friend Lily" is not the
    daughter Lily): sharing a first name is no evidence of being the same one."""
    for found in re.finditer(re.escape(name), text, re.I):
        before = _WORD_BEFORE.search(text[: found.start()])
        if before is None:
            continue
        word = before.group(1)
        words = [word, *(word[-n:] for n in range(1, len(word)) if not word.isascii())]  # 「的朋友」 ends in 朋友
        for candidate in words:
            read = relation_word_read(candidate)
            if (read is not None and read != draft.relation) or candidate.casefold() in _OTHER_RELATIONS:
                return True
    return False


def _spec(draft: _Draft, texts: dict[int, str], stated: dict[int, str], *, label: str) -> SubjectSpec:
    """``draft`` as a subject, named as its facts (``stated``: as written; ``texts``: as read) write its name."""
    said = [texts[pk] for pk in sorted(draft.facts)]
    if draft.key == SELF_KEY:
        name = label
        aliases = [label]
    else:
        name = _as_stated(draft.name, [stated[pk] for pk in sorted(draft.facts)]) if draft.name else ""
        words = relation_words(draft.relation) if draft.kind in (SubjectKind.PERSON, SubjectKind.PET) else ()
        aliases = [name, *sorted(draft.aliases), *(w for w in words if any(_occurs(w, t) for t in said))]
    return SubjectSpec(
        key=draft.key,
        kind=draft.kind,
        relation=draft.relation,
        name=name,
        aliases=tuple(dict.fromkeys(a for a in aliases if a)),
        memory_ids=frozenset(draft.facts),
        stated=dict(draft.stated),
    )


def subjects(ctx: StepContext) -> dict:
    """Build every person's subjects from their active facts, then write the profiles of those with enough."""
    facts_by_person: dict[int, list[SemanticMemory]] = {}
    for memory in active_facts().filter(person__isnull=False).select_related("person").order_by("id"):
        facts_by_person.setdefault(memory.person_id, []).append(memory)
    built = set(Subject.objects.values_list("person_id", flat=True)) | set(facts_by_person)
    totals = {"persons": 0, "subjects": 0, "created": 0, "updated": 0, "removed": 0, "mentions": 0}
    totals |= {"mentions_added": 0, "mentions_dropped": 0}
    failures: list[dict] = []
    profiles: dict[str, int] = {}
    for person in Person.objects.filter(pk__in=built).order_by("pk"):
        facts = facts_by_person.get(person.pk, [])
        specs = subjects_read(person=person, facts=facts)
        synced = subjects_sync(person=person, specs=specs, retire_reason=RETIRED)
        totals["persons"] += bool(facts)
        totals["subjects"] += len(specs)
        totals["mentions"] += sum(len(spec.memory_ids) for spec in specs)
        for name in ("created", "updated", "removed", "mentions_added", "mentions_dropped"):
            totals[name] += getattr(synced, name)
        written = subject_profiles_write(ctx, person=person, subjects=list(synced.subjects.values()))
        for action, count in written.counts.items():
            profiles[action] = profiles.get(action, 0) + count
        failures += written.failures
    # Ids and counts only: the step's output is an audit row, not a place for names.
    output: dict = {**totals, "profiles": profiles}
    if failures:
        output["failures"] = failures
    return output
