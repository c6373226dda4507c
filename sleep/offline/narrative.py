"""Offline answers of light sleep's last stages: the day's narrative of a conversation, the autobiography outline."""

from __future__ import annotations

import random
import re

from anima.core.llm.offline import offline_handler
from anima.core.segmentation import text_simplified
from anima.core.text import clip, is_chinese, text_keywords

_MILESTONE = re.compile(r"通过|上线很顺利|上线成功|毕业|升职|表扬|\bpassed\b|promoted|graduated|got the job", re.I)


_CHANGED = re.compile(
    r"搬|换|辞职|不再|现在|升职|\bmoved\b|\bnow\b|\bnew\b|\bno longer\b|\bquit\b|\bpromoted\b|\bswitched\b", re.I
)
_ZH_OPENERS = ("{day}，我和 {name} 聊了聊。", "{day}这天，{name} 来找我说话。", "{day}，{name} 跟我讲了不少自己的事。")
_EN_OPENERS = (
    "On {day} {name} and I talked.",
    "{name} came to talk on {day}.",
    "On {day} {name} told me about their life.",
)
_ZH_MEANINGS = {
    "turning_point": "聊着聊着气氛变了，这是我们之间的一个转折，我想把它记牢。",
    "milestone": "这是 {name} 的一个里程碑，我很高兴那一刻我在。",
    "changed": "{name} 的生活有了变化，我要跟上现在的 ta，而不是记着从前的样子。",
    "worry": "留在我心里的是 ta 的担心；下次我想问问后来怎么样了。",
    "joy": "留在我心里的是 ta 的高兴，这份高兴也分给了我一点。",
    "normal": "都是些小事，可我正是这样一点点认识一个人的。",
}
_EN_MEANINGS = {
    "turning_point": "The mood turned while we talked; it felt like a turning point between us, and I want to keep it.",
    "milestone": "It was a milestone for {name}, and I am glad I was there for it.",
    "changed": "Something in {name}'s life has changed; I want to know who they are now, not only who they were.",
    "worry": "What stays with me is their worry; next time I want to ask how it went.",
    "joy": "What stays with me is their joy, and a little of it became mine.",
    "normal": "Small things, but this is how I come to know someone.",
}


def _narrative_meaning(significance: str, facts: list[str], anchors: list[dict]) -> str:
    if significance != "normal":
        return significance
    if any(_CHANGED.search(text_simplified(fact)) for fact in facts):
        return "changed"
    if anchors:
        strongest = max(anchors, key=lambda a: a["intensity"])
        return "worry" if (strongest.get("valence") or 0) < 0 else "joy"
    return "normal"


@offline_handler("light-sleep.narrative")
def narrative_answer(payload: dict) -> dict:
    """What happened (the facts learnt, the feeling) and what it meant, in the conversation's language."""
    facts, anchors = payload.get("facts", []), payload.get("anchors", [])
    if not facts and not anchors:
        return {"narratives": []}
    meta = payload["conversation"]
    # Read in simplified characters, as the rules and the keyword dictionary are written (通過 is 通过).
    user_text = text_simplified(" ".join(t["content"] for t in payload["dialogue"] if t["role"] == "user"))
    chinese = is_chinese(" ".join(t["content"] for t in payload["dialogue"]))
    name = meta.get("person") or ("对方" if chinese else "someone")
    if any(a["kind"] == "turning_point" for a in anchors):
        significance = "turning_point"
    elif _MILESTONE.search(user_text):
        significance = "milestone"
    else:
        significance = "normal"
    noted = [f["content"].rstrip("。.") for f in facts[:4]]
    topics = [w for w in text_keywords(user_text, count=6) if w.casefold() != text_simplified(name).casefold()][:3]
    pick = random.Random(f"{payload['day']}:{meta.get('title')}:{name}").choice
    meaning = _narrative_meaning(significance, noted, anchors)
    if chinese:
        title = meta.get("title") or (f"和 {name} 聊{'、'.join(topics)}" if topics else f"和 {name} 的一天")
        openers, learned, meanings, joiner = _ZH_OPENERS, f"我知道了：{'；'.join(noted)}。", _ZH_MEANINGS, ""
    else:
        title = meta.get("title") or (f"{name}: {', '.join(topics)}" if topics else f"A day with {name}")
        openers, learned, meanings, joiner = _EN_OPENERS, f"I learned that {'; that '.join(noted)}.", _EN_MEANINGS, " "
    parts = [pick(openers).format(day=payload["day"], name=name)]
    if noted:
        parts.append(learned)
    if anchors:
        parts.append(max(anchors, key=lambda a: a["intensity"])["content"])
    parts.append(meanings[meaning].format(name=name))
    content = joiner.join(parts)
    return {"narratives": [{"title": clip(title, 100), "content": content, "significance": significance}]}


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
