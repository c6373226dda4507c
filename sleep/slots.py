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
"""

from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass, replace

from anima.core.llm.schema import schema_object, schema_string
from anima.core.segmentation import word_tags
from anima.core.text import is_chinese, without_addresses
from temporal.selectors import person_label

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


# ---------------------------------------------------------------- numbers and values

_CN_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}


_EN_UNITS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen"
).split()
_EN_TENS = {
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
# A number spelled in English words, 0-99: "seven", "twenty-one", "forty two".
EN_NUMBER_WORDS = rf"(?:(?:{'|'.join(_EN_TENS)})(?:[- ](?:{'|'.join(_EN_UNITS[1:10])}))?|{'|'.join(_EN_UNITS)})"
# How many of a thing someone has ("a", "seven", "12"), and the verbs that say they have it.
EN_COUNT = rf"(?:an?|{EN_NUMBER_WORDS}|\d+)"
EN_HAVE = r"(?:have|has|'ve got|have got|has got|own|owns)"


def _en_number(text: str) -> int | None:
    words = re.split(r"[- ]", text.casefold())
    if len(words) == 1 and words[0] in _EN_UNITS:
        return _EN_UNITS.index(words[0])
    if words[0] in _EN_TENS and (len(words) == 1 or (len(words) == 2 and words[1] in _EN_UNITS[1:10])):
        return _EN_TENS[words[0]] + (_EN_UNITS.index(words[1]) if len(words) == 2 else 0)
    return None


def number_value(text: str) -> str:
    """ "8", "八", "二十八", "６", "eight", "twenty-eight" → "8" / "28" / "6" / "8" / "28"; other text unchanged.

    One spelling for a number whatever the language it was said in: "two cats" and later "2 cats" restate.
    """
    text = text.strip()
    if text.isdigit():
        return str(int(text))
    if (spelled := _en_number(text)) is not None:
        return str(spelled)
    if text and all(ch in _CN_DIGITS or ch in "十百" for ch in text):
        total, current = 0, 0
        for ch in text:
            if ch == "百":
                total += (current or 1) * 100
                current = 0
            elif ch == "十":
                total += (current or 1) * 10
                current = 0
            else:
                current = _CN_DIGITS[ch]
        return str(total + current)
    return text


_EN_ARTICLES = re.compile(r"^(?:a|an|the|some|my|our|his|her|their)\s+", re.I)
_EN_VALUE_TAIL = re.compile(
    r"\s+(?:now|anymore|any more|these days|nowadays|lately|too|as well|though|again|already|actually|instead|"
    r"last \w+|this \w+|next \w+|since .*|for (?:work|years|ages|a while|now|\w+ (?:years|months|weeks)).*|"
    r"\d+ (?:years|months|weeks|days) ago.*|ago|yesterday|today|every .*|each .*|because .*|when .*|"
    r"lol|haha|honestly|btw|at all|really|so much|a lot)$",
    re.I,
)
_ZH_VALUE_TAIL = re.compile(r"(?:了|啦|呢|吧|啊|呀|的|哦|喔|嘛)+$")


def value_normalized(text: str) -> str:
    previous = None
    while previous != text:
        previous = text
        text = text.strip().strip("。.!！?？,，;；:：\"'“”‘’《》「」()（）").strip()
        text = _EN_VALUE_TAIL.sub("", text).strip()
        text = _ZH_VALUE_TAIL.sub("", text).strip()
    text = _EN_ARTICLES.sub("", text)
    return number_value(" ".join(text.split()).casefold())


def head_value(text: str) -> str:
    """The head of a job or place phrase: "nurse at a children's hospital" → "nurse"."""
    head = re.split(
        r"\s+(?:at|in|for|with|from|on|near|outside|by|who|which|that|and)\s+|[,，]", text.strip(), maxsplit=1
    )
    return value_normalized(head[0])


# ---------------------------------------------------------------- English grammar

_EN_RELATIONS = {
    "daughter": "daughter",
    "son": "son",
    "kid": "child",
    "kids": "child",
    "child": "child",
    "children": "child",
    "boy": "son",
    "girl": "daughter",
    "wife": "wife",
    "husband": "husband",
    "partner": "partner",
    "boyfriend": "partner",
    "girlfriend": "partner",
    "fiance": "partner",
    "fiancé": "partner",
    "fiancée": "partner",
    "mum": "mother",
    "mom": "mother",
    "mother": "mother",
    "dad": "father",
    "father": "father",
    "brother": "brother",
    "sister": "sister",
    "grandson": "grandson",
    "granddaughter": "granddaughter",
    "grandma": "grandmother",
    "grandmother": "grandmother",
    "grandpa": "grandfather",
    "grandfather": "grandfather",
    "aunt": "aunt",
    "uncle": "uncle",
    "cousin": "cousin",
    "niece": "niece",
    "nephew": "nephew",
    "cat": "cat",
    "kitten": "cat",
    "dog": "dog",
    "puppy": "dog",
    "rabbit": "rabbit",
    "bunny": "rabbit",
    "hamster": "hamster",
    "parrot": "parrot",
    "bird": "bird",
    "turtle": "turtle",
    "tortoise": "turtle",
    "fish": "fish",
    "horse": "horse",
    "lizard": "lizard",
    "snake": "snake",
}
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
_EN_STATES = {
    "retired": ("status", "retired"),
    "unemployed": ("job", "unemployed"),
    "married": ("marital", "married"),
    "single": ("marital", "single"),
    "divorced": ("marital", "divorced"),
    "engaged": ("marital", "engaged"),
    "widowed": ("marital", "widowed"),
    "pregnant": ("status", "pregnant"),
    "vegetarian": ("diet", "vegetarian"),
    "vegan": ("diet", "vegan"),
    "pescatarian": ("diet", "pescatarian"),
    "lactose intolerant": ("allergy:lactose", "+"),
    "gluten intolerant": ("allergy:gluten", "+"),
    "gluten-free": ("restriction:gluten", "+"),
    "left-handed": ("handedness", "left"),
    "right-handed": ("handedness", "right"),
}
_EN_FREQUENCY = re.compile(
    r"\b(?:every|each)\s+\w+|\b(?:daily|weekly|nightly|monthly|usually|always|often|normally|regularly|"
    r"sometimes|mostly|most (?:days|mornings|evenings|nights|weekends))\b|"
    r"\bon (?:mon|tue|wed|thu|fri|sat|sun)\w*days?\b|"
    r"\b(?:once|twice|three times) a (?:day|week|month)\b|\bat (?:the )?weekends?\b",
    re.I,
)
_EN_HABIT_VERBS = (
    r"play|practi[cs]e|knit|sew|paint|draw|swim|run|jog|cycle|bike|ride|hike|climb|surf|ski|skate|dance|sing|"
    r"cook|bake|garden|read|write|meditate|pray|volunteer|teach|study|go|walk|train|lift|box|fish|row|sail|"
    r"collect|brew|journal|blog|stream|skateboard|golf|do"
)
# Words saying a statement holds now ("these days my favourite band is …"): they leave its slot as it is.
_EN_NOW = (
    r"(?:these days|nowadays|lately|recently|currently|now|right now|just now|at the moment|at present|for now|"
    r"as of (?:now|today)|these past (?:few )?(?:days|weeks|months))"
)


def en_now_dropped(clause: str) -> str:
    """``clause`` without a leading "these days" / "lately" / "now": the fact it states is the same."""
    return re.sub(rf"^{_EN_NOW}\b,?\s*", "", clause, flags=re.I)


_EN_SUBJECT_WORDS = r"I|I'm|I’m|I've|I’ve|I'd|I’d|I'll|I’ll|we|we're|we’re|we've|we’ve"
_EN_NAME = r"[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?"
_NOT_NAMES = frozenset(
    "I He She They We It This That There Here My Our Your His Her Their The A An And But So Or Oh Ok Okay Yes No "
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
    word = word.casefold()
    for form in (word, re.sub(r"ies$", "y", word), re.sub(r"(?<=[^s])s$", "", word)):  # "cats", "puppies"
        if form in _EN_RELATIONS:
            return _EN_RELATIONS[form]
    breed = _EN_BREEDS.search(word)
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


_EN_PREDICATES: tuple[tuple[str, re.Pattern], ...] = tuple(
    (attribute, re.compile(pattern, re.I))
    for attribute, pattern in (
        ("name", r"^(?:name is|'s name is|am called|'m called|go by|call me)\s+(?P<value>[A-Z][\w-]+)"),
        ("email", r"^(?:e-?mail(?: address)?|email)(?:'s| is|:)\s*(?:now\s+)?(?P<value>\S+@\S+?)[.,]?(?:\s|$)"),
        ("phone", r"^(?:phone(?: number)?|number|mobile|cell)(?:'s| is|:)\s*(?P<value>[+\d][\d\s()-]{5,})"),
        ("birthday", r"^birthday(?:'s| is)\s+(?:on\s+)?(?P<value>[^,.;!?]+)"),
        (
            "age",
            r"^(?:am|is|'m|'s|turned|just turned|will be|'ll be|is turning|'s turning|turns)\s+"
            r"(?P<value>\d{1,3})(?!\s*(?:%|percent|km|miles|kg|lbs|minutes|hours|times|o'clock|pm|am|:|\.\d|,\d|-year))",
        ),
        ("age", r"^(?:am|is|'m|'s)\s+(?P<value>\d{1,3})-year-old\b"),
        (
            "age",
            # Spelled out, the number must end the clause ("she's seven", "he turned eight years old"): "is one
            # of my friends" is no age.
            rf"^(?:am|is|'m|'s|turned|just turned|will be|'ll be|is turning|'s turning|turns)\s+"
            rf"(?P<value>{EN_NUMBER_WORDS})(?:\s+years?\s+old)?(?:\s+(?:now|already|today|this year))?\s*[.!?]*\s*$",
        ),
        ("zodiac", r"^(?:was|were)\s+born\s+in\s+the\s+year\s+of\s+the\s+(?P<value>[a-z]+)"),
        (
            "residence",
            r"^(?:now\s+|currently\s+|still\s+)?(?:live|lives|living|am living|'m living|'ve been living|"
            r"reside|resides|am based|'m based|is based|'s based|am staying|'m staying|stay|stays)\s+"
            r"(?:in|at|near|outside|on|by)\s+(?P<value>[^,.;!?]+)",
        ),
        (
            "residence",
            r"^(?:just\s+|finally\s+|recently\s+)?(?:moved|relocated|'ve moved|have moved|'ve relocated|"
            r"has moved|'s moved|(?:am|'m|are|'re|is|'s)\s+(?:moving|relocating|going to move)|"
            r"(?:will|'ll)\s+(?:be moving|move))\s+(?:back\s+)?(?:to|into|over to)\s+(?P<value>[^,.;!?]+)",
        ),
        ("origin", r"^(?:am|'m|is|'s|come|comes|was born)\s+(?:originally\s+)?(?:from|in)\s+(?P<value>[A-Z][^,.;!?]*)"),
        (
            "workplace",
            r"^(?:now\s+|currently\s+|still\s+)?(?:work|works|working|am working|'m working)\s+"
            r"(?:from home\s+)?(?:at|for|in)\s+(?P<value>[^,.;!?]+)",
        ),
        (
            "job",
            r"^(?:now\s+|currently\s+|still\s+|just\s+|recently\s+)?(?:work|works|am working|'m working|"
            r"(?:have\s+|'ve\s+)?(?:started|began|begun) working)\s+as\s+(?:an?\s+)?(?P<value>[^,.;!?]+)",
        ),
        (
            "job",
            # A new job told as news: "just started a new job as a pharmacist", "got a position as a nurse".
            r"^(?:just\s+|recently\s+)?(?:have\s+|'ve\s+)?(?:started|began|begun|got|took|landed|accepted)\s+"
            r"(?:(?:a|my)\s+(?:new\s+|first\s+)?|(?:new|first)\s+)(?:job|position|role)\s+as\s+(?:an?\s+)?"
            r"(?P<value>[^,.;!?]+)",
        ),
        (
            "uses",
            r"^(?:now\s+)?(?:mainly|mostly|mostly just|primarily|usually|mainly just)\s+"
            r"(?:use|uses|work with|works with|"
            r"code in|codes in|write|writes|program in)\s+(?P<value>[^,.;!?]+)",
        ),
        ("job", r"^(?:job is|job's|occupation is)\s+(?:an?\s+)?(?P<value>[^,.;!?]+)"),
        ("job", r"^(?:teach|teaches)\s+(?P<value>[^,.;!?]+)"),
        ("job", r"^(?:am|'m|is|'s)\s+(?:now\s+|still\s+|currently\s+)?(?:an?|the)\s+(?P<value>[^,.;!?]+)"),
        (
            "state",
            r"^(?:am|'m|is|'s)\s+(?:now\s+|still\s+|currently\s+|happily\s+|recently\s+|)(?P<value>"
            + "|".join(re.escape(k) for k in _EN_STATES)
            + r")\b",
        ),
        (
            "allergy",
            r"^(?:am|'m|is|'s)\s+(?:very\s+|severely\s+|badly\s+|really\s+|deathly\s+)?allergic\s+to\s+(?P<value>[^,.;!?]+)",
        ),
        (
            "allergy",
            r"^(?:have|has|'ve got|have got)\s+(?:an?\s+)?(?:severe\s+|bad\s+|mild\s+)?(?P<value>[\w -]+?)\s+allergy",
        ),
        (
            "restriction",
            r"^(?:can't|cannot|can not|don't|do not|doesn't|does not|never|try not to|must not|mustn't|"
            r"shouldn't|am not allowed to|'m not allowed to|is not allowed to)\s+(?:eat|eats|drink|drinks|have|touch|"
            r"stomach|digest|tolerate)\s+(?P<value>[^,.;!?]+)",
        ),
        ("restriction", r"^(?:avoid|avoids|stay away from|stays away from)\s+(?P<value>[^,.;!?]+)"),
        (
            "favourite",
            r"^(?:new\s+|all-time\s+|current\s+|absolute\s+)?(?:favou?rite|fave|favorite)\s+"
            r"(?P<category>[a-z]+(?: show| language)?)"
            rf"(?:\s+{_EN_NOW})?\s+(?:is|are|'s|has to be|would be|has been|has become)\s+(?:now\s+)?"
            r"(?P<value>[^,.;!?]+)",
        ),
        (
            "likes",
            r"^(?:really\s+|absolutely\s+|totally\s+|just\s+|also\s+|actually\s+|still\s+|kind of\s+|"
            r"quite\s+|now\s+|truly\s+)*(?P<verb>like|likes|love|loves|enjoy|enjoys|adore|adores|prefer|prefers|"
            r"am into|'m into|is into|'m obsessed with|am obsessed with|'m a (?:huge |big )?fan of|"
            r"am a (?:huge |big )?fan of|dig)\s+(?P<value>[^,.;!?]+)",
        ),
        (
            "unlikes",
            r"^(?:no longer|don't|do not|doesn't|does not)\s+(?:really\s+)?"
            r"(?:hate|hates|dislike|dislikes|mind|minds)\s+"
            r"(?P<value>[^,.;!?]+)",
        ),
        (
            "dislikes",
            r"^(?:really\s+|absolutely\s+|just\s+|also\s+|still\s+|honestly\s+|actually\s+)*"
            r"(?P<verb>hate|hates|dislike|dislikes|can't stand|cannot stand|can't bear|detest|loathe|"
            r"don't like|do not like|doesn't like|don't really like|don't enjoy|don't care for|"
            r"am not a fan of|'m not a fan of|'m not into|am not into|'m not a|am not a|"
            r"no longer like|no longer love|no longer enjoy)\s+(?P<value>[^,.;!?]+)",
        ),
        (
            "stopped",
            r"^(?:am no longer|'m no longer|no longer|quit|stopped|gave up|have quit|'ve quit|'ve stopped|"
            r"have stopped)\s+(?P<value>[^,.;!?]+?)(?:\s+any\s*more|\s+anymore)?$",
        ),
        (
            "plan",
            r"^(?:am|'m|are|'re|is|'s)\s+(?:planning|going|heading|flying|travelling|traveling|off|"
            r"saving up|saving|training|preparing|studying|applying|getting married|moving)\s*"
            r"(?P<value>(?:to|for|on|a|an|up)?\s*[^,.;!?]+)",
        ),
        ("plan", r"^(?:plan|plans|intend|hope|want|am hoping|'m hoping)\s+to\s+(?P<value>[^,.;!?]+)"),
        (
            "event",
            r"^(?:have|has|'ve got|got)\s+(?:an?\s+|my\s+)?(?P<value>[\w -]*?(?:appointment|exam|interview|"
            r"meeting|test|surgery|operation|flight|trip|wedding|party|deadline|concert|match|recital|audition|"
            r"check-?up|presentation|conference)\b[^,.;!?]*)",
        ),
        (
            "learning",
            r"^(?:'ve been|have been|am|'m)\s+(?:learning|studying|taking lessons in|practi[cs]ing)\s+"
            r"(?P<value>[^,.;!?]+)",
        ),
        (
            "habit",
            rf"^(?:usually\s+|always\s+|often\s+|normally\s+|regularly\s+|sometimes\s+|also\s+|still\s+)*"
            rf"(?P<value>(?:{_EN_HABIT_VERBS})(?:s|es)?\b[^,.;!?]*)",
        ),
        (
            "has",
            rf"^{EN_HAVE}\s+(?P<value>{EN_COUNT}\s+[^,.;!?]+)",
        ),
        ("passed", r"^(?:passed away|died)\b(?P<value>[^,.;!?]*)"),
        (
            "achieved",
            r"^(?:just\s+|finally\s+)?(?:passed|aced|finished|completed|graduated from|graduated|won|got promoted|"
            r"got engaged|got married|got the job|got into|got accepted to|got accepted into)\b(?P<value>[^,.;!?]*)",
        ),
    )
)


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
    if match and match.group("who") not in _NOT_NAMES and match.group("who") != name:
        return "", match.group("who"), match.group("rest").strip(), match.group("who")
    return None


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
    for attribute, pattern in _EN_PREDICATES:
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
            attribute, value = _EN_STATES[raw.casefold()]
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
            relation = next((_en_relation(w) for w in re.findall(r"[a-z]+", what) if _en_relation(w)), "")
            if not relation:
                return None
            named = re.search(rf"(?:named|called)\s+({_EN_NAME})", raw)
            count = re.match(rf"({EN_COUNT})\b", what)
            if named and len(en_names(raw[named.start() :])) < 2:  # "two cats named Miso and Tofu" is a count
                return Reading(Slot(relation, named.group(1).casefold(), "exists", "", "+"))
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
        rf"(?:{whose})\s+(?P<favourite>(?:new\s+|current\s+|all-time\s+|absolute\s+)?(?:favou?rite|fave)\s+[a-z]+"
        rf"(?: show| language)?)(?:\s+{_EN_NOW})?$",
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
    restricted = _EN_OBJECT_FIRST.match(clause)
    if restricted:
        thing = _en_thing(restricted.group("value") or restricted.group("value2"))
        return Reading(Slot(SELF, "", "diet", f"no {thing}", "+"))
    subject = _en_subjects(clause, name=name)
    if subject is None:
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


# ---------------------------------------------------------------- Chinese grammar

_ZH_RELATIONS = {
    "女儿": "daughter",
    "闺女": "daughter",
    "儿子": "son",
    "孩子": "child",
    "小孩": "child",
    "宝宝": "child",
    "老婆": "wife",
    "妻子": "wife",
    "媳妇": "wife",
    "太太": "wife",
    "老公": "husband",
    "丈夫": "husband",
    "先生": "husband",
    "男朋友": "partner",
    "女朋友": "partner",
    "对象": "partner",
    "妈妈": "mother",
    "妈": "mother",
    "母亲": "mother",
    "爸爸": "father",
    "爸": "father",
    "父亲": "father",
    "哥哥": "brother",
    "弟弟": "brother",
    "姐姐": "sister",
    "妹妹": "sister",
    "奶奶": "grandmother",
    "外婆": "grandmother",
    "姥姥": "grandmother",
    "爷爷": "grandfather",
    "外公": "grandfather",
    "姥爷": "grandfather",
    "孙子": "grandson",
    "孙女": "granddaughter",
    "外孙": "grandson",
    "外孙女": "granddaughter",
    "猫": "cat",
    "狗": "dog",
    "猫咪": "cat",
    "狗狗": "dog",
    "兔子": "rabbit",
    "仓鼠": "hamster",
    "鹦鹉": "parrot",
    "乌龟": "turtle",
    "金鱼": "fish",
}
_ZH_REL = "|".join(sorted(_ZH_RELATIONS, key=len, reverse=True))
_ZH_PET_WORDS = (
    "柯基|泰迪|金毛|哈士奇|柴犬|拉布拉多|边牧|萨摩耶|比熊|博美|橘猫|布偶|英短|美短|狸花猫|蓝猫|暹罗|加菲|"
    + "|".join(
        k for k, v in _ZH_RELATIONS.items() if v in {"cat", "dog", "rabbit", "hamster", "parrot", "turtle", "fish"}
    )
)
_ZH_NUM = r"[零一二两三四五六七八九十百\d]+"
_ZH_CATEGORIES = {
    "电影": "film",
    "片子": "film",
    "乐队": "band",
    "歌手": "singer",
    "明星": "artist",
    "歌": "song",
    "歌曲": "song",
    "专辑": "album",
    "书": "book",
    "小说": "book",
    "作家": "author",
    "电视剧": "show",
    "剧": "show",
    "综艺": "show",
    "动漫": "show",
    "颜色": "colour",
    "菜": "food",
    "食物": "food",
    "水果": "fruit",
    "零食": "snack",
    "饮料": "drink",
    "游戏": "game",
    "运动": "sport",
    "球队": "team",
    "城市": "city",
    "地方": "place",
    "动物": "animal",
    "花": "flower",
    "季节": "season",
    "餐厅": "restaurant",
    "语言": "language",
    "编程语言": "language",
    "演员": "actor",
    "导演": "director",
}
_ZH_CAT = "|".join(sorted(_ZH_CATEGORIES, key=len, reverse=True))
# Occupation nouns end in these (老师, 程序员, 医生, 护士, 会计, 司机, 策划, 老板 …).
_ZH_JOB_END = re.compile(
    r"(?:师|员|生|家|手|工|长|经理|老板|士|司机|会计|策划|主播|博主|模特|编辑|记者|总监|主管|专员|顾问|"
    r"代购|店主|负责人|保安|保姆|厨子|木匠|农民|警察|军人|设计|运营|产品|开发|HR|hr|助理)$"
)
_ZH_FREQUENCY = re.compile(
    r"每(?:天|周|週|晚|个?月|年|周末|个周末|天早上|天晚上|次)|平时|经常|常常|一般|通常|总是|周[一二三四五六日末天]|天天|偶尔|习惯"
)
_ZH_HEDGE = re.compile(
    r"如果|假如|要是|是不是|吗|呢？|？|\?|觉得我|你觉得|我觉得|可能会|不知道|朋友|同事|别人|有人|听说"
)
_ZH_TIME_LEAD = re.compile(
    r"^(?:(?:明年|今年|去年|下个?月|上个?月|这个?月|下周[一二三四五六日末天]?|上周[一二三四五六日末天]?|这周[一二三四五六日末天]?|"
    r"周[一二三四五六日末天]|星期[一二三四五六日天]|明天|后天|昨天|今天|前天|最近|现在|目前|以后|后来|上周|下周|刚才|刚刚|"
    r"这些天|这几天|这阵子|这段时间|这些日子|这两年|这几年|近来|近期|如今|眼下|当下|"
    r"\d+月\d+[日号]?|[一二三四五六七八九十]+月[一二三四五六七八九十]+[日号]?)\s*)+"
)
_ZH_LEADING = re.compile(
    r"^(?:但是|但|不过|而且|其实|所以|对了|顺便说一下|顺便记一下|顺便|说实话|老实说|跟你说个事|跟你说|告诉你|嗯+|哈+|"
    r"好吧|好的|唉|哎|诶|啊|呃|另外|还有|然后|总之|一是|二是|三是|话说|说起来|对|是的|没错|因为|"
    # a lead-in announcing news (「告诉你个好消息」, 「你猜怎么着」) says nothing itself
    r"(?:告诉你|跟你说|和你说|给你说)?(?:(?:一?个|件)(?:好|大|坏|新)?(?:消息|喜讯|事儿?)|(?:好|大|新)?(?:消息|喜讯))|"
    r"有(?:一?个|件)(?:好|大|新)?(?:消息|喜讯|事儿?)|官宣|你猜怎么着|猜猜怎么着|猜猜看)+[，,、！!：:]?"
)


def zh_names(text: str) -> list[str]:
    """The names a list gives (「叫咪咪和豆豆」, 「分别叫大黄、小黑」, 「咪咪和豆豆」); [] when it is anything else.

    Bare names need two or more, and none a relation or pet word (「猫和狗」 names nobody)."""
    named = re.match(r"^(?:分别|都)?(?:叫做|叫|名叫|名字叫|名字是|名字分别是)", text)
    parts = re.split(r"[和跟与、]", text[named.end() :] if named else text)
    if not named and len(parts) < 2:
        return []
    words = re.compile(rf"(?:{_ZH_REL}|{_ZH_PET_WORDS})$")
    fine = all(re.fullmatch(r"[\u4e00-\u9fff]{1,4}|[A-Za-z][a-z]+", p) and not words.match(p) for p in parts)
    return parts if fine else []


def _zh_thing(text: str) -> str:
    text = re.split(r"[，,；;。！!？?]|因为|所以|但是|不过|一.就", text)[0]
    text = re.sub(r"^(?:吃|喝|碰|用|玩|看|听|去|做|抽|吸)", "", text)
    return value_normalized(text)[:12]


_ZH_PREDICATES: tuple[tuple[str, re.Pattern], ...] = tuple(
    (attribute, re.compile(pattern))
    for attribute, pattern in (
        ("name", r"^(?:叫|名字叫|名字是|的名字是|的名字叫)\s*(?P<value>[\w\u4e00-\u9fff]{1,12})"),
        (
            "email",
            r"^(?:的)?(?:新)?(?:邮箱|电子邮箱|邮件地址|email|Email|E-mail)(?:地址)?(?:是|：|:)\s*(?P<value>\S+@[\w.-]+\w)",
        ),
        ("phone", r"^(?:的)?(?:新)?(?:电话|手机|手机号|电话号码|手机号码)(?:是|：|:)\s*(?P<value>[+\d][\d\s-]{5,})"),
        ("birthday", r"^(?:的)?生日(?:是|在)\s*(?P<value>[^，,。；;！!？?]+)"),
        (
            "age",
            rf"^(?:今年|已经|都|刚|刚刚|上个月|这个月|昨天|前天|今天|现在)*(?:满|过了)?\s*(?P<value>{_ZH_NUM})\s*(?:周)?岁",
        ),
        ("age", rf"^(?:今年|已经|现在)?是?\s*(?P<value>{_ZH_NUM})\s*(?:周)?岁"),
        ("zodiac", r"^(?:是)?属(?P<value>[鼠牛虎兔龙蛇马羊猴鸡狗猪])"),
        ("age", rf"^(?:今年|已经|都|现在)*(?:满)?(?P<value>{_ZH_NUM})了$"),
        (
            "origin",
            r"^(?:老家|家乡|出生在|出生于|老家在|老家是)\s*(?:是|在)?\s*(?P<value>[\u4e00-\u9fff]{2,6}?)(?:的|人|$|[，,。])",
        ),
        ("origin", r"^是\s*(?P<value>[\u4e00-\u9fff]{2,3})人$"),
        ("job", r"^(?:现在|目前)?的?(?:工作|职业)(?:是|为)\s*(?:一名|一个|个)?(?P<value>[^，,。；;！!？?]+)"),
        (
            "job",
            r"^(?:现在|目前|还|还是|一直|也)*(?:在|给)[^，,。；;]{1,16}?(?:当|做|干|(?=开))\s*(?P<value>[^，,。；;！!？?了]{1,12})",
        ),
        (
            "job",
            r"^(?:现在|目前|还|还是|一直|也)*在?(?:当|做|干)(?:了)?\s*(?:一名|一个|名)?(?P<value>[^，,。；;！!？?了]{1,10})",
        ),
        ("job", r"^(?:是|是个|是一名|是一个)?(?P<value>(?:开|做|干|搞)[^，,。；;！!？?]{1,8})的$"),
        # 「是护士」 is a job, 「是东北人」 where the person comes from
        (
            "job_or_origin",
            r"^(?:现在|目前|还|还是|一直|也)*是\s*(?:一名|一个|一位|个|名)?(?P<value>[^，,。；;！!？?]{1,10})$",
        ),
        (
            "uses",
            r"^(?:平时|现在|一般|日常|工作中|工作上)*(?:主要|基本|一般|平时|大多|多半)(?:都|还是)?(?:用|写|使用)\s*(?P<value>[A-Za-z][\w.+#-]*|[\u4e00-\u9fff]{2,8})",
        ),
        ("workplace", r"^(?:现在|目前|还|一直|也)*在\s*(?P<value>[^，,。；;！!？?]{2,16}?)(?:工作|上班|任职|实习)"),
        (
            "residence",
            r"^(?:现在|目前|一直|还|也|都)*(?:住在|住|定居在|定居|生活在)\s*(?P<value>[\u4e00-\u9fffA-Za-z]{2,12}?)"
            r"(?:生活|住|定居|$|[，,。]|的|那边|这边|附近|市|区)",
        ),
        (
            "residence",
            r"^(?:已经|刚|刚刚|上周|上个月|最近|去年|今年|要|就要|快要|马上|即将|将)*"
            r"(?:搬到|搬去|搬回到?|搬家到|搬家去|移居到?|移民到|移民去|迁到|调到)\s*(?P<value>[\u4e00-\u9fffA-Za-z]{2,8}?)"
            r"(?:了|去|来|住|工作|生活|$|[，,。])",
        ),
        (
            "study",
            r"^(?:现在|目前|还|也)*在\s*(?P<value>[^，,。；;！!？?]{0,10}?(?:读|上)(?:大学|研究生|研|博|博士|高中|初中|小学|书|学))",
        ),
        ("study", r"^(?:读|上)(?P<value>(?:大|高|初)[一二三四]|(?:小学|初中|高中|大学)?[一二三四五六]年级)"),
        ("allergy", r"^(?:对|吃)\s*(?P<value>[^，,。；;！!？?]{1,10}?)\s*(?:严重|有点|有些|特别|非常)?过敏"),
        ("allergy", r"^(?P<value>[\u4e00-\u9fff]{1,6})过敏"),
        ("diet", r"^(?:是)?(?P<value>素食主义者|素食者|吃素的|吃素|纯素|清真)"),
        (
            "restriction",
            r"^(?:从来|从)?(?:不|不能|不敢|不可以|没法|不太能|不怎么|戒了|忌口|忌)\s*(?P<verb>吃|喝|碰|抽|吸)\s*(?P<value>[^，,。；;！!？?]{1,10})",
        ),
        (
            "favourite",
            # 「最爱听的乐队」 names the kind with a verb; a kind not listed is its own word (「组合」)
            rf"^(?:现在|目前|一直)?最(?:喜欢|爱|喜爱)(?:听|看|吃|喝|玩|读|用|去)?的(?P<category>{_ZH_CAT}|[\u4e00-\u9fff]{{1,4}}?)"
            r"(?:现在|目前|已经|也|最近|如今)?(?:是|换成|变成|改成|成了)(?:了)?\s*(?P<value>[^，,。；;！!？?]+)",
        ),
        (
            "unlikes",
            r"^(?:现在|已经|也)*(?:不再|不|没那么|没有那么)(?:讨厌|怕|害怕|反感|烦)\s*(?P<value>[^，,。；;！!？?]{1,12})",
        ),
        (
            "dislikes",
            r"^(?:现在|一直|也|都|还是|还|真的|特别|非常|很|超|最|真|好)*(?:不喜欢|讨厌|受不了|不爱|烦|怕|害怕|反感|不感冒)\s*(?P<value>[^，,。；;！!？?]{1,12})",
        ),
        (
            "likes",
            r"^(?:现在|一直|也|都|还是|还|真的|特别|非常|很|超|最|挺|蛮|更|超级|平时)*(?:喜欢|爱|热爱|喜爱|迷上了|迷上|爱上了|爱上|沉迷)\s*(?P<value>[^，,。；;！!？?]{1,12})",
        ),
        (
            "stopped",
            r"^(?:已经|现在)?(?:不再|戒了|不|没再)(?P<value>(?:开|做|干|弹|打|玩|跑|去|练|学|抽|喝)[^，,。；;！!？?]{1,10})了",
        ),
        ("plan", r"^(?:打算|计划|准备|想要|决定|要去|要|会去|报名了?|约了)\s*(?P<value>[^，,。；;！!？?]{2,20})"),
        (
            "event",
            r"^有(?:个|一个|一场|场)?\s*(?P<value>[^，,。；;！!？?]{0,10}(?:考试|面试|会议|手术|复查|体检|约会|婚礼|比赛|演出|航班|出差|旅行|答辩))",
        ),
        ("event", r"^的?(?P<value>预产期|婚期|考试|面试|手术|婚礼|答辩)(?:是|在)\s*(?P<date>[^，,。；;！!？?]+)"),
        (
            "has",
            rf"^(?:养了|养着|养|有|家里有)\s*(?P<value>(?:{_ZH_NUM}|几)?\s*(?:个|只|条|位|头)?\s*(?:{_ZH_REL}|{_ZH_PET_WORDS}))"
            r"(?:[，,]?\s*(?:叫|名叫|名字叫)\s*(?P<pname>[\u4e00-\u9fffA-Za-z]{1,6}))?",
        ),
        (
            "habit",
            r"^(?P<freq>(?:每[天周晚月年个早上晚周末次]{1,4}|平时|经常|常常|一般|通常|总是|周[一二三四五六日末天]|天天|偶尔)*)"
            r"(?:都|也|还)*(?P<value>[^，,。；;！!？?]{2,14})",
        ),
        ("passed", r"^(?:去世|过世|走了)(?P<value>)"),
        (
            "achieved",
            r"^(?P<value>[^，,。；;！!？?]{0,8}?(?:通过|考过|考上|拿到|毕业|升职|结婚|订婚|录取|中奖)了[^，,。；;！!？?]{0,12})",
        ),
        (
            "achieved",
            r"^(?P<value>(?:通过了|考过了|考上了|拿到了|毕业了|升职了|结婚了|订婚了|录取了|中了)[^，,。；;！!？?]{0,12})",
        ),
    )
)


def _zh_subject(clause: str, *, name: str) -> tuple[str, str, str] | None:
    """(subject, subject name, rest) at the start of a Chinese clause, or None."""
    # The household speaks for the person too: 「我们全家搬到成都」 is where they live.
    own = f"|{re.escape(name)}(?:他们|家)?" if name else ""
    household = f"(?:我们|咱们|咱|我{own})?(?:全家人?|一家(?:[三四五六七]口)?人?|一家子)|我和家人|我跟家人"
    selves = f"{household}|我们家|咱们家|咱家|我家|我们|咱们|我{own}"
    match = re.match(rf"^(?:{selves})\s*(?:的)?\s*(?P<rel>{_ZH_REL}|{_ZH_PET_WORDS})(?P<rest>.*)$", clause)
    if match:
        rel = match.group("rel")
        relation = _ZH_RELATIONS.get(rel) or ("dog_or_cat:" + rel)
        rest = match.group("rest").strip()
        named = re.match(
            r"^(?:叫|名叫|名字叫|名字是|的名字是)\s*(?P<n>[\u4e00-\u9fffA-Za-z]{1,6}?)"
            rf"(?=[，,]|今年|已经|在|是|也|$|{_ZH_NUM}岁)",
            rest,
        )
        if named:
            after = rest[named.end() :].lstrip("，, ")
            return relation, named.group("n"), after or f"叫{named.group('n')}"
        # 「我女儿小雨属虎」: a name right after the relation, before what is said about them
        bare = re.match(
            rf"^\s*(?P<n>[\u4e00-\u9fff]{{2,3}}?|[A-Z][a-z]+)\s*(?=属|今年|已经|在|是|也|满|{_ZH_NUM}岁)", rest
        )
        if (
            bare
            and not _ZH_TIME_LEAD.match(bare.group("n"))
            and not re.match(r"^(?:也|都|还|就|在|是)", bare.group("n"))
        ):
            return relation, bare.group("n"), rest[bare.end() :].strip()
        return relation, "", rest
    match = re.match(rf"^(?:{selves})(?P<rest>.*)$", clause)
    if match:
        return SELF, "", match.group("rest").strip()
    return None


@functools.lru_cache(maxsize=1024)
def _zh_place_like(value: str) -> bool:
    """Whether 「是 X 人」's X can be a place: 「好人」「个好人」 say what someone is like, not where they are from."""
    # An adjective, a numeral or a measure word (jieba's a*, m, q tags) is no place.
    return bool(value) and not any(flag.startswith("a") or flag in {"m", "q"} for _, flag in word_tags(value))


