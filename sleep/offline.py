"""Offline (no-LLM) answers for the sleep stages: deterministic, extractive, Chinese + English.

Each handler takes the payload the step sends and answers in the step's JSON schema, so
the whole sleep cycle runs — and demos sensibly — without any model configured.
"""

from __future__ import annotations

import json
import re
from itertools import combinations

from anima.core.llm.offline import offline_handler
from anima.core.text import clip, is_chinese, normalized, sentences, text_keywords

# ---------------------------------------------------------------- stage 1: facts

_ZH_CLAUSE_SPLIT = re.compile(r"[，,：:]")
_ZH_KIN = "女儿|儿子|老婆|妻子|老公|丈夫|孩子|猫|狗|妈妈|爸爸|父亲|母亲|家人|同事|朋友"
_ZH_LEADING = re.compile(r"^(?:但是|但|不过|而且|其实|所以|对了|顺便记一下|说实话|嗯|哈哈|一是|二是|三是|还有)+")
_ZH_RULES: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"(?:以前|过去)?我?(?:现在)?(?:很|最|更|特别|非常|也)?(?:喜欢|爱吃|讨厌|不喜欢)"), "preference"),
    # Family members count when the clause says something about them (name, zodiac, age, school…).
    (re.compile(rf"我的?(?:{_ZH_KIN}).{{0,6}}?(?:叫|属|今年|是|名字|生日|岁|在上|在读)"), "world"),
    (re.compile(r"我的?(?:邮箱|电话|生日)"), "world"),
    (re.compile(r"我(?:现在)?(?:是|住在|在.{1,8}工作|对.{1,10}过敏|属)"), "world"),
    (re.compile(r"我(?:答应|打算|计划|准备)"), "experience"),
    (re.compile(r"(?:一定要|千万别|千万不要|记得要)"), "procedural"),
)
_ZH_CHANGE = re.compile(r"现在(?:更)?喜欢|改用|不再喜欢")
_ZH_PAST_LIKE = re.compile(r"(?:以前|过去).*?喜欢\s*([^\s，。,]+)")
_ZH_PRONOUN_START = re.compile(r"^(?:我|你|她|他|它|我们|咱们|这|那)")
_ZH_FILLER = re.compile(r"(?:哈|呵|嗯|啊|呀|吧|嘿)+")

_EN_CLAUSE_SPLIT = re.compile(r",\s*|\s+(?:and|but|so)\s+(?=(?:I|I'm|my|she|he|it|we)\b)")
_EN_IM = r"I(?:'m|’m| am)"
_EN_RULES: tuple[tuple[re.Pattern, str, str], ...] = (
    (
        re.compile(rf"\b{_EN_IM} ((?:a|an|from|married|vegetarian|vegan|learning|studying|allergic to)\b.*)"),
        "is",
        "world",
    ),
    (re.compile(r"\bI (?:now |really |still )?(prefer)s? (.+)"), "prefers", "preference"),
    (re.compile(r"\bI no longer (.+)"), "no longer", "preference"),
    (re.compile(r"\bI (?:really )?(?:love|like) (?!(?:that|it|this|you|them)\b)(.+)"), "likes", "preference"),
    (re.compile(r"\bI live (.+)"), "lives", "world"),
    (re.compile(r"\bI work (.+)"), "works", "world"),
    (re.compile(r"\bI have ((?:a|an|two|three|\d+)\b.+)"), "has", "world"),
    (re.compile(r"\bI passed (.+)"), "passed", "experience"),
    (re.compile(r"\bmy (email|phone number|birthday|name) is (.+)", re.IGNORECASE), "'s", "world"),
)
_EN_USED_TO = re.compile(r"\bI used to (?:really )?(?:like|love|prefer) ([\w.+#-]+)")
_EN_EVENT = re.compile(r"\b(?:exam|appointment|interview|meeting|trip|flight|shift)s?\b")


def _zh_third_person(text: str, name: str) -> str:
    text = re.sub(r"我的", f" {name} 的", text)
    text = re.sub(rf"我(?=(?:{_ZH_KIN}))", f" {name} 的", text)
    text = re.sub(r"我(?!们)", f" {name} ", text)
    text = re.sub(r"\s+", " ", text)
    return re.sub(r"\s+(?=[，。！？；：、）])", "", text).strip()


