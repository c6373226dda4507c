"""Offline answer of the dream: a surreal first-person dream composed from the night's material.

A dream is assembled from interchangeable movements — where it begins, what the place does,
who or what appears, what changes shape, how it ends — each with several variants in both
languages. The day's own words (from its memories, narratives and snippets; never the people's
names) are the objects the dream handles, and the strongest feeling sets its weather. A random
generator seeded by the day picks one variant per movement, so each night reads differently and
re-running a night gives the same dream.
"""

from __future__ import annotations

import random
import re

from anima.core.llm.offline import offline_handler
from anima.core.segmentation import text_simplified
from anima.core.text import KEYWORD_STOPWORDS, clip, is_chinese, text_keywords

DREAM_MIN_CHARS = 300
DREAM_MAX_CHARS = 800

# Weather of the dream by the strongest feeling's valence: heavy, mixed, bright.
_ZH_WEATHER = {
    "heavy": ("下着不会落地的雨", "雾浓得能用手捧起来", "灯一盏一盏往后退", "钟声被水泡得很慢"),
    "mixed": ("天色在黄昏和清晨之间来回摆", "风一阵暖一阵凉", "云低得能碰到屋檐", "影子比人走得快一步"),
    "bright": ("阳光像蜂蜜一样流下来", "天空是刚洗过的蓝", "到处是轻轻的铃声", "地面像水面一样发亮"),
}
_EN_WEATHER = {
    "heavy": (
        "rain fell without ever reaching the ground",
        "the fog was thick enough to hold in my hands",
        "the lamps kept stepping back from me one by one",
        "every bell rang slowly, as if under water",
    ),
    "mixed": (
        "the sky swung between dusk and dawn",
        "the wind came warm and then cold",
        "the clouds hung low enough to touch the roofs",
        "the shadows walked one step ahead of everyone",
    ),
    "bright": (
        "sunlight ran down the walls like honey",
        "the sky was a freshly washed blue",
        "small bells were ringing everywhere",
        "the ground shone like the surface of a lake",
    ),
}
_ZH_OPENINGS = (
    "我梦见自己在一座没有名字的车站醒来，{weather}。",
    "梦里我走进一间很长的走廊，{weather}。",
    "我梦见我住在一座漂在海上的图书馆里，{weather}。",
    "梦的开头，我站在一座旋转的楼梯中间，{weather}。",
    "我梦见自己变成了一封还没寄出的信，{weather}。",
    "梦里是一座只有夜晚的城市，{weather}。",
)
_EN_OPENINGS = (
    "I dreamed I woke up in a station that had no name, and {weather}.",
    "In the dream I walked into a corridor that kept getting longer, and {weather}.",
    "I dreamed I lived in a library floating on the sea, where {weather}.",
    "The dream began halfway up a turning staircase; {weather}.",
    "I dreamed I had become a letter nobody had posted yet, and {weather}.",
    "It was a city where it was always night, and {weather}.",
)
_ZH_OBJECTS = (
    "每扇门上都用粉笔写着「{a}」，我一扇一扇地推开，里面都是空的，却都很暖和。",
    "有人塞给我一个盒子，说里面装着「{a}」，我不敢打开，只是一直抱着它走。",
    "墙上的钟没有指针，只有「{a}」和「{b}」两个词，轮流亮起来。",
    "我在口袋里摸到一张车票，目的地写的是「{a}」，出发时间是「{b}」。",
    "一群纸鹤从我身边飞过，每一只翅膀上都写着「{a}」。",
)
_EN_OBJECTS = (
    "Every door had “{a}” chalked on it; I opened them one by one and found each room empty but warm.",
    "Someone pressed a box into my hands and said “{a}” was inside; I did not dare open it and carried it on.",
    "The clock on the wall had no hands, only the words “{a}” and “{b}”, lighting up in turn.",
    "In my pocket I found a ticket whose destination read “{a}”, departing at “{b}”.",
    "A flock of paper cranes flew past me, and every wing had “{a}” written on it.",
)
_ZH_ENCOUNTERS = (
    "后来我遇见一个看不清脸的人，他反复对我说：「{echo}」我点点头，好像早就知道。",
    "一只很老的猫坐在台阶上，用人的声音念着：「{echo}」。",
    "河对岸有人在喊一句白天听过的话：「{echo}」，声音被风剪成了好几段。",
    "我在镜子里看见自己在说话，嘴里说的是：「{echo}」。",
)
_EN_ENCOUNTERS = (
    "Then I met someone whose face I could not make out; they kept telling me, “{echo}”, and I nodded as if I "
    "had known all along.",
    "A very old cat sat on the steps and recited, in a human voice, “{echo}”.",
    "Across the river someone was shouting a sentence from the day — “{echo}” — and the wind cut it into pieces.",
    "In a mirror I saw myself speaking, and what I said was “{echo}”.",
)
_ZH_TURNS = (
    "忽然整条路折了起来，像一张地图被人合上，我掉进了「{c}」的中间。",
    "接着所有东西都慢慢变轻，连我的担心也飘到了天花板上，贴在那里像一张旧海报。",
    "然后「{c}」开始下雪，雪是温的，落在手心里变成一行行字。",
    "下一刻我发现自己在数台阶，每一级台阶都是一天，我数到「{c}」就停了。",
)
_EN_TURNS = (
    "Suddenly the whole road folded up like a map being closed, and I fell into the middle of “{c}”.",
    "Then everything grew slowly lighter, even my worries, which floated up to the ceiling and stuck there like "
    "old posters.",
    "Then it began to snow over “{c}”; the snow was warm, and in my palm it turned into lines of writing.",
    "Next I was counting stairs, each one a day, and I stopped when I reached “{c}”.",
)
_ZH_ENDINGS = {
    "heavy": (
        "快醒的时候，雨终于落了地，我听见有人轻轻说：没关系，慢慢来。",
        "最后我把那个盒子放在窗台上，窗外有一点点亮光，我知道天快亮了。",
    ),
    "mixed": (
        "醒来之前，我回头看了一眼，那座城市正在一点点变成早晨。",
        "最后风停了，我坐下来，等一个我说不出名字的人回来。",
    ),
    "bright": (
        "醒来的时候我还在笑，像是刚刚有人在梦里替我点了一盏灯。",
        "最后我跟着光走出去，外面是一片很大的草地，所有的字都变成了花。",
    ),
}
_EN_ENDINGS = {
    "heavy": (
        "Just before waking the rain finally reached the ground, and someone said softly: it's all right, take "
        "your time.",
        "In the end I set the box on a windowsill; there was a little light outside, and I knew it was nearly morning.",
    ),
    "mixed": (
        "Before I woke I looked back once, and the city was slowly turning into morning.",
        "At last the wind dropped, and I sat down to wait for someone whose name I could not say.",
    ),
    "bright": (
        "I woke up still smiling, as if someone in the dream had just lit a lamp for me.",
        "In the end I followed the light outside into a wide meadow where every word had turned into a flower.",
    ),
}
# Movements without the day's words, to carry a short dream to its length.
_ZH_INTERLUDES = (
    "我走过一座桥，桥下的水是倒着流的，流回了早上。",
    "路边的窗户一扇接一扇亮起来，每一扇里都有人在低声说话，说的都是我听过的事。",
    "我想跑，脚下却是软软的云，一步只能挪一点点，可我一点也不着急。",
    "有一列火车从我身边慢慢开过，车厢里坐满了白天的声音。",
    "我捡起一片叶子，叶子上的纹路是一张我认得的地图。",
    "远处有人在放风筝，线的另一头系着一盏很小的灯，一会儿亮，一会儿暗。",
    "我推开一扇窗，外面是小时候住过的院子，可院子里的树都长成了书架。",
)
_EN_INTERLUDES = (
    "I crossed a bridge over a river that flowed backwards, back into the morning.",
    "Windows lit up one after another along the street, and in each someone was murmuring about things I had heard.",
    "I tried to run, but the ground was soft cloud and every step took forever, and I did not mind at all.",
    "A slow train went past me, its carriages full of the day's voices.",
)
_ZH_TITLES = (
    "梦：无名车站",
    "梦：变长的走廊",
    "梦：海上的图书馆",
    "梦：旋转楼梯",
    "梦：没寄出的信",
    "梦：只有夜晚的城市",
)
_EN_TITLES = (
    "Dream: the nameless station",
    "Dream: the lengthening corridor",
    "Dream: the library at sea",
    "Dream: the turning staircase",
    "Dream: the unposted letter",
    "Dream: the city of night",
)
# A title names the place the dream opened in, with the night's first word when it has one.
_ZH_FALLBACK = ["星光", "灯火", "河流", "云朵", "钟声"]
_EN_FALLBACK = ["starlight", "lanterns", "rivers", "clouds", "bells"]


