"""Offline answers of light sleep's first stage: the facts a conversation states (the slot grammar, sleep/slots/).

The feelings are in ``limbic``, the narrative and the autobiography outline in ``narrative``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from anima.core.llm.offline import offline_handler
from anima.core.relations import EN_RELATIONS, ZH_RELATIONS, ZH_WORDS_LONGEST_FIRST
from anima.core.segmentation import text_in_script_of, text_simplified
from anima.core.text import clip, normalized, sentences, text_straight, third_person_en, third_person_zh
from sleep import slots
from sleep.slots import Slot
from sleep.slots import _chinese as zh_grammar
from sleep.slots import _english as en_grammar
from sleep.slots import _slot as slot_model
from sleep.slots import _values as slot_values

# Each sentence is cut into clauses; each clause is read with the slot grammar (sleep/slots/):
# a subject (the speaker, a relative or pet, a name) and one predicate. A clause that reads
# becomes a fact in the third person, naming the speaker; a clause without a subject of its own
# borrows the previous one's, and a pronoun that points nowhere leaves the clause out.

_EN_CLAUSE_SPLIT = re.compile(
    r"\s*[,;:—–]\s*|\s+-\s+|\s+and\s+(?=(?:live|work|have|love|like|hate|teach|play|moved|just|also|really|"
    r"usually|can't|don't)\b)|\s+(?:and|but|so|because|plus)\s+"
    r"(?=(?:I|I'm|I’m|I've|I'd|my|My|we|We|our|Our|he|she|they|He|She|They|[A-Z][a-z]+ (?:is|'s|turned|just))\b)"
)
_EN_LEADING = re.compile(
    r"^(?:(?:oh|and|but|so|also|honestly|actually|btw|by the way|well|okay|ok|yeah|yes|hey|hi|hello|plus|anyway|"
    r"lol|haha|um|uh|fyi|guess what|just so you know|for the record|fun fact|not gonna lie|tbh|ngl|oh and|"
    r"big news|quick one|news|update|heads up|funny thing|oh yeah|(?:good|great|exciting|some|huge) news|"
    r"you'll never guess|you won't believe it)\b[\s!.,:]*)+",
    re.I,
)
# Chat words closing a clause say nothing of it ("got a cat tho", "I'm a nurse lol").
_EN_TRAILING = re.compile(r"(?:\s+(?:tho|though|lol|lmao|haha+|hehe+|btw|rn|tbh|ngl|xd|fr|imo))+\s*$", re.I)
# A clause opening with one of these has a subject of its own that is not the speaker.
_EN_NOT_SUBJECTLESS = re.compile(
    r"^(?:it|its|it's|this|that|these|those|there|they|he|she|the|a|an|you|your|[A-Z][a-z]+\s+(?:is|are|was|'s))\b",
    re.I,
)
_EN_LIST_AGES = re.compile(r"([A-Z][a-z]+)\s*(?:,\s*|\(\s*|who's\s+|who is\s+|is\s+|'s\s+|aged\s+)(\d{1,2})\b")
# A space between two Chinese characters ends a clause too: voice input and quick typing leave out the commas
# (「俺今年五十八了 老家河南周口的 现在跟老伴在郑州住」); one beside a Latin word (「在 Google 做 PM」) does not.
_ZH_CLAUSE_SPLIT = re.compile(r"[，,：:；;、]|(?<=[\u3400-\u9fff])\s+(?=[\u3400-\u9fff])")
_ZH_FILLER = re.compile(r"^(?:哈|呵|嗯|啊|呀|吧|嘿|哎|唉|lol|haha)+$")
_ZH_ORDINAL = re.compile(
    r"^(?P<which>大|小|老大|老二|老三|大的|小的)的?(?:叫|名叫)(?P<name>[\u4e00-\u9fffA-Za-z]{1,6})$"
)
# 「一只叫咪咪」, 「另一只叫豆豆」: one of the relatives or pets just counted
_ZH_ONE_OF = re.compile(r"^(?:另外|另|其中)?一(?:只|个|条|位|头|匹)")
# 「一只猫叫咪咪」: a counted relative or pet
_ZH_COUNTED = re.compile(
    rf"^(?:{zh_grammar._ZH_NUM}|几)\s*(?:个|只|条|位|头|匹)\s*(?:{zh_grammar._ZH_REL}|{zh_grammar._ZH_PET_WORDS})"
)
# The relation words a fact names its subject with, by slot relation.
_EN_RELATION_WORDS = {
    "child": "child",
    "dog_or_cat": "pet",
}
_ZH_RELATION_WORDS = {v: k for k, v in reversed(list(ZH_RELATIONS.items()))} | {"child": "孩子"}


@dataclass
class _Said:
    """What the sentences so far set up: the last subject talked about, a stated past preference."""

    hint: tuple[str, str] | None = None  # (relation, name) a pronoun or a subjectless clause refers to
    hint_text: str = ""  # how the fact names that subject ("Maya's daughter Lily")
    past_like: str = ""


def _relation_said(relation: str, said: str, *, chinese: bool) -> str:
    """The word ``said`` calls ``relation`` by (「女朋友」, "girlfriend", "mum"), "" when it names none: a partner
    told of as a girlfriend stays one, not the first word the tables hold for a partner."""
    if chinese:
        return next((word for word in ZH_WORDS_LONGEST_FIRST if word in said and ZH_RELATIONS[word] == relation), "")
    words = (word.casefold() for word in re.findall(r"[A-Za-z]+", said))
    return next((word for word in words if EN_RELATIONS.get(word) == relation), "")


def _subject_text(slot: Slot, name: str, *, chinese: bool, said: str = "") -> str:
    """How a fact names ``slot``'s subject ("Maya's daughter Lily", 「Leo 的女儿小雨」), with the relation word ``said``
    calls it by where it names one."""
    relation = slot.subject.split(":")[-1] if slot.subject.startswith("dog_or_cat:") else slot.subject
    own = slot.name if chinese else slot.name[:1].upper() + slot.name[1:]
    as_said = _relation_said(slot.subject, said, chinese=chinese) if said else ""
    if chinese:
        word = relation if slot.subject.startswith("dog_or_cat:") else as_said or _ZH_RELATION_WORDS.get(relation, "")
        return f"{name}的{word}{own}" if word else own
    word = as_said or _EN_RELATION_WORDS.get(relation, relation)
    return f"{name}'s {word} {own}".strip() if word else own


def _named(relation: str, names: list[str], name: str, *, chinese: bool) -> list[tuple[str, str, Slot]]:
    """One fact per named relative or pet of a list ("two cats, Miso and Tofu"), in the slot naming them alone does."""
    if chinese:
        who = _subject_text(Slot(relation, "", "", "", ""), name, chinese=True)
        return [("world", f"{who}叫{n}", Slot(relation, n, "name", "", n)) for n in names]
    word = relation.split(":")[-1]
    return [("world", f"{name} has a {word} named {n}", Slot(relation, n.casefold(), "exists", "", "+")) for n in names]


# "I have a dog called Rex and a cat named Luna": each thing had is a clause of its own.
_EN_HAD = re.compile(rf"^(?P<head>.*?\b{slot_values.EN_HAVE})\s+(?P<things>.+)$", re.I)
_EN_COUNTED = rf"{slot_values.EN_COUNT}\s"
_EN_THINGS_SPLIT = re.compile(rf"\s*,?\s+and\s+(?={_EN_COUNTED})|\s*,\s*(?={_EN_COUNTED})", re.I)


# Someone the grammar keeps no facts of: a clause with no subject after one about them goes on about them
# (「我同事小王住在滨江，每天骑电动车上班」 is the colleague's commute, not the speaker's).
_ZH_SOMEONE_ELSE = re.compile(r"(?<![男女])朋友|同事|同学|室友|邻居|老板|领导|上司|别人|有人|网友")
_EN_SOMEONE_ELSE = re.compile(
    r"\b(?:friends?|colleagues?|co-?workers?|boss|manager|neighbou?rs?|classmates?|room-?mates?|flat-?mates?|"
    r"someone|somebody)\b",
    re.I,
)


# Contractions typed without their apostrophe ("im shauna", "hes an electrician", "dont eat pork").
_EN_BARE_CONTRACTIONS = {
    "im": "I'm",
    "ive": "I've",
    "dont": "don't",
    "cant": "can't",
    "didnt": "didn't",
    "doesnt": "doesn't",
    "isnt": "isn't",
    "wasnt": "wasn't",
    "hes": "he's",
    "shes": "she's",
    "theyre": "they're",
    "weve": "we've",
    "thats": "that's",
    "whats": "what's",
    "u": "you",
}
_EN_BARE_CONTRACTION = re.compile(rf"\b(?:{'|'.join(_EN_BARE_CONTRACTIONS)})\b", re.I)


def _en_clauses(sentence: str) -> list[str]:
    sentence = _EN_BARE_CONTRACTION.sub(lambda m: _EN_BARE_CONTRACTIONS[m.group(0).casefold()], sentence)
    sentence = sentence.strip().rstrip(".!")
    lead = re.match(r"^([^:]{1,30}):\s+(?=\S)", sentence)
    # "Big news: …" heads what follows; "We've got three dogs: Rex, Ace and Bo" says something itself
    if lead and len(lead.group(1).split()) <= 4 and not re.search(r"@|\b(?:I|we|my|our)\b", lead.group(1), re.I):
        sentence = sentence[lead.end() :]
    clauses = []
    for clause in _EN_CLAUSE_SPLIT.split(sentence):
        clause = en_grammar.en_now_dropped(_EN_TRAILING.sub("", _EN_LEADING.sub("", clause.strip())).strip())
        if not clause:
            continue
        clause = clause[0].upper() + clause[1:] if clause[:2].casefold() == "i " else clause
        had = _EN_HAD.match(clause)
        things = _EN_THINGS_SPLIT.split(had.group("things")) if had else []
        clauses.extend([f"{had.group('head')} {thing}" for thing in things] if len(things) > 1 else [clause])
    return clauses


def _en_facts(sentence: str, name: str, said: _Said) -> list[tuple[str, str, Slot]]:
    facts: list[tuple[str, str, Slot]] = []
    listing = ""  # the relation whose members the clauses are naming
    if sentence.rstrip().endswith("?"):
        return facts
    someone_else = False
    for clause in _en_clauses(sentence):
        if re.match(r"^(?:I|I'm|I've|My|We|Our)\b", clause):
            someone_else = False
        used = re.sub(r"^(?:I|We)\s+used to\s+(?:really\s+)?(?:like|love|prefer)\s+", "", clause, flags=re.I)
        if used != clause:
            said.past_like = used  # "I used to like X" sets up a change stated next, it is not a fact itself
            continue
        had = facts[-1][2].attribute.startswith("count:") or facts[-1][2].attribute == "exists" if facts else False
        if had and re.match(_EN_COUNTED, clause, re.I):
            clause = f"I have {clause}"  # "…, and a cat named Luna" goes on with the list of what they have
        names = en_grammar.en_names(clause) if listing else []
        if names:
            # "We have two cats, Miso and Tofu": one named alone stands for the count ("We have a cat, Miso")
            if len(names) == 1 and facts[-1][2].attribute == f"count:{listing}" and facts[-1][2].value == "1":
                facts.pop()
            facts.extend(_named(listing, names, name, chinese=False))
            continue
        listing = ""
        reading = slots.en_read(clause, name="", subject_hint=said.hint)
        text = clause
        someone_else = someone_else or (reading is None and _EN_SOMEONE_ELSE.search(clause) is not None)
        listed = re.search(r"\s(?:named|called)\s+(.+)$", clause) if reading else None
        if listed and reading.slot.attribute.startswith("count:") and en_grammar.en_names(listed.group(1)):
            # "I have two cats named Miso and Tofu": the count, then each one named
            relation = reading.slot.attribute.split(":", 1)[1]
            facts.append(("world", third_person_en(clause[: listed.start()], name), reading.slot))
            facts.extend(_named(relation, en_grammar.en_names(listed.group(1)), name, chinese=False))
            said.hint, said.hint_text = (relation, ""), ""
            listing = relation
            continue
        if reading is None and said.hint is None and not someone_else and not _EN_NOT_SUBJECTLESS.match(clause):
            # A clause with no subject of its own speaks for the speaker ("Can't stand cilantro", "retired").
            for prefix in ("I ", "I'm "):
                reading = slots.en_read(prefix + clause[0].lower() + clause[1:], name="")
                if reading is not None:
                    text = prefix + clause[0].lower() + clause[1:]
                    break
        ages = _EN_LIST_AGES.findall(clause) if said.hint and said.hint[0] and not said.hint[1] else []
        if reading is None and ages:
            # "…two kids, Ben who's 5 and Mia who's 9"
            for child, age in ages:
                slot = Slot(said.hint[0], child.casefold(), "age", "", age)
                facts.append(("world", f"{_subject_text(slot, name, chinese=False)} is {age}", slot))
            continue
        acquired = en_grammar.en_acquired(clause) if reading is None else ""
        if acquired:
            # "I finally adopted a dog!": no fact, but the one "his name is Biscuit" points at
            said.hint = (acquired, "")
            said.hint_text = _subject_text(Slot(acquired, "", "", "", ""), name, chinese=False)
            continue
        if reading is None:
            subject = en_grammar._en_subjects(clause, name="")
            if subject and subject[0] != slot_model.SELF:
                said.hint = (subject[0], subject[1].casefold())
                said.hint_text = _subject_text(
                    Slot(subject[0], subject[1].casefold(), "", "", ""), name, chinese=False, said=clause
                )
            continue
        slot = reading.slot
        if slot.attribute == "name" and slot.subject == slot_model.SELF:
            if slot.value.casefold() != name.casefold():
                facts.append(("world", f"{name} also goes by {slot.value.title()}", slot))
            continue
        if re.match(r"^(?:he|she|they)\b", text, re.I) and said.hint:
            first = text.split()[0]
            rest = text[len(first) :].strip()
            verb = "is" if "'" in first else ""
            text = f"{said.hint_text} {verb} {rest}".replace("  ", " ") if said.hint_text else text
        elif re.match(r"^(?:his|her|its|their)\s", text, re.I) and said.hint:
            # "Her name is Luna": the one it points at, by name ("Ana's cat's name is Luna")
            owner = said.hint_text or _subject_text(Slot(*said.hint, "", "", ""), name, chinese=False)
            text = f"{owner}'s {text.split(None, 1)[1]}"
        content = third_person_en(text, name)
        if slot.subject not in (slot_model.SELF, ""):
            said.hint = (slot.subject, slot.name)
            said.hint_text = _subject_text(slot, name, chinese=False, said=text)
        elif slot.subject == "" and slot.name:
            said.hint, said.hint_text = ("", slot.name), slot.name.title()
        if slot.attribute.startswith("count:"):
            said.hint, said.hint_text = (slot.attribute.split(":", 1)[1], ""), ""
            listing = slot.attribute.split(":", 1)[1]  # names may follow ("two cats, Miso and Tofu")
        if said.past_like and slot.attribute == "likes" and slot.value == "+":
            content = f"{content} (used to like {said.past_like})"
            said.past_like = ""
        facts.append((reading.memory_type, content, slot))
    return facts


def _zh_facts(sentence: str, name: str, said: _Said) -> list[tuple[str, str, Slot]]:
    facts: list[tuple[str, str, Slot]] = []
    if re.search(r"[？?]\s*$", sentence):
        return facts
    # The northern 俺 is 我 (「俺闺女」 is 「我闺女」), and 「媳妇儿」 「老伴儿」 are 媳妇 and 老伴.
    sentence = re.sub(r"(媳妇|老伴|闺女)儿", r"\1", sentence.replace("俺", "我"))
    clauses = [c.strip() for c in _ZH_CLAUSE_SPLIT.split(sentence.rstrip("。！!；;\n ")) if c.strip()]
    # Whether a clause with no subject is the speaker's: the first one is, and one after a clause of theirs
    # (「我是老师，教语文」) or after clauses naming nobody (「腰受不了，现在当保安」); not after a clause naming a
    # relative or someone else, until the speaker speaks of themself again (「媳妇儿叫小红 在小学当语文老师」,
    # 「我同事小王住在滨江，每天骑电动车上班」). An age with no subject needs a clause of theirs right before it: after
    # 「今天豆包过生日」, 「满五岁了」 is 豆包's.
    speaker = strictly = True
    previous = None
    for clause in clauses:
        clause = zh_grammar._ZH_LEADING.sub("", clause).strip()
        if not clause or _ZH_FILLER.match(clause):
            continue
        if previous is not None:
            said_before, written_before = previous
            # 「我同事…」「我媳妇…」 open with 我 and are about someone else
            naming = _ZH_SOMEONE_ELSE.search(said_before) or any(word in said_before for word in ZH_RELATIONS)
            strictly = any(slot.subject == slot_model.SELF for _, _, slot in facts[written_before:]) or (
                said_before.startswith("我") and not naming
            )
            speaker = strictly or (speaker and not naming)
        previous = (clause, len(facts))
        past = re.match(r"^(?:以前|过去|之前)我?(?:很|最|特别|也)?(?:喜欢|爱)\s*(.+)$", clause)
        if past:
            said.past_like = past.group(1)  # 「以前我喜欢 X」 sets up a change stated next
            continue
        one_of = _ZH_ONE_OF.sub("", clause)
        names = zh_grammar.zh_names(one_of) if said.hint and said.hint[0] and not said.hint[1] else []
        counted = facts[-1][2].value if facts and facts[-1][2].attribute.startswith("count:") else ""
        if names and one_of == clause and not re.match(r"^(?:分别|都)?(?:叫|名)", clause):
            names = names if counted == str(len(names)) else []  # bare names: as many as were just counted
        if len(names) > 1 or (names and one_of != clause):
            # 「我家有两只猫，一只叫咪咪，一只叫豆豆」, 「养了两只狗，大黄和小黑」: each one named
            facts.extend(_named(said.hint[0], names, name, chinese=True))
            continue
        had = facts and (facts[-1][2].attribute.startswith("count:") or facts[-1][2].attribute in {"name", "exists"})
        if had and re.match(_ZH_COUNTED, clause):
            clause = "我有" + clause  # 「…，还有一只猫叫咪咪」 goes on with the list of what they have
        ordinal = _ZH_ORDINAL.match(clause)
        if ordinal and said.hint and said.hint[0]:
            relation = said.hint[0]
            slot = Slot(relation, ordinal.group("name"), "name", "", ordinal.group("name"))
            word = _ZH_RELATION_WORDS.get(relation, "孩子")
            which = ordinal.group("which")[:1] if ordinal.group("which")[:1] in "大小" else ordinal.group("which")
            facts.append(("world", f"{name}的{which}{word}叫{ordinal.group('name')}", slot))
            continue
        reading = zh_grammar.zh_read(clause, name="")
        text = clause
        listed = re.search(r"(?:叫做|叫|名叫|名字叫|名字是)(.+)$", clause) if reading else None
        if listed and reading.slot.attribute.startswith("count:") and zh_grammar.zh_names(listed.group(1)):
            # 「我养了两只猫叫咪咪和豆豆」: the count, then each one named
            relation = reading.slot.attribute.split(":", 1)[1]
            content = third_person_zh(clause[: listed.start()], name).rstrip("，, ")
            facts.append(("world", content, reading.slot))
            facts.extend(_named(relation, zh_grammar.zh_names(listed.group(1)), name, chinese=True))
            said.hint = (relation, "")
            said.hint_text = _subject_text(Slot(relation, "", "", "", ""), name, chinese=True)
            continue
        if reading is None and said.hint is not None and not re.match(r"^(?:我|你|他|她|它|这|那)", clause):
            hinted = zh_grammar._zh_reading(said.hint[0], said.hint[1], clause)
            if hinted is not None and hinted.slot.attribute != "activity":
                if facts and facts[-1][2].attribute.startswith("count:") and hinted.slot.attribute == "name":
                    # 「我养了一只柯基，叫豆豆」: the count and the name are one fact
                    kind, content, _ = facts.pop()
                    facts.append((kind, f"{content}，{clause}", hinted.slot))
                    said.hint = (hinted.slot.subject, hinted.slot.name)
                    continue
                if said.hint_text:
                    reading, text = hinted, f"{said.hint_text}{clause}"
        elif reading is None and said.hint is None and speaker and not re.match(r"^(?:我|你|他|她|它|这|那)", clause):
            # A clause with no subject of its own speaks for the speaker (「不吃香菜」, 「在一家游戏公司做策划」).
            reading = zh_grammar.zh_read("我" + clause, name="")
            text = "我" + clause
            if reading is not None and reading.slot.attribute == "age" and not strictly:
                reading = None
        elif reading is None and re.match(r"^(?:他|她|它)", clause) and said.hint:
            reading = zh_grammar.zh_read(clause, name="", subject_hint=said.hint)
            if reading is not None:
                text = said.hint_text + clause[1:]
        if reading is None:
            subject = zh_grammar._zh_subject(zh_grammar._ZH_TIME_LEAD.sub("", clause), name="")
            if subject and subject[0] != slot_model.SELF:
                said.hint = (subject[0], subject[1])
                said.hint_text = _subject_text(
                    Slot(subject[0], subject[1], "", "", ""), name, chinese=True, said=clause
                )
                continue
            if facts and len(clause) <= 12 and not re.match(r"^(?:我|你|他|她|它|这|那)", clause):
                kind, content, slot = facts.pop()
                # 「今年七岁，上小学一年级」: a detail of the fact before, told about the person too
                facts.append((kind, f"{content}，{_without_closing_le(third_person_zh(clause, name))}", slot))
            continue
        slot = reading.slot
        if slot.attribute == "name" and slot.subject == slot_model.SELF:
            if slot.value != name.casefold():
                facts.append(("world", f"{name}也叫{slot.value}", slot))
            continue
        content = third_person_zh(text, name).rstrip()
        # A closing 了 is mostly filler, but in 「不开出租车了」 it says "no longer" and in 「怀孕了」 "now": a stopped
        # activity and a state keep it. (A bare age, 「现在三十三」, reads as one without it.)
        if not (slot.attribute == "activity" and slot.value == "no") and slot.attribute not in {"status", "marital"}:
            content = _without_closing_le(content)
        if slot.subject not in (slot_model.SELF, ""):
            said.hint, said.hint_text = (slot.subject, slot.name), _subject_text(slot, name, chinese=True, said=text)
        elif slot.subject == "" and slot.name:
            said.hint, said.hint_text = ("", slot.name), slot.name
        if slot.attribute.startswith("count:"):
            relation = slot.attribute.split(":", 1)[1]
            said.hint = (relation, "")
            said.hint_text = _subject_text(Slot(relation, "", "", "", ""), name, chinese=True)
            if relation.startswith("dog_or_cat:"):
                said.hint_text = f"{name}的{relation.split(':', 1)[1]}"
        if said.past_like and (slot.attribute == "likes" or slot.attribute.startswith("favourite")):
            content = f"{content}（以前喜欢 {said.past_like}）"
            said.past_like = ""
        facts.append((reading.memory_type, clip(content, 160), slot))
    return facts


def _without_closing_le(text: str) -> str:
    """``text`` without a closing filler 了; 「受不了」 (can't bear) keeps it: there it is the word."""
    return re.sub(r"(?<!不)了+$", "", text.rstrip()).rstrip()


# A message said in jest or irony states nothing ("I LOVE doing my taxes 🙃", "…开玩笑的").
_JOKING = re.compile(
    r"said no one ever|\bjust kidding\b|\bjk\b|\byeah right\b|(?:^|\s)/s\b|🙃|🙄|开玩笑的|开个玩笑|逗你的|才怪",
    re.I,
)


def facts_read(text: str, *, name: str, said: _Said | None = None) -> list[tuple[str, str, Slot]]:
    """(memory_type, content, slot) facts a user message states about its author, in the message's language and
    script: a sentence in traditional characters is read in simplified ones, as the grammar is written, and its
    facts are told in its own characters."""
    said = _Said() if said is None else said
    facts = []
    text = text_straight(text)  # the English grammar is written with straight apostrophes: "She’s 7" is "She's 7"
    if _JOKING.search(text_simplified(text)):
        return facts
    for sentence in sentences(text):
        if slots.chinese(sentence):
            facts.extend(
                (kind, text_in_script_of(content, like=sentence, name=name), slot)
                for kind, content, slot in _zh_facts(text_simplified(sentence), text_simplified(name) or "用户", said)
            )
        else:
            facts.extend(_en_facts(sentence, name or "The user", said))
    return facts


@offline_handler("light-sleep.semantic")
def semantic_answer(payload: dict) -> dict:
    name = payload["conversation"].get("person") or ""
    seen = {normalized(m["content"]) for m in payload.get("existing", [])}
    held = [s for s in (slots.slot_read(m["content"], name=name) for m in payload.get("existing", [])) if s]
    create = []
    said = _Said()
    for turn in payload["dialogue"]:
        if turn["role"] != "user":
            continue
        said.hint, said.hint_text = None, ""  # a pronoun never reaches back into an earlier message
        for kind, content, slot in facts_read(turn["content"], name=name, said=said):
            key = normalized(content)
            if not key or key in seen or any(slots.restates(slot, other) for other in held):
                continue
            seen.add(key)
            held.append(slot)
            create.append(
                {"memory_type": kind, "content": content, "occurred_at": payload["day"], "slot": slot.as_body()}
            )
    return {"create": create, "update": [], "deprecate": []}
