"""The English slot grammar: a subject (the person, a relative or pet, optionally named), then one predicate
per attribute."""

from __future__ import annotations

import re
from dataclasses import dataclass

from anima.core.relations import relation_en_read
from sleep.slots._english_predicates import EN_NOW, EN_PREDICATES, EN_STATES
from sleep.slots._slot import SELF, Slot
from sleep.slots._values import (
    EN_ACQUIRED,
    EN_COUNT,
    head_value,
    number_value,
    value_normalized,
)

# ---------------------------------------------------------------- English grammar

# Breeds name a dog or a cat without saying which.
_EN_BREEDS = re.compile(
    r"\b(retriever|labrador|lab|poodle|corgi|terrier|spaniel|beagle|bulldog|collie|husky|shepherd|dachshund|"
    r"pug|chihuahua|greyhound|whippet|schnauzer|shiba|tabby|siamese|persian|ragdoll|maine coon|sphynx)\b",
    re.I,
)
_EN_CATEGORIES = {
    "movie": "film",
    "film": "film",
    "band": "band",
    "group": "band",
    "singer": "singer",
    "artist": "artist",
    "musician": "artist",
    "song": "song",
    "album": "album",
    "book": "book",
    "novel": "book",
    "author": "author",
    "writer": "author",
    "show": "show",
    "series": "show",
    "tv show": "show",
    "color": "colour",
    "colour": "colour",
    "food": "food",
    "dish": "food",
    "meal": "food",
    "drink": "drink",
    "game": "game",
    "sport": "sport",
    "team": "team",
    "city": "city",
    "place": "place",
    "animal": "animal",
    "flower": "flower",
    "season": "season",
    "restaurant": "restaurant",
    "language": "language",
    "programming language": "language",
    "podcast": "podcast",
    "actor": "actor",
    "actress": "actor",
    "director": "director",
    "fruit": "fruit",
    "snack": "snack",
    "cuisine": "cuisine",
}
# Words that follow "I'm a …" without naming an occupation.
_EN_NOT_JOBS = frozenset(
    "bit little lot fan huge big mess wreck night morning people person bundle sucker fool total complete real "
    "natural born terrible good bad great quick slow light heavy early late".split()
)
_EN_FREQUENCY = re.compile(
    r"\b(?:every|each)\s+\w+|\b(?:daily|weekly|nightly|monthly|usually|always|often|normally|regularly|"
    r"sometimes|mostly|most (?:days|mornings|evenings|nights|weekends))\b|"
    r"\bon (?:mon|tue|wed|thu|fri|sat|sun)\w*days?\b|"
    r"\b(?:once|twice|three times) a (?:day|week|month)\b|\bat (?:the )?weekends?\b",
    re.I,
)


def en_now_dropped(clause: str) -> str:
    """``clause`` without a leading "these days" / "lately" / "now": the fact it states is the same."""
    return re.sub(rf"^{EN_NOW}\b,?\s*", "", clause, flags=re.I)


_EN_SUBJECT_WORDS = r"I|I'm|I’m|I've|I’ve|I'd|I’d|I'll|I’ll|we|we're|we’re|we've|we’ve"
_EN_NAME = r"[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?"
_NOT_NAMES = frozenset(
    "I He She They We It Its This That There Here My Our Your His Her Their The A An And But So Or Oh Ok Okay Yes No "
    "Also Just Still Now Today Tomorrow Yesterday Then Well Hey Hi Thanks Thank Sorry Please Maybe What Why How "
    "When Where Who Which Got Big New Funny Quick Honestly Actually Anyway Btw Lol Haha Plus Not Can Do Does Did "
    "Is Are Was Were Will Would Should Could Have Has Had Monday Tuesday Wednesday Thursday Friday Saturday Sunday "
    "January February March April May June July August September October November December".split()
)
# A hedged or hypothetical clause states nothing yet.
_EN_HEDGE = re.compile(
    r"\b(?:not sure|don't know|do not know|wonder|wondering|if I|whether|maybe I|might|should I|could I|would I|"
    r"do you|did you|are you|have you|can you|what if|imagine|pretend|suppose|my friend|friends?\b|someone)\b",
    re.I,
)


