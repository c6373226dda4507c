"""Offline answer of the dream: a surreal first-person dream in the language of the strongest feeling."""

from __future__ import annotations

from anima.core.llm.offline import offline_handler
from anima.core.text import clip, is_chinese, text_keywords

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