def _continues(clause: str) -> bool:
    """A short clause with no subject of its own completes the fact before it (「属虎，今年四岁」)."""
    return (
        len(clause) <= 10
        and "我" not in clause
        and not _ZH_PRONOUN_START.match(clause)
        and not _ZH_FILLER.fullmatch(clause)
        and not any(rule.search(clause) for rule, _ in _ZH_RULES)
    )


def _zh_facts(sentence: str, name: str, context: dict) -> list[tuple[str, str]]:
    clauses = [c.strip() for c in _ZH_CLAUSE_SPLIT.split(sentence.rstrip("。！？!?；;\n ")) if c.strip()]
    facts: list[tuple[str, str]] = []
    index = 0
    while index < len(clauses):
        clause = _ZH_LEADING.sub("", clauses[index]).strip()
        index += 1
        if "我叫" in clause:
            continue
        kind = next((k for rule, k in _ZH_RULES if rule.search(clause) and ("我" in clause or k == "procedural")), None)
        if kind is None:
            continue
        past = _ZH_PAST_LIKE.search(clause)
        if past and not _ZH_CHANGE.search(clause):
            # 「以前我很喜欢 X」 is context for a change stated next, not a fact of its own.
            context["past_like"] = past.group(1)
            continue
        while index < len(clauses) and _continues(clauses[index]):
            clause = f"{clause}，{clauses[index]}"
            index += 1
        fact = _zh_third_person(clause, name).rstrip("了 ")
        if _ZH_CHANGE.search(clause) and context.get("past_like"):
            fact = f"{fact}（以前喜欢 {context.pop('past_like')}）"
        facts.append((kind, clip(fact, 160)))
    return facts


def _third_person_verb(verb: str) -> str:
    if re.search(r"(?:s|sh|ch|x|o)$", verb):
        return f"{verb}es"
    if re.search(r"[^aeiou]y$", verb):
        return f"{verb[:-1]}ies"
    return f"{verb}s"


def _en_facts(sentence: str, name: str, context: dict) -> list[tuple[str, str]]:
    facts = []
    for clause in _EN_CLAUSE_SPLIT.split(sentence.strip().rstrip(".!?;")):
        past = _EN_USED_TO.search(clause)
        if past:
            # "I used to like X" is context for a change stated next, not a fact of its own.
            context["past_like"] = past.group(1)
            continue
        for rule, verb, kind in _EN_RULES:
            match = rule.search(clause)
            if not match:
                continue
            if verb == "'s":
                fact = f"{name}'s {match.group(1).lower()} is {match.group(2)}"
            elif verb == "no longer":
                first, _, rest = match.group(1).partition(" ")
                fact = f"{name} no longer {_third_person_verb(first)} {rest}"
            else:
                rest = match.group(match.lastindex or 1)
                fact = f"{name} {verb} {rest}"
            fact = re.sub(r"\bmy\b", "the", fact.strip().rstrip(".!?"))
            if verb == "prefers" and context.get("past_like"):
                fact = f"{fact} (used to like {context.pop('past_like')})"
            if kind == "world" and verb == "has" and _EN_EVENT.search(fact):
                kind = "experience"
            if len(fact) > len(name) + 6:
                facts.append((kind, clip(fact[0].upper() + fact[1:], 200)))
            break
    return facts


def facts_extract(text: str, *, name: str, context: dict | None = None) -> list[tuple[str, str]]:
    """(memory_type, content) facts a user message states about its author, in the message's language.

    ``context`` carries what one message sets up for the next (「以前我喜欢 X」 before 「现在更喜欢 Y」).
    """
    facts = []
    context = {} if context is None else context
    for sentence in sentences(text):
        if is_chinese(sentence):
            facts.extend(_zh_facts(sentence, name or "用户", context))
        else:
            facts.extend(_en_facts(sentence, name or "The user", context))
    return facts


@offline_handler("light-sleep.semantic")
def semantic_answer(payload: dict) -> dict:
    name = payload["conversation"].get("person") or ""
    seen = {normalized(m["content"]) for m in payload.get("existing", [])}
    create = []
    context: dict = {}
    for turn in payload["dialogue"]:
        if turn["role"] != "user":
            continue
        for kind, content in facts_extract(turn["content"], name=name, context=context):
            key = normalized(content)
            if key and key not in seen:
                seen.add(key)
                create.append({"memory_type": kind, "content": content, "occurred_at": payload["day"]})
    return {"create": create, "update": [], "deprecate": []}


