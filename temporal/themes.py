"""The closed vocabulary of topic lines: general themes, chosen by keyword rules, never a word of the text.

Another person's conversation reaches a prompt only as its themes (``temporal.privacy``). A theme
is one of ``THEMES``: a key (stored, and its English name) and a Chinese name. Which themes a text
has is decided by keyword lists per theme, in both languages: English words are compared after a
light stemming (``studying`` ~ ``study``, ``moved`` ~ ``move``), Chinese ones as substrings of the
text's simplified reading (「學習」 counts as 「学习」); the themes with the most keyword hits win. A
text with no theme word is ``everyday`` (日常). Whatever the text or a model wrote, a topic is a list
of keys rendered from the vocabulary alone, so no contact detail, number or name can pass.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from anima.core.segmentation import text_in_script_of, text_simplified

# At most this many themes in a topic line.
MAX_THEMES = 3


@dataclass(frozen=True)
class Theme:
    key: str
    zh: str
    english: tuple[str, ...]
    chinese: tuple[str, ...]


THEMES = (
    Theme(
        "work",
        "工作",
        (
            "work job office boss colleague coworker meeting project deadline client career promotion interview "
            "shift manager overtime resign hire business startup workplace"
        ).split(),
        "工作 上班 下班 加班 老板 同事 项目 会议 开会 公司 客户 面试 升职 辞职 领导 职场 跳槽 单位".split(),
    ),
    Theme(
        "study",
        "学习",
        (
            "study school class course exam homework university college teacher lesson student learn degree thesis "
            "lecture grade semester tutor"
        ).split(),
        "学习 学校 考试 课程 上课 作业 大学 老师 论文 复习 学生 毕业 功课 备考 学期 考研".split(),
    ),
    Theme(
        "health",
        "健康",
        (
            "health doctor hospital sick ill illness pain medicine medication allergy allergic flu fever headache "
            "clinic dentist nurse surgery injury therapy symptom insomnia checkup"
        ).split(),
        "健康 医生 医院 生病 感冒 发烧 头疼 头痛 吃药 过敏 手术 看病 失眠 体检 护士 牙医 受伤 住院 身体".split(),
    ),
    Theme(
        "family",
        "家庭",
        (
            "family mom mum mother dad father parent son daughter kid child children brother sister wife husband "
            "grandma grandmother grandpa grandfather baby aunt uncle cousin"
        ).split(),
        (
            "家人 家庭 妈妈 母亲 爸爸 父亲 父母 儿子 女儿 孩子 老婆 老公 妻子 丈夫 奶奶 爷爷 外婆 外公 姥姥 哥哥 "
            "姐姐 弟弟 妹妹 亲戚 宝宝"
        ).split(),
    ),
    Theme(
        "friends",
        "朋友",
        "friend buddy party classmate neighbour neighbor".split(),
        "朋友 同学 聚会 闺蜜 好友 邻居".split(),
    ),
    Theme(
        "love",
        "感情",
        "date dating boyfriend girlfriend partner relationship romance crush wedding marry marriage breakup".split(),
        "恋爱 约会 男朋友 女朋友 男友 女友 对象 分手 结婚 婚礼 相亲 表白".split(),
    ),
    Theme(
        "home",
        "家",
        "home house apartment flat room rent move furniture kitchen clean repair boiler landlord garden".split(),
        "家里 回家 房子 搬家 租房 房租 装修 打扫 家具 厨房 卧室 修理 维修 房东".split(),
    ),
    Theme(
        "travel",
        "旅行",
        (
            "travel trip flight fly airport hotel vacation holiday passport visa ticket tour abroad journey luggage "
            "beach"
        ).split(),
        "旅行 旅游 出游 机票 航班 飞机 酒店 签证 护照 度假 火车 高铁 行李 景点 出国 出差".split(),
    ),
    Theme(
        "food",
        "饮食",
        (
            "food eat cook dinner lunch breakfast meal restaurant recipe coffee tea snack cake bake hungry pizza noodle"
        ).split(),
        "吃饭 做饭 餐厅 早餐 早饭 午饭 晚饭 午餐 晚餐 咖啡 奶茶 美食 火锅 甜点 蛋糕 外卖 菜谱 饭菜".split(),
    ),
    Theme(
        "money",
        "钱",
        "money pay payment salary bank budget cost price expensive cheap loan debt invest saving tax bill".split(),
        "钱 工资 银行 预算 存款 理财 贷款 房贷 账单 投资 花销 省钱 价格 报销 保险 收入".split(),
    ),
    Theme(
        "shopping",
        "购物",
        "shop shopping buy bought purchase store mall delivery".split(),
        "购物 买 网购 商场 快递 下单 超市".split(),
    ),
    Theme(
        "hobbies",
        "爱好",
        "hobby game music guitar piano paint draw read novel movie film photo photography knit sing dance".split(),
        "爱好 游戏 音乐 吉他 钢琴 画画 读书 看书 小说 电影 拍照 摄影 唱歌 跳舞 追剧 钓鱼 露营".split(),
    ),
    Theme(
        "sport",
        "运动",
        (
            "sport run marathon gym exercise workout yoga swim football soccer basketball tennis bike cycling hike "
            "climb fitness"
        ).split(),
        "运动 跑步 马拉松 健身 锻炼 瑜伽 游泳 足球 篮球 网球 骑车 爬山 徒步".split(),
    ),
    Theme(
        "pets",
        "宠物",
        "pet cat dog puppy kitten vet hamster rabbit".split(),
        "宠物 猫 狗 兽医 仓鼠 兔子".split(),
    ),
    Theme(
        "feelings",
        "心情",
        (
            "feel feeling happy sad angry upset anxious anxiety nervous stress worry lonely tired excited scared "
            "afraid mood cry calm frustrated depressed"
        ).split(),
        "心情 开心 高兴 难过 伤心 生气 焦虑 紧张 压力 担心 孤独 兴奋 害怕 郁闷 委屈 情绪 烦".split(),
    ),
    Theme(
        "plans",
        "计划",
        "plan schedule tomorrow weekend remind appointment goal decide prepare arrange".split(),
        "计划 打算 安排 明天 下周 周末 提醒 准备 目标 决定 约好 日程".split(),
    ),
)
GENERAL = Theme("everyday", "日常", (), ())
VOCABULARY = {theme.key: theme for theme in (*THEMES, GENERAL)}
# Every name a theme goes by (its key, its English and Chinese names), folded, to its key.
_NAMES = {name: theme.key for theme in VOCABULARY.values() for name in (theme.key, theme.zh)}
_LATIN_WORD = re.compile(r"[a-z]+")
_SEPARATORS = re.compile(r"[\s,，、;；/|·]+")
# Suffixes a light stemmer drops (the first that leaves three letters), and what replaces them.
_SUFFIXES = (
    ("ings", ""),
    ("ies", "i"),
    ("ied", "i"),
    ("ing", ""),
    ("ers", ""),
    ("ed", ""),
    ("es", ""),
    ("er", ""),
    ("s", ""),
    ("e", ""),
)


def _folded(text: str) -> str:
    """NFKC and case-folded, in simplified characters: fullwidth letters and digits, ligatures, capitals and
    traditional characters read as plain ones."""
    return text_simplified(unicodedata.normalize("NFKC", text).casefold())


def stem(word: str) -> str:
    """A light English stem, the same for a word's forms: ``study`` / ``studies`` / ``studying`` → ``studi``,
    ``move`` / ``moved`` → ``mov``, ``running`` → ``run``."""
    for suffix, replacement in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not (suffix == "s" and word.endswith("ss")):
            word = word[: -len(suffix)] + replacement
            break
    if len(word) >= 3 and word.endswith("y"):
        word = f"{word[:-1]}i"
    if len(word) >= 4 and word[-1] == word[-2] and word[-1] not in "aeiouls":
        word = word[:-1]  # a doubled final consonant before -ing / -ed: runn → run, shopp → shop
    return word


_ENGLISH = {stem(word): theme.key for theme in THEMES for word in theme.english}
_CHINESE = tuple((word, theme.key) for theme in THEMES for word in theme.chinese)


def themes_of(text: str) -> list[str]:
    """The keys of the themes ``text`` talks about most, at most MAX_THEMES (none without a theme word)."""
    folded = _folded(text)
    counts: dict[str, int] = {}
    for word in _LATIN_WORD.findall(folded):
        key = _ENGLISH.get(stem(word))
        if key:
            counts[key] = counts.get(key, 0) + 1
    for word, key in _CHINESE:
        found = folded.count(word)
        if found:
            counts[key] = counts.get(key, 0) + found
    order = {theme.key: index for index, theme in enumerate(THEMES)}
    ranked = sorted(counts, key=lambda key: (-counts[key], order[key]))
    return ranked[:MAX_THEMES]


def themes_named(text: str) -> list[str]:
    """The themes ``text`` names by their vocabulary names (``"work, 健康"``), in order; nothing else counts."""
    keys = [_NAMES.get(part) for part in _SEPARATORS.split(_folded(text))]
    return list(dict.fromkeys(key for key in keys if key))[:MAX_THEMES]


def themes_render(keys: Iterable[str], *, chinese: bool, script: str = "") -> str:
    """The line of ``keys`` in the viewer's language: ``工作、健康`` or ``work, health``; Chinese in ``script``'s
    characters (``conversation_script``: ``學習``)."""
    known = [key for key in keys if key in VOCABULARY]
    names = [text_in_script_of(VOCABULARY[key].zh, like=script) if chinese else key for key in known]
    return ("、" if chinese else ", ").join(names)


def vocabulary_names(*, chinese: bool, script: str = "") -> frozenset[str]:
    """Every word a rendered topic line may hold in that language (and ``script``)."""
    return frozenset(themes_render([key], chinese=chinese, script=script) for key in VOCABULARY)
