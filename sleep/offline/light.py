"""Offline answers of light sleep: facts, limbic anchors, the day's narrative, the autobiography outline."""

from __future__ import annotations

import re

from anima.core.llm.offline import offline_handler
from anima.core.text import clip, is_chinese, normalized, sentences
from sleep.offline._shared import bigrams

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
    grams = bigrams(segment)
    return [f["id"] for f in facts if len(grams & bigrams(f["content"])) >= 3]


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