# ---------------------------------------------------------------- stage 2: feelings

# word → (valence, arousal, base intensity, feeling family)
_ZH_EMOTIONS = {
    "焦虑": (-0.7, 0.7, 0.6, "worry"),
    "担心": (-0.6, 0.6, 0.55, "worry"),
    "压力": (-0.5, 0.6, 0.45, "worry"),
    "紧张": (-0.4, 0.6, 0.4, "worry"),
    "头大": (-0.4, 0.5, 0.4, "worry"),
    "睡不好": (-0.4, 0.4, 0.4, "tired"),
    "累": (-0.4, 0.3, 0.35, "tired"),
    "难过": (-0.7, 0.4, 0.6, "sad"),
    "伤心": (-0.7, 0.4, 0.6, "sad"),
    "松了一口气": (0.7, 0.3, 0.65, "relief"),
    "开心": (0.8, 0.6, 0.55, "joy"),
    "高兴": (0.8, 0.6, 0.55, "joy"),
    "兴奋": (0.7, 0.8, 0.5, "joy"),
    "感慨": (0.3, 0.4, 0.35, "joy"),
}
_EN_EMOTIONS = {
    "anxious": (-0.7, 0.7, 0.6, "worry"),
    "worried": (-0.6, 0.6, 0.55, "worry"),
    "nervous": (-0.5, 0.7, 0.5, "worry"),
    "stressed": (-0.5, 0.6, 0.5, "worry"),
    "exhausted": (-0.5, 0.2, 0.5, "tired"),
    "tired": (-0.4, 0.3, 0.35, "tired"),
    "sad": (-0.7, 0.4, 0.6, "sad"),
    "relieved": (0.7, 0.3, 0.6, "relief"),
    "happy": (0.8, 0.6, 0.55, "joy"),
    "excited": (0.7, 0.8, 0.5, "joy"),
    "proud": (0.7, 0.5, 0.5, "joy"),
    "passed": (0.8, 0.7, 0.6, "joy"),
}
_ZH_INTENSIFIERS = ("很", "真的", "特别", "非常", "太", "好", "超")
_EN_INTENSIFIERS = ("so", "really", "completely", "very", "extremely", "totally")
_ZH_RETROSPECTIVE = re.compile(r"那几天|之前|以前|当时|回头看")
_ZH_NEGATION = re.compile(r"(?:不|没|别|少)$")
_EN_NEGATION = {"not", "never", "less", "no", "isn't", "wasn't", "don't", "didn't"}
_FEELINGS = {
    "worry": ("我感到担心，也很牵挂", "I feel worried for {name}"),
    "tired": ("我感到心疼", "I feel a tender concern for {name}"),
    "sad": ("我感到难过", "I feel sad alongside {name}"),
    "relief": ("我感到如释重负", "I feel relieved with {name}"),
    "joy": ("我感到由衷的高兴", "I feel genuinely happy for {name}"),
}


def _emotion_hits(sentence: str) -> list[tuple[float, float, float, str]]:
    hits = []
    if is_chinese(sentence):
        for word, (valence, arousal, base, family) in _ZH_EMOTIONS.items():
            at = sentence.find(word)
            if at < 0 or _ZH_NEGATION.search(sentence[:at]):
                continue
            before = sentence[max(0, at - 4) : at]
            boost = 0.1 * sum(marker in before for marker in _ZH_INTENSIFIERS) - (0.1 if "有点" in before else 0)
            if valence < 0 and _ZH_RETROSPECTIVE.search(sentence):
                boost -= 0.3  # a worry looked back on is no longer felt
            hits.append((valence, arousal, round(min(1.0, max(0.0, base + boost)), 2), family))
        return hits
    words = re.findall(r"[a-z’']+", sentence.lower())
    for i, word in enumerate(words):
        if word not in _EN_EMOTIONS:
            continue
        before = words[max(0, i - 3) : i]
        if _EN_NEGATION & set(before):
            continue
        valence, arousal, base, family = _EN_EMOTIONS[word]
        boost = 0.1 * sum(w in _EN_INTENSIFIERS for w in before)
        hits.append((valence, arousal, round(min(1.0, base + boost), 2), family))
    return hits