def _zh_reading(subject: str, sub_name: str, rest: str) -> Reading | None:
    rest = _ZH_TIME_LEAD.sub("", rest).strip()
    for attribute, pattern in _ZH_PREDICATES:
        match = pattern.search(rest)
        if not match:
            continue
        raw = match.group("value")
        key, value = "", ""
        if attribute == "name":
            if subject == SELF:
                return Reading(Slot(SELF, "", "name", "", value_normalized(raw)))
            return Reading(Slot(subject, raw, "name", "", raw))
        if attribute in {"email", "phone", "birthday", "origin", "workplace", "study", "uses", "zodiac"}:
            value = value_normalized(raw)
            if attribute == "origin" and not _zh_place_like(value):
                continue
        elif attribute == "age":
            value = number_value(raw)
        elif attribute == "residence":
            value = value_normalized(re.sub(r"(?:市|省|区)$", "", raw))[:4]
        elif attribute in {"job", "job_or_origin"}:
            value = value_normalized(re.sub(r"^(?:一名|一个|一位|个|名)", "", raw))
            if not value or not (_ZH_JOB_END.search(value) or re.match(r"^(?:开|做|干|搞|当)", value) or "的" in raw):
                if attribute == "job_or_origin" and value.endswith("人") and _zh_place_like(value[:-1]):
                    return Reading(Slot(subject, sub_name, "origin", "", value[:-1]))
                continue
            attribute, value = "job", re.sub(r"^(?:当|做|干)", "", value)
        elif attribute in {"allergy", "restriction"}:
            key, value = _zh_thing(raw), "+"
            if not key:
                continue
            if attribute == "restriction":
                attribute, key = "diet", "不" + match.group("verb") + key
        elif attribute == "diet":
            attribute, value = "diet", "vegetarian"
        elif attribute == "favourite":
            category = match.group("category")
            attribute, value = f"favourite:{_ZH_CATEGORIES.get(category, category)}", value_normalized(raw)
        elif attribute == "unlikes":
            attribute, key, value = "likes", _zh_thing(raw), "0"
        elif attribute in {"likes", "dislikes"}:
            key = _zh_thing(raw)
            if not key or key in {"你", "这个", "那个", "他", "她", "它", "这样", "那样"}:
                return None
            value = "-" if attribute == "dislikes" else "+"
            attribute = "likes"
        elif attribute == "stopped":
            attribute, key, value = "activity", _zh_thing(raw), "no"
        elif attribute == "plan":
            attribute, key, value = "activity", _zh_thing(raw), "+"
        elif attribute == "event":
            date = match.groupdict().get("date")
            attribute, key, value = "event", _zh_thing(raw), value_normalized(date) if date else "+"
        elif attribute == "has":
            count = re.match(rf"({_ZH_NUM}|几)", raw)
            word = re.search(rf"({_ZH_REL}|{_ZH_PET_WORDS})", raw).group(1)
            relation = _ZH_RELATIONS.get(word) or ("dog_or_cat:" + word)
            if match.group("pname") and len(zh_names(match.group("pname"))) < 2:  # 「叫咪咪和豆豆」 is a count
                return Reading(Slot(relation, match.group("pname"), "name", "", match.group("pname")))
            return Reading(Slot(SELF, "", f"count:{relation}", "", number_value(count.group(1)) if count else "1"))
        elif attribute == "habit":
            if not match.group("freq") and not re.match(r"^会(?:弹|打|拉|吹|说|讲|做|画|写|游|跳|唱|下)", raw):
                continue
            attribute, key, value = "activity", _zh_thing(re.sub(r"^(?:会|在)?去?", "", raw)), "+"
        elif attribute == "passed":
            attribute, value = "alive", "no"
        elif attribute == "achieved":
            attribute, key, value = "event", value_normalized(raw), "done"
        return Reading(Slot(subject, sub_name, attribute, key, value))
    return None


