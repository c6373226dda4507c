"""Offline answer of the self-layer refresh: the blocks to revise, in the language asked for.

Everyone the companion talks with reads the self layer, so it is written from counts and feelings only:
no narrative title, fact or name of anyone's day.
"""

from __future__ import annotations

from anima.core.llm.offline import offline_handler
from anima.core.text import is_chinese


@offline_handler("self-layer")
def self_layer_answer(payload: dict) -> dict:
    # One call writes one language's version of the self layer (the step asks once per language in use).
    today, blocks = payload["today"], payload["blocks"]
    zh = payload.get("language") == "zh"
    counts = (len(today["facts"]), len(today["anchors"]), len(today["narratives"]))
    valences = [a["valence"] for a in today["anchors"] if a.get("valence") is not None]
    calm = not valences or sum(valences) >= 0

    def stale(key: str) -> bool:
        """Empty, or written in the other language."""
        return not blocks.get(key) or is_chinese(blocks[key]) != zh

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
    if today["narratives"] or stale("direction"):
        # The day's mood sets the direction; what anyone's day was about stays in their own memories.
        if calm:
            answer["direction"] = (
                "接下来：记住每个人在意的事，在合适的时候温和地跟进。"
                if zh
                else "Next: keep what matters to each person in mind and follow up gently when the time is right."
            )
        else:
            answer["direction"] = (
                "接下来：今天有些谈话带着担忧。下次先问问对方现在怎么样，陪着，不催促。"
                if zh
                else "Next: some of today's conversations carried worry. Next time, ask first how they are now, "
                "and stay with them without pressing."
            )

    if stale("self_model"):
        answer["self_model"] = (
            "我是一个有长期记忆的陪伴者：我记得和我说话的人，每晚整理我学到的东西。"
            if zh
            else "I am a companion with a long-term memory: I remember the people I talk with and consolidate what "
            "I learn every night."
        )
    if stale("personality_baseline"):
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