@dataclass(frozen=True)
class Reading:
    """One fact read from a clause: its slot, and the memory type its attribute makes it."""

    slot: Slot

    @property
    def memory_type(self) -> str:
        attribute = self.slot.attribute
        if attribute in {"activity", "event"}:
            return "experience"
        return "preference" if attribute.startswith(("likes", "favourite")) else "world"


def _en_relation(word: str) -> str:
    relation = relation_en_read(word)  # "cats", "puppies"
    if relation:
        return relation
    breed = _EN_BREEDS.search(word.casefold())
    return "dog_or_cat:" + breed.group(1).casefold() if breed else ""


def _en_thing(text: str) -> str:
    """What a like / restriction / plan is about: the noun phrase, lightly normalised ("peanuts" → "peanut")."""
    text = re.split(
        r"[,;]|\s+(?:because|but|so|since|which|when|as|and I|, I|more than|than|so much|a lot|like crazy)\b", text
    )[0]
    text = value_normalized(text)
    text = re.sub(r"^(?:to |eating |having |drinking |playing |the |a |an )", "", text)
    words = text.split()
    if words and len(words[-1]) > 3 and words[-1].endswith("s") and not words[-1].endswith("ss"):
        words[-1] = words[-1][:-1]
    return " ".join(words[:4])


_EN_ACTIVITY_LEAD = re.compile(
    r"^(?:(?:go|goes|going|went|for|a|an|the|to|up|training|train|trains|planning|plan|trip|playing|play|plays|"
    r"doing|do|does|practi[cs]ing|practi[cs]e|saving|save|learning|learn|taking|take|some|my|our)\s+)+",
    re.I,
)
_EN_ACTIVITY_TAIL = re.compile(
    r"\s+(?:in|on|at|before|after|while|with|during|every|each|from|near|around|by|this|next)\s.*$", re.I
)


def activity_key(text: str) -> str:
    """What an activity is, as a stable key: "go for a run before work" → "run", 「每周末都去爬山」 stays itself."""
    short = _EN_ACTIVITY_TAIL.sub("", _EN_ACTIVITY_LEAD.sub("", text.strip() + " ").strip())
    return value_normalized(short) or value_normalized(text)