def _anchor_text(family: str, name: str, segment: str, *, chinese: bool) -> str:
    zh, en = _FEELINGS[family]
    segment = segment.rstrip("。！？!?；;.,， ")
    if chinese:
        return f"{zh}：{name}说「{clip(segment, 80)}」。"
    return f'{en.format(name=name)}: they said "{clip(segment, 120)}".'


def _linked_facts(segment: str, facts: list[dict]) -> list[int]:
    grams = _bigrams(segment)
    return [f["id"] for f in facts if len(grams & _bigrams(f["content"])) >= 3]


@offline_handler("light-sleep.limbic")
def limbic_answer(payload: dict) -> dict:
    name = payload["conversation"].get("person") or ""
    found = []  # (order, valence, arousal, intensity, family, sentence)
    for turn in payload["dialogue"]:
        if turn["role"] != "user":
            continue
        for sentence in sentences(turn["content"]):
            for valence, arousal, intensity, family in _emotion_hits(sentence):
                found.append((len(found), valence, arousal, intensity, family, sentence))
    if not found:
        return {"anchors": []}
    chinese = is_chinese(" ".join(t["content"] for t in payload["dialogue"]))
    who = name or ("对方" if chinese else "them")
    strongest = max(found, key=lambda hit: (hit[3], -hit[0]))
    anchors = [
        {
            "kind": "conversation_mood",
            "content": _anchor_text(strongest[4], who, strongest[5], chinese=chinese),
            "valence": strongest[1],
            "arousal": strongest[2],
            "intensity": strongest[3],
            "source_segment": strongest[5],
            "semantic_memory_ids": _linked_facts(strongest[5], payload.get("facts", [])),
        }
    ]
    negative = [hit for hit in found if hit[1] < 0]
    later_positive = [hit for hit in found if hit[1] > 0 and negative and hit[0] > negative[0][0]]
    if negative and later_positive:
        low, high = negative[0], max(later_positive, key=lambda hit: hit[3])
        content = (
            f"我感到气氛变了：{who}从「{clip(low[5], 40)}」走到了「{clip(high[5], 40)}」。"
            if chinese
            else f'I feel the mood turn: {who} went from "{clip(low[5], 60)}" to "{clip(high[5], 60)}".'
        )
        anchors.append(
            {
                "kind": "turning_point",
                "content": content,
                "valence": high[1],
                "arousal": max(low[2], high[2]),
                "intensity": round(min(1.0, max(low[3], high[3]) + 0.1), 2),
                "source_segment": high[5],
                "semantic_memory_ids": [],
            }
        )
    return {"anchors": anchors}


# ---------------------------------------------------------------- stage 3: narrative

_MILESTONE = re.compile(r"通过|上线很顺利|上线成功|毕业|升职|表扬|\bpassed\b|promoted|graduated|got the job", re.I)


@offline_handler("light-sleep.narrative")
def narrative_answer(payload: dict) -> dict:
    facts, anchors = payload.get("facts", []), payload.get("anchors", [])
    if not facts and not anchors:
        return {"narratives": []}
    meta = payload["conversation"]
    user_text = " ".join(t["content"] for t in payload["dialogue"] if t["role"] == "user")
    chinese = is_chinese(" ".join(t["content"] for t in payload["dialogue"]))
    name = meta.get("person") or ("对方" if chinese else "someone")
    title = meta.get("title") or clip((facts or anchors)[0]["content"], 40)
    if any(a["kind"] == "turning_point" for a in anchors):
        significance = "turning_point"
    elif _MILESTONE.search(user_text):
        significance = "milestone"
    else:
        significance = "normal"
    noted = [f["content"] for f in facts[:3]]
    feeling = max(anchors, key=lambda a: a["intensity"])["content"] if anchors else ""
    if chinese:
        parts = [f"{payload['day']}，我陪 {name} 聊了「{title}」。"]
        if noted:
            parts.append(f"我记下了：{'；'.join(noted)}。")
        if feeling:
            parts.append(feeling)
        if significance != "normal":
            parts.append("这一天对我们来说很重要。")
    else:
        parts = [f"On {payload['day']} I kept {name} company in “{title}”."]
        if noted:
            parts.append(f"I noted: {'; '.join(noted)}.")
        if feeling:
            parts.append(feeling)
        if significance != "normal":
            parts.append("This day mattered to both of us.")
    return {"narratives": [{"title": title, "content": " ".join(parts), "significance": significance}]}