def _mood(anchors: list[dict]) -> str:
    valence = float(anchors[0].get("valence") or 0)
    return "heavy" if valence < -0.3 else "bright" if valence > 0.3 else "mixed"


def _words(payload: dict, *, chinese: bool) -> list[str]:
    """The day's own things, people's names left out (a dream does not cast anyone as a landscape)."""
    names = {text_simplified(name).casefold() for name in payload.get("people", []) if name}
    memories = [m for m in payload.get("memories", []) if is_chinese(m) == chinese]
    if chinese:
        material = [a["content"] for a in payload["anchors"]] + memories + payload.get("snippets", [])
        material += [n["title"] + " " + n["content"] for n in payload.get("narratives", [])]
        # Read in simplified characters, as the dream around them is written and the stop words are (時候 is 时候).
        text = text_simplified(" ".join(t for t in material if is_chinese(t)))
        words = text_keywords(text, count=12, script="cjk")
    else:
        # What an English fact is about ends it ("… plays the cello", "… lives in Lisbon").
        words = [found[-1] for m in memories if (found := re.findall(r"[A-Za-z][\w'-]*", m))]
        words = [w for w in dict.fromkeys(words) if len(w) >= 3 and w.casefold() not in KEYWORD_STOPWORDS]
    return [w for w in words if not any(w.casefold() in n for n in names)]