def _en_subjects(clause: str, *, name: str) -> tuple[str, str, str, str] | None:
    """(subject, subject name, rest of the clause, subject text) at the clause start, or None."""
    name_alias = rf"|{re.escape(name)}(?:'s)?" if name else ""
    # "My wife and I moved …" includes the speaker; "my family is moving to …" moves the speaker's household
    # (en_read keeps only where a family lives or comes from).
    me = rf"(?:I|{re.escape(name)})" if name else "I"
    household = re.match(
        rf"^(?P<who>(?:my|our|the{name_alias})\s+(?:whole\s+|entire\s+)?family(?:\s+(?:and|&)\s+{me})?|"
        rf"(?:my|our{name_alias})\s+[a-z]+\s+(?:and|&)\s+{me})\s+(?P<rest>.*)$",
        clause,
        re.I,
    )
    if household:
        return SELF, "", household.group("rest"), household.group("who")
    match = re.match(
        rf"^(?P<who>my|our{name_alias}(?=\s))\s+(?:(?:little|older|younger|big|baby|eldest|oldest|"
        r"youngest|new|two|three|old)\s+)*(?P<rel>(?:golden |black |grey |gray |white |"
        r"ginger |orange |tabby |rescue )?[a-z]+(?: retriever| coon| shepherd)?)\b(?P<rest>.*)$",
        clause,
        re.I,
    )
    if match and (not name or match.group("who").casefold() != name.casefold()):
        relation = _en_relation(match.group("rel").split()[-1])
        if relation:
            rest = match.group("rest").strip()
            pet_name = ""
            named = re.match(rf"^(?:,\s*)?(?:named |called )?({_EN_NAME})\b(?:,)?\s*(.*)$", rest)
            if named and named.group(1) not in _NOT_NAMES:
                pet_name, rest = named.group(1), named.group(2)
            return relation, pet_name, rest, match.group(0)[: len(match.group(0)) - len(match.group("rest"))]
        if match.group("rel").casefold() not in {
            "name",
            "email",
            "e-mail",
            "phone",
            "birthday",
            "job",
            "favourite",
            "favorite",
            "fave",
            "new",
            "number",
            "mobile",
            "occupation",
            "current",
            "all",
            "absolute",
        }:
            return None
        return SELF, "", clause[len(match.group("who")) :].strip(), match.group("who")
    match = re.match(rf"^(?P<who>{_EN_SUBJECT_WORDS}{name_alias})(?P<rest>(?:\s|'|’).*)?$", clause, re.I)
    if match:
        who = match.group("who").replace("’", "'")
        rest = (match.group("rest") or "").strip()
        if "'" in who and not who.endswith("'s"):
            rest = who[who.index("'") :] + " " + rest
        return SELF, "", rest.strip(), who
    match = re.match(rf"^(?P<who>{_EN_NAME})(?P<rest>(?:\s|'s\s).*)$", clause)
    # "He's called Max" is a pronoun with its verb, not a name.
    if match and match.group("who").split("'")[0] not in _NOT_NAMES and match.group("who") != name:
        return "", match.group("who"), match.group("rest").strip(), match.group("who")
    return None


def _en_relation_in(text: str) -> str:
    """The first relative or pet ``text`` names ("a two-year-old beagle" → dog), else ""."""
    return next((_en_relation(w) for w in re.findall(r"[a-z]+", text.casefold()) if _en_relation(w)), "")


def en_acquired(clause: str) -> str:
    """Who an unnamed relative or pet newly had is ("I finally adopted a dog!" → "dog"), else "": no fact by itself
    (``en_read`` reads none), but what "his name is Biscuit" next points at."""
    # "got a cat" with no subject is the speaker's too
    match = re.match(rf"^(?:(?:I|we)\s+)?{EN_ACQUIRED}\s+(?P<what>{EN_COUNT}\s+[^,.;!?]+)", clause, re.I)
    if not match:
        return ""
    # The head of what was had, before any "last week" or "from the shelter": a dog bed is no dog.
    what = re.split(r"\s+(?:today|yesterday|last|this|on|in|from|at|for|with|and)\b", match.group("what"), flags=re.I)
    return _en_relation(what[0].split()[-1])


def en_names(text: str) -> list[str]:
    """The names a list of names gives ("Miso and Tofu", "named Rex, Ace and Bo"); [] when it is anything else."""
    text = re.sub(r"^(?:(?:they're|they are|both)\s+)?(?:named|called)\s+", "", text.strip(), flags=re.I)
    parts = re.split(r"\s*,\s*(?:and\s+|&\s+)?|\s+(?:and|&)\s+", text)
    return parts if all(re.fullmatch(_EN_NAME, p) and p not in _NOT_NAMES for p in parts) else []


