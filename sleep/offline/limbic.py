"""Offline answers of light sleep's second stage: the feelings a conversation shows, as limbic anchors."""

from __future__ import annotations

import re

from anima.core.llm.offline import offline_handler
from anima.core.segmentation import jieba_get, text_ruled, text_simplified
from anima.core.text import clip, is_chinese, sentences
from sleep.offline._shared import bigrams

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
# The word right before a feeling that takes it back (「不担心」, 「别焦虑」); read as words, so that the 别 of
# 「特别焦虑」 or the 少 of 「不少」 is no negation.
_ZH_NEGATIONS = frozenset("不 没 别 少 没有 不太 不再 从不 毫不 并不 不会 不用 甭".split())
_EN_NEGATION = {"not", "never", "less", "no", "isn't", "wasn't", "don't", "didn't"}
_FEELINGS = {
    "worry": ("我感到担心，也很牵挂", "I feel worried for {name}"),
    "tired": ("我感到心疼", "I feel a tender concern for {name}"),
    "sad": ("我感到难过", "I feel sad alongside {name}"),
    "relief": ("我感到如释重负", "I feel relieved with {name}"),
    "joy": ("我感到由衷的高兴", "I feel genuinely happy for {name}"),
}


# Words between a negation and the feeling that leave it negated (「不太开心」, 「没那么担心」).
_ZH_DEGREE = frozenset(_ZH_INTENSIFIERS) | frozenset("太 那么 这么 怎么 是 很 多 大".split())


def _zh_negated(before: str) -> bool:
    words = [word for word in jieba_get().lcut(before) if word.strip()]
    while words and words[-1] in _ZH_DEGREE:
        words.pop()
    return bool(words) and words[-1] in _ZH_NEGATIONS


def _emotion_hits(sentence: str) -> list[tuple[float, float, float, str]]:
    hits = []
    sentence = text_ruled(sentence)  # as the lexicons are written: 開心 is 开心, "don’t" is "don't"
    if is_chinese(sentence):
        for word, (valence, arousal, base, family) in _ZH_EMOTIONS.items():
            at = sentence.find(word)
            if at < 0 or _zh_negated(sentence[:at]):
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
    grams = bigrams(text_simplified(segment))
    return [f["id"] for f in facts if len(grams & bigrams(text_simplified(f["content"]))) >= 3]


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