def _echo(payload: dict, *, chinese: bool) -> str:
    lines = [s for s in payload.get("snippets", []) if is_chinese(s) == chinese and s.strip()]
    line = lines[0] if lines else payload["anchors"][0]["content"]
    return clip(line, 40 if chinese else 90).rstrip("。.！!？?，,")


@offline_handler("dream")
def dream_answer(payload: dict) -> dict:
    # The dream speaks the language of the strongest feeling.
    chinese = is_chinese(payload["anchors"][0]["content"])
    rng = random.Random(f"{payload['day']}:{'zh' if chinese else 'en'}")
    mood = _mood(payload["anchors"])
    words = _words(payload, chinese=chinese)
    fallback = list(_ZH_FALLBACK if chinese else _EN_FALLBACK)
    rng.shuffle(fallback)
    rng.shuffle(words)
    a, b, c = (words + fallback)[:3]
    weathers, openings, objects, encounters, turns, endings, titles = (
        (_ZH_WEATHER, _ZH_OPENINGS, _ZH_OBJECTS, _ZH_ENCOUNTERS, _ZH_TURNS, _ZH_ENDINGS, _ZH_TITLES)
        if chinese
        else (_EN_WEATHER, _EN_OPENINGS, _EN_OBJECTS, _EN_ENCOUNTERS, _EN_TURNS, _EN_ENDINGS, _EN_TITLES)
    )
    middle = [
        rng.choice(objects).format(a=a, b=b),
        rng.choice(encounters).format(echo=_echo(payload, chinese=chinese)),
        rng.choice(turns).format(c=c),
    ]
    rng.shuffle(middle)  # the order of the middle movements changes from night to night too
    opening = rng.randrange(len(openings))
    parts = [openings[opening].format(weather=rng.choice(weathers[mood])), *middle, rng.choice(endings[mood])]
    separator = "" if chinese else " "
    text = separator.join(parts)
    spare = list(_ZH_INTERLUDES if chinese else _EN_INTERLUDES)
    while len(text) < DREAM_MIN_CHARS and spare:
        parts.insert(rng.randrange(1, len(parts)), spare.pop(rng.randrange(len(spare))))
        text = separator.join(parts)
    title = (titles[opening] + (f"·{a}" if chinese else f" and “{a}”")) if words else titles[opening]
    return {"title": title, "content": clip(text, DREAM_MAX_CHARS)}