def zh_read(clause: str, *, name: str = "", subject_hint: tuple[str, str] | None = None) -> Reading | None:
    """The fact one Chinese clause states about the person (``name`` also stands for 我), or None."""
    clause = clause.strip().rstrip("。！!；;")
    if not clause or _ZH_HEDGE.search(clause):
        return None
    clause = _ZH_TIME_LEAD.sub("", clause)
    restricted = re.match(
        r"^(?:医生|大夫)(?:不让|不许|叫我别|让我别|让我少|叫我少|要我少|要我别)我?(吃|喝|碰)太?(.{1,8})$", clause
    )
    if restricted:
        return Reading(Slot(SELF, "", "diet", "不" + restricted.group(1) + _zh_thing(restricted.group(2)), "+"))
    # 「五月天是我最喜欢的乐队」 says the same as 「我最喜欢的乐队是五月天」
    whose = f"我|我们|{re.escape(name)}" if name else "我|我们"
    inverted = re.match(
        r"^(?P<value>(?!这|那|它|他|她|哪|谁|什么)[^，,]{1,12}?)(?:现在|如今|已经|也|一直)?(?:是|成了|成为了?|变成了?)"
        rf"(?P<whose>{whose})(?:现在|目前|最近|如今)?(?P<favourite>最(?:喜欢|爱|喜爱)(?:听|看|吃|喝|玩|读|用|去)?的"
        r"[\u4e00-\u9fff]{1,4})$",
        clause,
    )
    if inverted:
        clause = f"{inverted.group('whose')}{inverted.group('favourite')}是{inverted.group('value')}"
    subject = _zh_subject(clause, name=name)
    if subject is None:
        named = re.match(
            rf"^(?P<who>[\u4e00-\u9fff]{{2,3}}?)(?P<rest>(?:今年|已经|上个月|刚|都|也|还)*(?:满|过了)?{_ZH_NUM}岁.*)$",
            clause,
        )
        if named and subject_hint is None and not re.match(r"^(?:他|她|它|这|那|你|今|明|去|每)", named.group("who")):
            return _zh_reading("", named.group("who"), named.group("rest"))
        if re.match(r"^(?:他|她|它)", clause) and subject_hint:
            return _zh_reading(subject_hint[0], subject_hint[1], clause[1:])
        return None
    return _zh_reading(*subject)


def chinese(text: str) -> bool:
    """Whether a statement is Chinese, judged without its e-mail addresses and links."""
    return is_chinese(without_addresses(text))


# A deep-sleep round reads the slot of each active memory in several of its passes; a reading depends on the
# text and the name only, and a Slot is frozen.
@functools.lru_cache(maxsize=8192)
def slot_read(text: str, *, name: str = "") -> Slot | None:
    """The slot a stored fact fills, read with the person's ``name`` standing for the first person."""
    reader = zh_read if chinese(text) else en_read
    first = re.split(r"(?<=[。！？!?；;])|(?<=\.)\s+|[，,](?=\s*(?:and|but|so)\b)", text.strip())[0]
    reading = reader(first, name=name)
    return reading.slot if reading else None


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
