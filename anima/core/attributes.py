"""What a question asks of someone: the attributes a fact's slot can hold ("job", "residence", "age"…) that its
words name, in English and Chinese, and whether it asks them of the asker.

Light sleep gives each fact a slot and the nightly subjects step notes, for every fact about a subject, the
attribute it states. Recall reads a question with these words ("what do I do for a living?", 「我住哪来着？」) to
bring the facts that answer it although they share no word with it ("Maya works as a nurse", 「Leo 住在杭州」). Only
a question counts: "I live in Leeds now" is news, not a question about what is known.

The attribute names are the slot grammar's (``sleep.slots``); a question naming a kind of favourite asks every
``favourite:<kind>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from anima.core.segmentation import text_ruled

FAVOURITE = "favourite"
_JOB = ("job", "workplace")
_LIKES = ("likes", FAVOURITE)
_LEARNING = ("activity", "learning")
_PLANS = ("plan", "event")

# Each cue: a pattern and the attributes it asks. English patterns run on the casefolded text.
_EN_CUES = tuple(
    (re.compile(pattern), attributes)
    for pattern, attributes in (
        (
            r"\b(?:jobs?|occupation|profession|career|employer|company|workplace|office|for a living|line of work"
            r"|work(?:s|ed|ing)?)\b",
            _JOB,
        ),
        (r"\b(?:live[sd]?|(?<!for a )living|based|home|address|reside)\b", ("residence",)),
        (r"\bwhere\b[^.!?]*\bfrom\b|\bhome ?town\b|\bgr[eo]w(?:ing)? up\b|\bwhere\b[^.!?]*\bborn\b", ("origin",)),
        (r"\bhow old\b|\bage\b", ("age",)),
        (r"\bbirthday\b|\bdate of birth\b|\bwhen\b[^.!?]*\bborn\b", ("birthday",)),
        (r"\be-?mail\b", ("email",)),
        (r"\b(?:phone|mobile|cell|number)\b", ("phone",)),
        (r"\ballerg", ("allergy",)),
        (r"\b(?:diet|vegetarian|vegan)\b|\b(?:can't|cannot|can not|don't|do not|shouldn't|mustn't) eat\b", ("diet",)),
        (r"\b(?:like[sd]?|love[sd]?|enjoy(?:s|ed)?|fan of|hobby|hobbies|interests?|passion|favou?rites?)\b", _LIKES),
        (r"\b(?:learn(?:s|t|ed|ing)?|stud(?:y|ies|ying|ied)|lessons?|course|class(?:es)?)\b", _LEARNING),
        (r"\b(?:plans?|planning|planned)\b", _PLANS),
        (r"\b(?:married|single|divorced|engaged)\b", ("marital",)),
        (r"\bname\b|\bcalled\b", ("name",)),
    )
)
_ZH_CUES = tuple(
    (re.compile(pattern), attributes)
    for pattern, attributes in (
        (r"工作|上班|职业|做什么的|干什么的|干啥的|做啥的|哪行|行业|公司|单位", _JOB),
        # 住 but not 「记住」 「忍不住」 「住院」
        (r"(?<!记)(?<!不)住(?!院)|家在|住址|地址", ("residence",)),
        (r"老家|哪里人|哪儿人|哪的人|家乡|来自|长大", ("origin",)),
        (r"几岁|多大|年龄|岁数|多少岁|年纪", ("age",)),
        (r"生日|出生", ("birthday",)),
        (r"邮箱|邮件|电邮|信箱", ("email",)),  # 信箱: Taiwan's word
        (r"电话|手机|号码", ("phone",)),
        (r"过敏", ("allergy",)),
        (r"吃素|素食|忌口|不吃|不能吃", ("diet",)),
        (r"喜欢|爱好|爱吃|爱喝|爱看|爱玩|爱听|兴趣|最爱|偏爱", _LIKES),
        (r"在学|学什么|学习|上课|课程", _LEARNING),
        (r"打算|计划", _PLANS),
        (r"结婚|单身|离婚|订婚", ("marital",)),
        (r"叫什么|叫啥|名字", ("name",)),
    )
)

_EN_QUESTION = re.compile(
    r"^\W*(?:what|what's|whats|where|where's|when|when's|who|who's|which|how|why|do|does|did|is|are|am|was|were|"
    r"can|could|have|has|had)\b|\b(?:remember|remind me|tell me|recall|forgot|forget)\b"
)
_ZH_QUESTION = re.compile(r"吗|呢|什么|啥|哪|几|多少|多大|谁|记得|告诉我|提醒我|怎么")
_EN_WORD = re.compile(r"[a-z]+(?:['’][a-z]+)?")
_EN_SELF = frozenset("i i'm i've i'd i'll my me mine myself we we're our ours us".split())
_EN_OTHERS = frozenset(
    "you you're your yours he he's his him she she's her it it's its they they're their them".split()
)
_ZH_PRONOUN = re.compile(r"我们|咱们|我|咱|俺|你们|你|您|他们|她们|他|她|它")
_ZH_SELF = frozenset("我们 咱们 我 咱 俺".split())
# Where a clause ends: whose attribute is asked is read within the clause that asks it.
_CLAUSE_END = re.compile(r"[.;!?。；！？\n]")


@dataclass(frozen=True)
class Asked:
    """The attributes a question names (``attributes``), and whether it asks them of the asker (``of_self``:
    "where do I live?", 「我多大了？」; not "where does she live?" or 「你住哪？」)."""

    attributes: frozenset[str] = frozenset()
    of_self: bool = False

    def covers(self, attribute: str) -> bool:
        """Whether a fact stating ``attribute`` answers what was asked ("favourite:film" answers a favourite)."""
        return bool(attribute) and (attribute in self.attributes or attribute.split(":")[0] in self.attributes)


NOTHING_ASKED = Asked()


def attributes_asked(text: str) -> Asked:
    """What ``text``, when it is a question, asks: "what do I do for a living?" asks job and workplace of the asker,
    「我女儿几岁了？」 asks an age (whose, the relation word says). Traditional characters read as simplified ones:
    「我對什麼過敏來著？」 asks what 「我对什么过敏来着？」 does."""
    text = text_ruled(text)  # "what I’m allergic to" as "what I'm allergic to"
    lowered = text.casefold()
    asking = "?" in text or "？" in text or _ZH_QUESTION.search(text) or _EN_QUESTION.search(lowered)
    if not asking:
        return NOTHING_ASKED
    attributes: set[str] = set()
    of_self = False
    for cues, owner in ((_EN_CUES, _en_owner), (_ZH_CUES, _zh_owner)):
        for pattern, named in cues:
            for match in pattern.finditer(lowered):
                attributes.update(named)
                of_self = of_self or owner(lowered, match.end())
    return Asked(attributes=frozenset(attributes), of_self=of_self) if attributes else NOTHING_ASKED


def _clause(text: str, end: int) -> tuple[str, str]:
    """The parts of ``text``'s clause up to ``end`` (the cue's own words count: "where am I from") and after it."""
    before = _CLAUSE_END.split(text[:end])[-1]
    after = _CLAUSE_END.split(text[end:])[0]
    return before, after


def _en_owner(text: str, end: int) -> bool:
    """Whether the English cue ending at ``end`` is the asker's: the nearest pronoun up to it in its clause is
    "I", "my" or "we" ("where do I live", "what's my job"), or, none before it, one right after ("how old am I")."""
    before, after = _clause(text, end)
    for word in reversed(_EN_WORD.findall(before)):
        if word in _EN_SELF or word in _EN_OTHERS:
            return word in _EN_SELF
    for word in _EN_WORD.findall(after)[:3]:
        if word in _EN_SELF or word in _EN_OTHERS:
            return word in _EN_SELF
    return False


def _zh_owner(text: str, end: int) -> bool:
    """Whether the Chinese cue ending at ``end`` is the asker's: the nearest pronoun up to it in its clause is
    「我」 (「你还记得我住哪吗」, not 「你住哪」), or, none before it, the first one after it."""
    before, after = _clause(text, end)
    found = _ZH_PRONOUN.findall(before)
    if found:
        return found[-1] in _ZH_SELF
    found = _ZH_PRONOUN.findall(after)
    return bool(found) and found[0] in _ZH_SELF