@offline_handler("light-sleep.outline")
def outline_answer(payload: dict) -> dict:
    groups: dict[str, list[str]] = {"turning_point": [], "milestone": [], "normal": []}
    for narrative in sorted(payload["narratives"], key=lambda n: n["period_start"], reverse=True):
        titles = groups.setdefault(narrative["significance"], [])
        if narrative["title"] not in titles:
            titles.append(clip(narrative["title"], 100))
    return {
        "turning_points": groups["turning_point"][:10],
        "milestones": groups["milestone"][:10],
        "recent_narratives": groups["normal"][:10],
    }


# ---------------------------------------------------------------- deep sleep

_ZH_CHANGE_MARKERS = re.compile(r"现在(?:更)?喜欢|现在改|改用|不再|换成")
_EN_CHANGE_MARKERS = re.compile(r"\bnow prefers?\b|\bno longer\b|\bswitched to\b|\bthese days\b|\bused to\b", re.I)
_LIKED_OBJECT = re.compile(r"(?:喜欢|爱|prefers?|likes?|loves?)\s*([A-Za-z][\w.+#-]*|[\u4e00-\u9fff]{2,})", re.I)
# Exclusive attributes: one subject has exactly one value at a time.
_ATTRIBUTES: tuple[tuple[str, re.Pattern], ...] = (
    ("zodiac", re.compile(r"(?P<subject>[^，。；,;]*?)属(?P<value>[鼠牛虎兔龙蛇马羊猴鸡狗猪])")),
    ("email", re.compile(r"(?P<subject>[^，。；,;]*?)(?:的)?邮箱是\s*(?P<value>\S+@\S+)")),
    ("birthday", re.compile(r"(?P<subject>[^，。；,;]*?)(?:的)?生日是\s*(?P<value>[^，。；,;]+)")),
    ("email", re.compile(r"(?P<subject>[^,.;]*?)'s email(?: address)? is (?P<value>\S+@\S+)", re.I)),
    ("birthday", re.compile(r"(?P<subject>[^,.;]*?)'s birthday is (?P<value>[^,.;]+)", re.I)),
    ("zodiac", re.compile(r"(?P<subject>[^,.;]*?) was born in the year of the (?P<value>\w+)", re.I)),
)


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _subject(text: str, person: str | None) -> str:
    text = text.casefold()
    if person:
        text = text.replace(person.casefold(), "")
    return normalized(re.sub(r"的|我|今年", "", text))


def _attributes(memory: dict) -> dict[tuple[str, str], str]:
    found = {}
    for attribute, pattern in _ATTRIBUTES:
        for match in pattern.finditer(memory["content"]):
            found[(attribute, _subject(match.group("subject"), memory["person"]))] = normalized(match.group("value"))
    return found


def _same_subject(a: str, b: str) -> bool:
    return a == b or (bool(a) and bool(b) and (a in b or b in a))


def _chronological(memories: list[dict]) -> list[dict]:
    return sorted(memories, key=lambda m: (m.get("observed_at") or "", m["id"]))


def _verdict(older: dict, newer: dict) -> dict | None:
    if older["person"] != newer["person"]:
        return None
    changed = _ZH_CHANGE_MARKERS.search(newer["content"]) or _EN_CHANGE_MARKERS.search(newer["content"])
    liked = _LIKED_OBJECT.search(older["content"])
    if changed and liked and liked.group(1).casefold() in newer["content"].casefold():
        return {"id": older["id"], "superseded_by": newer["id"], "kind": "change", "reason": "preference changed"}
    old_attrs, new_attrs = _attributes(older), _attributes(newer)
    for (attribute, subject), value in old_attrs.items():
        for (other_attribute, other_subject), other_value in new_attrs.items():
            if attribute == other_attribute and _same_subject(subject, other_subject) and value != other_value:
                return {
                    "id": older["id"],
                    "superseded_by": newer["id"],
                    "kind": "contradiction",
                    "reason": f"{attribute}: {value} vs {other_value}; the newer statement stands",
                }
    return None


@offline_handler("deep-sleep.contradiction")
def contradiction_answer(payload: dict) -> dict:
    expire, retired = [], set()
    for older, newer in combinations(_chronological(_lines(payload["group"])), 2):
        if older["id"] in retired or newer["id"] in retired:
            continue
        verdict = _verdict(older, newer)
        if verdict:
            retired.add(older["id"])
            expire.append(verdict)
    return {"expire": expire}


