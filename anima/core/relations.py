"""The words for a person's relatives and pets, in English and Chinese, and the relation each one names.

The slot grammar reads facts with them ("my daughter Lily", 「我闺女小雨」 are both "daughter"); recall reads a
question with them ("how is my girl doing?"), so they live below both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from anima.core.segmentation import text_simplified

EN_RELATIONS = {
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
    # as people type them
    "bf": "partner",
    "gf": "partner",
    "hubby": "husband",
    "missus": "wife",
    "sis": "sister",
    "bro": "brother",
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

ZH_RELATIONS = {
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
    "老伴": "partner",
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

# Longest first, so that a search finds 「外孙女」 before 「孙女」 and 「女朋友」 before anything shorter in it.
ZH_WORDS_LONGEST_FIRST = tuple(sorted(ZH_RELATIONS, key=len, reverse=True))

# Words a question asks for a kind of relation by ("what pets do I have?", 「我父母住哪儿」): each kind covers its
# relations (``relation_covers``). Only questions are read with them: a fact says which, a cat or a mother.
EN_KINDS = {
    "pet": "pet",
    "parent": "parent",
    "folks": "parent",
    "grandparent": "grandparent",
    "sibling": "sibling",
}
ZH_KINDS = {
    "宠物": "pet",
    "毛孩子": "pet",  # a pet, not a child
    "父母": "parent",
    "爸妈": "parent",
    "爸爸妈妈": "parent",
    "兄弟姐妹": "sibling",
}

# Relations the grammar reads for animals; a breed it cannot tell apart is "dog_or_cat:<breed>".
_PET_RELATIONS = frozenset(
    {"cat", "dog", "rabbit", "hamster", "parrot", "bird", "turtle", "fish", "horse", "lizard", "snake"}
)
_BREED_PREFIX = "dog_or_cat:"


def relation_is_pet(relation: str) -> bool:
    return relation in _PET_RELATIONS or relation.startswith(_BREED_PREFIX)


def relation_words(relation: str) -> tuple[str, ...]:
    """Every word the grammar reads as ``relation``, in both languages, longest first ("女儿", "闺女", "daughter")."""
    if relation.startswith(_BREED_PREFIX):
        return (relation.removeprefix(_BREED_PREFIX),)
    words = {word for table in (ZH_RELATIONS, EN_RELATIONS) for word, read in table.items() if read == relation}
    return tuple(sorted(words, key=lambda word: (-len(word), word)))


def relation_en_read(word: str, *, table: Mapping[str, str] = EN_RELATIONS) -> str | None:
    """The relation an English word names in ``table``, singular or plural ("daughters", "puppies"), else None."""
    word = word.casefold()
    for form in (word, re.sub(r"ies$", "y", word), re.sub(r"(?<=[^s])s$", "", word)):
        if form in table:
            return table[form]
    return None


def relation_word_read(word: str) -> str | None:
    """The relation a word of the grammar names ("闺女" or "閨女" → "daughter", "Mum" → "mother"), else None."""
    return ZH_RELATIONS.get(text_simplified(word)) or EN_RELATIONS.get(word.casefold())


# A word for a wider relation covers the narrower ones ("my kid" may be the daughter, "my partner" the wife),
# and a narrower one the subject its facts only knew by the wider word.
_NARROWER = {
    "child": frozenset({"daughter", "son"}),
    "partner": frozenset({"wife", "husband"}),
    "bird": frozenset({"parrot"}),
    "pet": _PET_RELATIONS,
    "parent": frozenset({"mother", "father"}),
    "grandparent": frozenset({"grandmother", "grandfather"}),
    "sibling": frozenset({"brother", "sister"}),
}


def relation_covers(asked: str, relation: str) -> bool:
    """Whether a question asking about ``asked`` ("child") may mean a subject of ``relation`` ("daughter"); a breed
    the grammar could not tell a dog from a cat by ("dog_or_cat:corgi") is either, and its breed."""
    if asked == relation:
        return True
    if relation.startswith(_BREED_PREFIX):
        return asked in {"pet", "dog", "cat", relation.removeprefix(_BREED_PREFIX)}
    return relation in _NARROWER.get(asked, ()) or asked in _NARROWER.get(relation, ())