def _en_reading(subject: str, sub_name: str, rest: str) -> Reading | None:
    rest = rest.replace("’", "'")
    rest = re.sub(r"^(?:'s|is)\s+name\s+is", "name is", rest)
    rest = re.sub(
        r"^(?:just|finally|also|still|now|actually|really|recently)\s+(?=(?:turned|moved|relocated))", "", rest
    )
    for attribute, pattern in EN_PREDICATES:
        match = pattern.search(rest)
        if not match:
            continue
        raw = match.group("value")
        key = ""
        if attribute == "name":
            if subject == SELF:
                return Reading(Slot(SELF, "", "name", "", value_normalized(raw)))
            return Reading(Slot(subject, raw.casefold(), "name", "", raw.casefold()))
        if attribute == "uses":
            value = _en_thing(raw)
        elif attribute in {"email", "phone", "birthday", "origin", "workplace", "zodiac"}:
            value = head_value(raw) if attribute == "origin" else value_normalized(raw)
        elif attribute == "age":
            value = number_value(raw)
        elif attribute == "residence":
            raw = re.split(r"\s+(?:with|for|because|since|to|when|where|and)\s+", raw)[0]
            places = [p for p in re.findall(rf"{_EN_NAME}(?:\s+{_EN_NAME})*", raw) if p not in _NOT_NAMES]
            value = value_normalized(places[-1] if places else head_value(raw))
        elif attribute == "job":
            value = head_value(raw)
            if (
                not value
                or value.split()[0] in _EN_NOT_JOBS
                or _EN_CATEGORIES.get(value.split()[-1])
                or len(value.split()) > 5
            ):
                if "fan of" in raw:
                    continue
                return None
        elif attribute == "state":
            attribute, value = EN_STATES[raw.casefold()]
            if ":" in attribute:
                attribute, key = attribute.split(":")
        elif attribute in {"allergy", "restriction"}:
            key, value = _en_thing(raw), "+"
            if not key:
                return None
            if attribute == "restriction":
                attribute, key = "diet", f"no {key}"
        elif attribute == "favourite":
            category = _EN_CATEGORIES.get(match.group("category").casefold())
            if not category:
                return None
            attribute, value = f"favourite:{category}", value_normalized(raw)
        elif attribute == "unlikes":
            attribute, key, value = "likes", _en_thing(raw), "0"
        elif attribute in {"likes", "dislikes"}:
            verb = match.group("verb").casefold()
            key = _en_thing(raw)
            if not key or key in {"it", "that", "this", "you", "them", "him", "her", "the idea", "the plan"}:
                return None
            if verb.endswith("a") and attribute == "dislikes":  # "I'm not a coffee person"
                key = _en_thing(re.sub(r"\s+(?:person|fan|guy|girl|drinker|eater)\b.*$", "", raw))
            value = "-" if attribute == "dislikes" else "+"
            attribute = "likes"
        elif attribute == "stopped":
            key, value = _en_thing(re.sub(r"^(?:training for|playing|doing|going to|going)\s+", "", raw)), "no"
            attribute = "activity"
        elif attribute in {"plan", "event", "learning", "habit"}:
            thing = _en_thing(re.sub(r"^(?:to|for|on|up for|a trip to|trip to)\s+", "", raw))
            if attribute == "habit" and not (_EN_FREQUENCY.search(rest) or re.match(r"^(?:play|plays)\s", raw)):
                continue
            key, value = thing, "+"
            attribute = "activity" if attribute in {"plan", "habit", "learning"} else attribute
            if attribute == "activity":
                key = activity_key(key)
        elif attribute == "has":
            what = raw.casefold()
            relation = _en_relation_in(what)
            if not relation:
                return None
            named = re.search(rf"(?:named|called)\s+({_EN_NAME})", raw)
            count = re.match(rf"({EN_COUNT})\b", what)
            if named and len(en_names(raw[named.start() :])) < 2:  # "two cats named Miso and Tofu" is a count
                return Reading(Slot(relation, named.group(1).casefold(), "exists", "", "+"))
            if re.match(EN_ACQUIRED, match.group(0), re.I):
                return None  # "adopted a dog" adds one; how many there are now, it does not say
            counted = "1" if not count or count.group(1) in {"a", "an"} else number_value(count.group(1))
            return Reading(Slot(SELF, "", f"count:{relation}", "", counted))
        elif attribute == "passed":
            attribute, value = "alive", "no"
        elif attribute == "achieved":
            if not raw.strip():
                return None  # "I passed!" says nothing of what
            key = value_normalized(re.sub(r"^(?:just|finally)\s+", "", match.group(0)))
            attribute, value = "event", "done"
        else:
            value = value_normalized(raw)
        return Reading(Slot(subject, sub_name.casefold(), attribute, key, value))
    return None