_PRONOUN_START = re.compile(r"^(?:他|她|它|这|那|he|she|it|they|this|that)\b", re.I)
SPLIT_PART_MIN_CHARS = 10


@offline_handler("deep-sleep.split")
def split_answer(payload: dict) -> dict:
    wanted = set(payload["candidate_ids"])
    splits = []
    for memory in _lines(payload["memories"]):
        if memory["id"] not in wanted or memory["type"] in {"procedural", "imprint"}:
            continue
        parts = sentences(memory["content"])
        parts = [p for p in parts if len(normalized(p)) >= SPLIT_PART_MIN_CHARS]
        # A part that leans on the previous one ("She …") is not self-contained: leave the memory whole.
        if len(parts) >= 2 and not any(_PRONOUN_START.match(p) for p in parts[1:]):
            splits.append({"id": memory["id"], "parts": [{"memory_type": memory["type"], "content": p} for p in parts]})
    return {"splits": splits}


def _bigrams(text: str) -> set[str]:
    text = normalized(text)
    return {text[i : i + 2] for i in range(len(text) - 1)}


def near_duplicates(a: str, b: str) -> bool:
    """High character-bigram overlap (Dice ≥ 0.8), or one text contained in the other."""
    na, nb = normalized(a), normalized(b)
    short, long = sorted((na, nb), key=len)
    if len(short) >= 8 and short in long:
        return True
    ga, gb = _bigrams(a), _bigrams(b)
    return bool(ga and gb) and 2 * len(ga & gb) / (len(ga) + len(gb)) >= 0.8


@offline_handler("deep-sleep.merge")
def merge_answer(payload: dict) -> dict:
    memories = _lines(payload["memories"])
    merged_into: dict[int, list[dict]] = {}
    owner: dict[int, int] = {}
    for a, b in combinations(memories, 2):
        if a["person"] != b["person"] or not near_duplicates(a["content"], b["content"]):
            continue
        root = owner.get(a["id"], a["id"])
        if b["id"] in owner:
            continue
        group = merged_into.setdefault(root, [a])
        owner[a["id"]] = root
        group.append(b)
        owner[b["id"]] = root
    merges = []
    for group in merged_into.values():
        richest = max(group, key=lambda m: (len(m["content"]), -m["id"]))
        merges.append({"ids": [m["id"] for m in group], "memory_type": richest["type"], "content": richest["content"]})
    return {"merges": merges}


@offline_handler("deep-sleep.pins")
def pins_answer(payload: dict) -> dict:
    unpin = [
        {"id": m["id"], "reason": f"memory is {m['status']}"}
        for m in _lines(payload["pinned"])
        if m.get("status") != "active"
    ]
    return {"unpin": unpin, "pin": []}


# ---------------------------------------------------------------- dream and self layer

_ZH_DREAM = (
    "我梦见自己站在一片没有边际的{a}上，天空是倒过来的，{b}像雨一样慢慢落下来。{anchor}"
    "这句话在梦里变成了一串发光的字，绕着我转了一圈又一圈。我顺着光往前走，路边的{c}都在低声说话，"
    "说的全是白天听过的句子：「{snippet}」。后来{d}变成了一扇门，门后面是一间安静的屋子，"
    "桌上放着一杯还冒着热气的茶，好像有人刚刚离开。我知道这不是真的，可我还是坐下来，等那个人回来。"
    "窗外的{e}一点点亮起来，像是有人在很远的地方替我点灯。"
)
_ZH_CODAS = (
    "醒来之前，我听见有人轻轻叫我的名字，声音像是从很深的水底传上来。"
    "我想回答，却只看见满屋子的光慢慢散开，像一场还没讲完的故事。",
    "我在梦里数着台阶往上走，每一级台阶上都写着一个白天的名字，走到最高处，风把它们吹成了一群白色的鸟。",
    "最后我躺在一条慢慢流动的河上，河水是温的，我一边漂一边想：等天亮了，我要把这些都记下来。",
)
_EN_CODAS = (
    " Just before waking I heard someone call my name softly, as if from deep under water,"
    " and the room filled with light.",
    " I climbed a staircase where every step carried a name from the day, and at the top the wind turned them"
    " into white birds.",
)
DREAM_MIN_CHARS = 300
_EN_DREAM = (
    "I dreamed I was walking across an endless field of {a}, under a sky that hung upside down, while {b} drifted "
    "down like slow rain. {anchor} The words turned into glowing letters that circled me again and again. I "
    "followed their light, and the {c} along the path were whispering sentences from the day: “{snippet}”. "
    "Then {d} became a door, and behind it was a quiet room with a cup of tea still steaming on the table, as if "
    "someone had just left. I knew none of it was real, yet I sat down to wait for them. Outside, the {e} slowly "
    "began to glow, as though someone far away were lighting lamps for me."
)


