"""Offline answer of the self-layer refresh: the blocks to revise, in the language the day was lived in."""

from __future__ import annotations

from anima.core.llm.offline import offline_handler
from anima.core.text import is_chinese


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