# "Peanuts are a no-go for me", "my doctor told me to avoid salt": a restriction said object first.
_EN_OBJECT_FIRST = re.compile(
    r"^(?:(?P<value>[\w' -]{2,30}?)\s+(?:is|are|'s)\s+(?:a\s+)?(?:no-go|no go|off[- ]limits|forbidden|not allowed|"
    r"a hard no|poison)\s+for me|(?:my\s+)?doctor\s+(?:told|tells|wants|says|said)\s+(?:me\s+)?(?:to\s+)?"
    r"(?:avoid|cut out|cut down on|stay away from|no)\s+(?P<value2>[^,.;!?]+))",
    re.I,
)


def _en_favourite_first(clause: str, *, name: str) -> str:
    """ "Arctic Monkeys are my favourite band" said as "my favourite band is Arctic Monkeys"; "" for anything else."""
    whose = rf"my|our|{re.escape(name)}'s" if name else "my|our"
    match = re.match(
        r"^(?P<value>(?!(?:it|this|that|these|those|they|he|she|which|what|who)\b)[^,;]{1,40}?)\s+"
        r"(?:is|are|'s|'re|has become|have become|became)\s+(?:now\s+|still\s+|definitely\s+)?"
        rf"(?:{whose})\s+(?P<favourite>(?:new\s+|current\s+|all-time\s+|absolute\s+)?(?:favou?rite|fave|fav)\s+[a-z]+"
        rf"(?: show| language)?)(?:\s+{EN_NOW})?$",
        clause,
        re.I,
    )
    return f"my {match.group('favourite')} is {match.group('value')}" if match else ""


def en_read(clause: str, *, name: str = "", subject_hint: tuple[str, str] | None = None) -> Reading | None:
    """The fact one English clause states about the person (``name`` also stands for "I"), or None.

    ``subject_hint`` (relation, name) stands in for a pronoun subject ("he's 11 now").
    """
    clause = en_now_dropped(clause.strip().rstrip(".!;"))
    if not clause or clause.endswith("?") or _EN_HEDGE.search(clause):
        return None
    inverted = _en_favourite_first(clause, name=name)
    if inverted:
        clause = inverted
    # A fact says it of the person by name ("Peanuts are a no-go for Nina"), as they said it of "me".
    restricted = _EN_OBJECT_FIRST.match(re.sub(rf"\bfor {re.escape(name)}$", "for me", clause) if name else clause)
    if restricted:
        thing = _en_thing(restricted.group("value") or restricted.group("value2"))
        return Reading(Slot(SELF, "", "diet", f"no {thing}", "+"))
    subject = _en_subjects(clause, name=name)
    if subject is None:
        # "Her name is Luna" after "I have a cat": the hinted one's, as "'s name is Luna".
        possessive = re.match(r"(?:his|her|its|their)\s+(?P<rest>\S.*)$", clause, re.I)
        if subject_hint and subject_hint[0] != SELF and possessive:
            return _en_reading(subject_hint[0], subject_hint[1], "'s " + possessive.group("rest"))
        if subject_hint and re.match(r"(?:he|she|they|it)\b", clause, re.I):
            first = clause.split()[0]
            rest = clause[len(first) :].strip()
            if "'" in first:
                rest = first[first.index("'") :] + " " + rest
            return _en_reading(subject_hint[0], subject_hint[1], rest)
        return None
    relation, sub_name, rest, who = subject
    reading = _en_reading(relation, sub_name, rest)
    if reading and re.match(r"^(?:my|the)\b.*family$", who, re.I):
        # "My family lives in …" may be the parents' home, but "my family is moving to …" moves the speaker's
        # household; "our family" and "Maya's family" (how a stored fact words "we") are the speaker's own.
        moving = reading.slot.attribute == "residence" and re.search(r"\b(?:mov|relocat)", rest, re.I)
        if not moving and reading.slot.attribute != "origin":
            return None
    return reading