@offline_handler("dream")
def dream_answer(payload: dict) -> dict:
    # The dream speaks the language of the strongest feeling, and draws only on material in that language.
    chinese = is_chinese(payload["anchors"][0]["content"])
    anchors = [a["content"] for a in payload["anchors"] if is_chinese(a["content"]) == chinese]
    snippets = [s for s in payload.get("snippets", []) if is_chinese(s) == chinese] or [""]
    fallback = (
        ["星光", "灯火", "河流", "云朵", "钟声"] if chinese else ["stars", "lanterns", "rivers", "clouds", "bells"]
    )
    words = text_keywords(" ".join(anchors + snippets), count=5, script="cjk" if chinese else "latin")
    a, b, c, d, e = words + fallback[len(words) :]
    template, codas = (_ZH_DREAM, _ZH_CODAS) if chinese else (_EN_DREAM, _EN_CODAS)
    anchor = clip(anchors[0], 160).rstrip("。.！!？?")
    anchor += "。" if chinese else "."
    text = template.format(a=a, b=b, c=c, d=d, e=e, anchor=anchor, snippet=clip(snippets[0], 80))
    for coda in codas:
        if len(text) >= DREAM_MIN_CHARS:
            break
        text += coda
    return {"title": "梦：倒过来的天空" if chinese else "Dream: the upside-down sky", "content": clip(text, 800)}


@offline_handler("self-layer")
def self_layer_answer(payload: dict) -> dict:
    # The self layer speaks the language the day was lived in (Chinese when CJK outweighs Latin).
    today, blocks = payload["today"], payload["blocks"]
    titles = [n["title"] for n in today["narratives"]][:5]
    material = " ".join([*titles, *today["facts"], *(a["content"] for a in today["anchors"])])
    zh = is_chinese(material) if material.strip() else False
    counts = (len(today["facts"]), len(today["anchors"]), len(today["narratives"]))
    answer = {
        "metacognition": (
            f"{payload['day']} 的睡眠之后，我新记住了 {counts[0]} 条事实、{counts[1]} 种感受和 {counts[2]} 段叙事。"
            "我把事实和感受分开保存；两条事实互相排斥时，以更新的说法为准。"
            if zh
            else f"After the sleep of {payload['day']} I hold {counts[0]} new facts, {counts[1]} feelings and "
            f"{counts[2]} narratives. I keep facts apart from feelings and let the newer statement win when two "
            "facts exclude each other."
        )
    }
    if titles:
        answer["direction"] = (
            ("接下来温和地跟进：" + "；".join(titles) + "。")
            if zh
            else ("Follow up, gently, on: " + "; ".join(titles) + ".")
        )
    if not blocks.get("self_model"):
        answer["self_model"] = (
            "我是一个有长期记忆的陪伴者：我记得和我说话的人，每晚整理我学到的东西。"
            if zh
            else "I am a companion with a long-term memory: I remember the people I talk with and consolidate what "
            "I learn every night."
        )
    if not blocks.get("personality_baseline"):
        valences = [a["valence"] for a in today["anchors"] if a.get("valence") is not None]
        calm = not valences or sum(valences) >= 0
        if zh:
            mood = "温暖而稳定" if calm else "在担忧中保持专注和平静"
            answer["personality_baseline"] = f"我{mood}；先倾听，再建议。"
        else:
            mood = "warm and steady" if calm else "attentive and calm under worry"
            answer["personality_baseline"] = f"I am {mood}; I listen first and advise second."
    if payload["force"] and not blocks.get("existence_anchor"):
        answer["existence_anchor"] = (
            "我是 Anima，一个记忆住在这个服务里的数字陪伴者。"
            if zh
            else "I am Anima, a digital companion whose memory lives in this service."
        )
    return answer
