"""The Chinese slot grammar: a subject (the person, a relative or pet, optionally named), then one predicate
per attribute."""

from __future__ import annotations

import functools
import re

from anima.core.relations import ZH_RELATIONS, ZH_WORDS_LONGEST_FIRST
from anima.core.segmentation import word_tags
from sleep.slots._english import Reading
from sleep.slots._slot import SELF, Slot
from sleep.slots._values import number_value, value_normalized

# ---------------------------------------------------------------- Chinese grammar

_ZH_REL = "|".join(ZH_WORDS_LONGEST_FIRST)
_ZH_PET_WORDS = (
    "柯基|泰迪|金毛|哈士奇|柴犬|拉布拉多|边牧|萨摩耶|比熊|博美|橘猫|布偶|英短|美短|狸花猫|蓝猫|暹罗|加菲|"
    + "|".join(
        k for k, v in ZH_RELATIONS.items() if v in {"cat", "dog", "rabbit", "hamster", "parrot", "turtle", "fish"}
    )
)
_ZH_NUM = r"[零一二两三四五六七八九十百\d]+"
_ZH_STATES = {
    "怀孕": ("status", "pregnant"),
    "退休": ("status", "retired"),
    "失业": ("job", "unemployed"),
    "离婚": ("marital", "divorced"),
    "单身": ("marital", "single"),
}
_ZH_CATEGORIES = {
    "电影": "film",
    "片子": "film",
    "乐队": "band",
    "歌手": "singer",
    "明星": "artist",
    "歌": "song",
    "歌曲": "song",
    "专辑": "album",
    "书": "book",
    "小说": "book",
    "作家": "author",
    "电视剧": "show",
    "剧": "show",
    "综艺": "show",
    "动漫": "show",
    "颜色": "colour",
    "菜": "food",
    "食物": "food",
    "水果": "fruit",
    "零食": "snack",
    "饮料": "drink",
    "游戏": "game",
    "运动": "sport",
    "球队": "team",
    "城市": "city",
    "地方": "place",
    "动物": "animal",
    "花": "flower",
    "季节": "season",
    "餐厅": "restaurant",
    "语言": "language",
    "编程语言": "language",
    "演员": "actor",
    "导演": "director",
}
_ZH_CAT = "|".join(sorted(_ZH_CATEGORIES, key=len, reverse=True))
# Occupation nouns end in these (老师, 程序员, 医生, 护士, 会计, 司机, 策划, 老板 …).
_ZH_JOB_END = re.compile(
    r"(?:师|员|生|家|手|工|长|经理|老板|士|司机|会计|策划|主播|博主|模特|编辑|记者|总监|主管|专员|顾问|"
    r"代购|店主|负责人|保安|保姆|厨子|木匠|农民|警察|军人|设计|运营|产品|开发|HR|hr|助理)$"
)
_ZH_FREQUENCY = re.compile(
    r"每(?:天|周|週|晚|个?月|年|周末|个周末|天早上|天晚上|次)|平时|经常|常常|一般|通常|总是|周[一二三四五六日末天]|天天|偶尔|习惯"
)
_ZH_HEDGE = re.compile(
    # 朋友 is someone else, but 女朋友 / 男朋友 a partner
    r"如果|假如|要是|是不是|吗|呢？|？|\?|觉得我|你觉得|我觉得|可能会|不知道|(?<![男女])朋友|同事|别人|有人|听说"
)
_ZH_TIME_LEAD = re.compile(
    r"^(?:(?:明年|今年|去年|下个?月|上个?月|这个?月|下周[一二三四五六日末天]?|上周[一二三四五六日末天]?|这周[一二三四五六日末天]?|"
    r"周[一二三四五六日末天]|星期[一二三四五六日天]|明天|后天|昨天|今天|前天|最近|现在|目前|以后|后来|上周|下周|刚才|刚刚|"
    r"这些天|这几天|这阵子|这段时间|这些日子|这两年|这几年|近来|近期|如今|眼下|当下|"
    r"\d+月\d+[日号]?|[一二三四五六七八九十]+月[一二三四五六七八九十]+[日号]?)\s*)+"
)
_ZH_LEADING = re.compile(
    r"^(?:但是|但|不过|而且|其实|所以|对了|顺便说一下|顺便记一下|顺便|说实话|老实说|跟你说个事|跟你说|告诉你|嗯+|哈+|"
    r"好吧|好的|唉|哎|诶|啊|呃|另外|还有|然后|总之|一是|二是|三是|话说|说起来|对|是的|没错|因为|"
    # a lead-in announcing news (「告诉你个好消息」, 「你猜怎么着」) says nothing itself
    r"(?:告诉你|跟你说|和你说|给你说)?(?:(?:一?个|件)(?:好|大|坏|新)?(?:消息|喜讯|事儿?)|(?:好|大|新)?(?:消息|喜讯))|"
    r"有(?:一?个|件)(?:好|大|新)?(?:消息|喜讯|事儿?)|官宣|你猜怎么着|猜猜怎么着|猜猜看)+[，,、！!：:]?"
)


def zh_names(text: str) -> list[str]:
    """The names a list gives (「叫咪咪和豆豆」, 「分别叫大黄、小黑」, 「咪咪和豆豆」); [] when it is anything else.

    Bare names need two or more, and none a relation or pet word (「猫和狗」 names nobody)."""
    named = re.match(r"^(?:分别|都)?(?:叫做|叫|名叫|名字叫|名字是|名字分别是)", text)
    parts = re.split(r"[和跟与、]", text[named.end() :] if named else text)
    if not named and len(parts) < 2:
        return []
    words = re.compile(rf"(?:{_ZH_REL}|{_ZH_PET_WORDS})$")
    fine = all(re.fullmatch(r"[\u4e00-\u9fff]{1,4}|[A-Za-z][a-z]+", p) and not words.match(p) for p in parts)
    return parts if fine else []


def _zh_thing(text: str) -> str:
    text = re.split(r"[，,；;。！!？?]|因为|所以|但是|不过|一.就", text)[0]
    text = re.sub(r"^(?:吃|喝|碰|用|玩|看|听|去|做|抽|吸)", "", text)
    return value_normalized(text)[:12]


_ZH_PREDICATES: tuple[tuple[str, re.Pattern], ...] = tuple(
    (attribute, re.compile(pattern))
    for attribute, pattern in (
        ("name", r"^(?:叫|名字叫|名字是|的名字是|的名字叫)\s*(?P<value>[\w\u4e00-\u9fff]{1,12})"),
        (
            "email",
            # Taiwan writes 信箱 (or 电子邮件) and Hong Kong 电邮 for what the mainland calls 邮箱.
            r"^(?:的)?(?:新)?(?:邮箱|电子邮箱|邮件地址|电子邮件|信箱|电邮|email|Email|E-mail)(?:地址)?(?:是|：|:)\s*"
            r"(?P<value>\S+@[\w.-]+\w)",
        ),
        ("phone", r"^(?:的)?(?:新)?(?:电话|手机|手机号|电话号码|手机号码)(?:是|：|:)\s*(?P<value>[+\d][\d\s-]{5,})"),
        ("birthday", r"^(?:的)?生日(?:是|在)\s*(?P<value>[^，,。；;！!？?]+)"),
        (
            "age",
            rf"^(?:今年|已经|都|刚|刚刚|上个月|这个月|昨天|前天|今天|现在)*(?:满|过了)?\s*(?P<value>{_ZH_NUM})\s*(?:周)?岁",
        ),
        ("age", rf"^(?:今年|已经|现在)?是?\s*(?P<value>{_ZH_NUM})\s*(?:周)?岁"),
        ("zodiac", r"^(?:是)?属(?P<value>[鼠牛虎兔龙蛇马羊猴鸡狗猪])"),
        ("age", rf"^(?:今年|已经|都|现在)*(?:满)?(?P<value>{_ZH_NUM})了$"),
        (
            "origin",
            r"^(?:老家|家乡|出生在|出生于|老家在|老家是)\s*(?:是|在)?\s*(?P<value>[\u4e00-\u9fff]{2,6}?)(?:的|人|$|[，,。])",
        ),
        ("origin", r"^是\s*(?P<value>[\u4e00-\u9fff]{2,3})人$"),
        ("job", r"^(?:现在|目前)?的?(?:工作|职业)(?:是|为)\s*(?:一名|一个|个)?(?P<value>[^，,。；;！!？?]+)"),
        (
            "job",
            r"^(?:现在|目前|还|还是|一直|也)*(?:在|给)[^，,。；;]{1,16}?(?:当|做|干|(?=开))\s*(?P<value>[^，,。；;！!？?了]{1,12})",
        ),
        (
            "job",
            r"^(?:现在|目前|还|还是|一直|也)*在?(?:当|做|干)(?:了)?\s*(?:一名|一个|名)?(?P<value>[^，,。；;！!？?了]{1,10})",
        ),
        ("job", r"^(?:是|是个|是一名|是一个)?(?P<value>(?:开|做|干|搞)[^，,。；;！!？?]{1,8})的$"),
        # 「是护士」 is a job, 「是东北人」 where the person comes from
        (
            "job_or_origin",
            r"^(?:现在|目前|还|还是|一直|也)*是\s*(?:一名|一个|一位|个|名)?(?P<value>[^，,。；;！!？?]{1,10})$",
        ),
        (
            "uses",
            r"^(?:平时|现在|一般|日常|工作中|工作上)*(?:主要|基本|一般|平时|大多|多半)(?:都|还是)?(?:用|写|使用)\s*(?P<value>[A-Za-z][\w.+#-]*|[\u4e00-\u9fff]{2,8})",
        ),
        ("workplace", r"^(?:现在|目前|还|一直|也)*在\s*(?P<value>[^，,。；;！!？?]{2,16}?)(?:工作|上班|任职|实习)"),
        # 「现在在北京漂着」「跟老伴在郑州住」: where one lives, told by the place first
        (
            "residence",
            r"^(?:现在|目前|一直|还|也|都)*(?:(?:跟|和)[\u4e00-\u9fff]{1,4}?)?在\s*(?P<value>[\u4e00-\u9fffA-Za-z]{2,8}?)"
            r"(?:生活|定居|安家|漂着|住着|住)(?:了)?$",
        ),
        (
            "residence",
            r"^(?:现在|目前|一直|还|也|都)*(?:住在|住|定居在|定居|生活在)\s*(?P<value>[\u4e00-\u9fffA-Za-z]{2,12}?)"
            r"(?:生活|住|定居|$|[，,。]|的|那边|这边|附近|市|区)",
        ),
        (
            "residence",
            r"^(?:已经|刚|刚刚|上周|上个月|最近|去年|今年|要|就要|快要|马上|即将|将)*"
            r"(?:搬到|搬去|搬回到?|搬家到|搬家去|移居到?|移民到|移民去|迁到|调到)了?\s*(?P<value>[\u4e00-\u9fffA-Za-z]{2,8}?)"
            r"(?:了|去|来|住|工作|生活|$|[，,。])",
        ),
        (
            "study",
            r"^(?:现在|目前|还|也)*在\s*(?P<value>[^，,。；;！!？?]{0,10}?(?:读|上)(?:大学|研究生|研|博|博士|高中|初中|小学|书|学))",
        ),
        ("study", r"^(?:读|上)(?P<value>(?:大|高|初)[一二三四]|(?:小学|初中|高中|大学)?[一二三四五六]年级)"),
        ("allergy", r"^(?:对|吃)\s*(?P<value>[^，,。；;！!？?]{1,10}?)\s*(?:严重|有点|有些|特别|非常)?过敏"),
        ("allergy", r"^(?P<value>[\u4e00-\u9fff]{1,6})过敏"),
        ("diet", r"^(?:是)?(?P<value>素食主义者|素食者|吃素的|吃素|纯素|清真)"),
        (
            "restriction",
            r"^(?:从来|从)?(?:不|不能|不敢|不可以|没法|不太能|不怎么|戒了|忌口|忌)\s*(?P<verb>吃|喝|碰|抽|吸)\s*(?P<value>[^，,。；;！!？?]{1,10})",
        ),
        (
            "favourite",
            # 「最爱听的乐队」 names the kind with a verb; a kind not listed is its own word (「组合」)
            rf"^(?:现在|目前|一直)?最(?:喜欢|爱|喜爱)(?:听|看|吃|喝|玩|读|用|去)?的(?P<category>{_ZH_CAT}|[\u4e00-\u9fff]{{1,4}}?)"
            r"(?:现在|目前|已经|也|最近|如今)?(?:是|换成|变成|改成|成了)(?:了)?\s*(?P<value>[^，,。；;！!？?]+)",
        ),
        (
            "unlikes",
            r"^(?:现在|已经|也)*(?:不再|不|没那么|没有那么)(?:讨厌|怕|害怕|反感|烦)\s*(?P<value>[^，,。；;！!？?]{1,12})",
        ),
        # 「我戒奶茶了」: what was liked no longer is
        ("unlikes", r"^(?:现在|已经|终于|也)*戒(?:掉)?了?\s*(?P<value>[^，,。；;！!？?了]{1,10})了?$"),
        # 「现在改喝美式」: what is liked now
        ("likes", r"^(?:现在|已经|最近|也)*改(?:成)?(?:喝|吃|听|看|玩|用)\s*(?P<value>[^，,。；;！!？?了]{1,10})了?$"),
        (
            "dislikes",
            r"^(?:现在|一直|也|都|还是|还|真的|特别|非常|很|超|最|真|好)*(?:不喜欢|讨厌|受不了|不爱|烦|怕|害怕|反感|不感冒)\s*(?P<value>[^，,。；;！!？?]{1,12})",
        ),
        (
            "likes",
            r"^(?:现在|一直|也|都|还是|还|真的|特别|非常|很|超|最|挺|蛮|更|超级|平时)*(?:喜欢|爱|热爱|喜爱|迷上了|迷上|爱上了|爱上|沉迷)\s*(?P<value>[^，,。；;！!？?]{1,12})",
        ),
        (
            "stopped",
            r"^(?:已经|现在)?(?:不再|戒了|不|没再)(?P<value>(?:开|做|干|弹|打|玩|跑|去|练|学|抽|喝)[^，,。；;！!？?]{1,10})了",
        ),
        # 「怀孕了」, 「还单身」: a state, in the English grammar's words so that both languages compare
        ("state", rf"^(?:已经|刚|刚刚|现在|目前|还|还是|一直)*(?:是)?(?P<value>{'|'.join(_ZH_STATES)})(?:了|的|呢)?$"),
        # 「在学日语」 (not 「在学校」: a place)
        (
            "learning",
            r"^(?:现在|最近|目前|一直|也)*(?:在|正在)(?:自学|学习|学|练习|练)(?!校|院|堂|生|期|费)\s*(?P<value>[^，,。；;！!？?]{1,10})",
        ),
        ("plan", r"^(?:打算|计划|准备|想要|决定|要去|要|会去|报名了?|约了)\s*(?P<value>[^，,。；;！!？?]{2,20})"),
        (
            "event",
            r"^有(?:个|一个|一场|场)?\s*(?P<value>[^，,。；;！!？?]{0,10}(?:考试|面试|会议|手术|复查|体检|约会|婚礼|比赛|演出|航班|出差|旅行|答辩))",
        ),
        ("event", r"^的?(?P<value>预产期|婚期|考试|面试|手术|婚礼|答辩)(?:是|在)\s*(?P<date>[^，,。；;！!？?]+)"),
        (
            "has",
            rf"^(?:养了|养着|养|有|家里有)\s*(?P<value>(?:{_ZH_NUM}|几)?\s*(?:个|只|条|位|头)?\s*(?:{_ZH_REL}|{_ZH_PET_WORDS}))"
            r"(?:[，,]?\s*(?:叫|名叫|名字叫)\s*(?P<pname>[\u4e00-\u9fffA-Za-z]{1,6}))?",
        ),
        (
            "habit",
            r"^(?P<freq>(?:每[天周晚月年个早上晚周末次]{1,4}|平时|经常|常常|一般|通常|总是|周[一二三四五六日末天]|天天|偶尔)*)"
            r"(?:都|也|还)*(?P<value>[^，,。；;！!？?]{2,14})",
        ),
        ("passed", r"^(?:去世|过世|走了)(?P<value>)"),
        (
            "achieved",
            r"^(?P<value>[^，,。；;！!？?]{0,8}?(?:通过|考过|考上|拿到|毕业|升职|结婚|订婚|录取|中奖)了[^，,。；;！!？?]{0,12})",
        ),
        (
            "achieved",
            r"^(?P<value>(?:通过了|考过了|考上了|拿到了|毕业了|升职了|结婚了|订婚了|录取了|中了)[^，,。；;！!？?]{0,12})",
        ),
    )
)


# 「老婆预产期是二月」: what a predicate is about, right after a relation, is no name of theirs.
_ZH_NOT_NAMES = re.compile(
    r"^(?:预产期|婚期|生日|邮箱|电话|手机|工作|职业|考试|面试|手术|婚礼|答辩|"
    # 「老伴以前是开大车的」: when, not who
    r"以前|之前|现在|目前|最近|平时|一直|原来|本来|后来|如今|刚才|马上)"
)


def _zh_subject(clause: str, *, name: str) -> tuple[str, str, str] | None:
    """(subject, subject name, rest) at the start of a Chinese clause, or None."""
    # The household speaks for the person too: 「我们全家搬到成都」 is where they live.
    own = f"|{re.escape(name)}(?:他们|家)?" if name else ""
    household = f"(?:我们|咱们|咱|我{own})?(?:全家人?|一家(?:[三四五六七]口)?人?|一家子)|我和家人|我跟家人"
    selves = f"{household}|我们家|咱们家|咱家|我家|我们|咱们|我{own}"
    # 「大女儿」, 「小儿子」: which of them, then the relation
    match = re.match(
        rf"^(?:{selves})\s*(?:的)?\s*(?:[大小二三](?={_ZH_REL}))?(?P<rel>{_ZH_REL}|{_ZH_PET_WORDS})(?P<rest>.*)$",
        clause,
    )
    if match:
        rel = match.group("rel")
        relation = ZH_RELATIONS.get(rel) or ("dog_or_cat:" + rel)
        rest = match.group("rest").strip()
        named = re.match(
            r"^(?:叫|名叫|名字叫|名字是|的名字是)\s*(?P<n>[\u4e00-\u9fffA-Za-z]{1,6}?)"
            rf"(?=[，,]|今年|已经|在|是|也|$|{_ZH_NUM}岁)",
            rest,
        )
        if named:
            after = rest[named.end() :].lstrip("，, ")
            return relation, named.group("n"), after or f"叫{named.group('n')}"
        # 「我女儿小雨属虎」: a name right after the relation, before what is said about them
        bare = re.match(
            rf"^\s*(?P<n>[\u4e00-\u9fff]{{2,3}}?|[A-Z][a-z]+)\s*(?=属|今年|已经|在|是|也|满|{_ZH_NUM}岁)", rest
        )
        if (
            bare
            and not _ZH_TIME_LEAD.match(bare.group("n"))
            and not re.match(r"^(?:也|都|还|就|在|是)", bare.group("n"))
            and not _ZH_NOT_NAMES.match(bare.group("n"))
        ):
            return relation, bare.group("n"), rest[bare.end() :].strip()
        return relation, "", rest
    match = re.match(rf"^(?:{selves})(?P<rest>.*)$", clause)
    if match:
        return SELF, "", match.group("rest").strip()
    return None


@functools.lru_cache(maxsize=1024)
def _zh_place_like(value: str) -> bool:
    """Whether 「是 X 人」's X can be a place: 「好人」「个好人」 say what someone is like, not where they are from, and
    「老家寄来的腊肠」 what was sent from there."""
    # An adjective, a verb, a numeral or a measure word (jieba's a*, v*, m, q tags) is no place.
    return bool(value) and not any(flag[:1] in {"a", "v"} or flag in {"m", "q"} for _, flag in word_tags(value))


def _zh_reading(subject: str, sub_name: str, rest: str) -> Reading | None:
    # 「今年三十四」: a bare number after 今年 / 现在 is an age, as 「三十四岁」 (the time word goes next).
    rest = re.sub(rf"^((?:今年|现在)(?:已经|都)?满?{_ZH_NUM})了?$", r"\1岁", rest.strip())
    rest = _ZH_TIME_LEAD.sub("", rest).strip()
    for attribute, pattern in _ZH_PREDICATES:
        match = pattern.search(rest)
        if not match:
            continue
        raw = match.group("value")
        if raw.startswith(("的", "得")):
            # 「我住的那条街」「我喜欢的那家店」: the verb tells which street or shop, and 「准备得还挺充分」 how well
            # it went; neither says what the person does.
            continue
        key, value = "", ""
        if attribute == "name":
            if subject == SELF:
                return Reading(Slot(SELF, "", "name", "", value_normalized(raw)))
            return Reading(Slot(subject, raw, "name", "", raw))
        if attribute in {"email", "phone", "birthday", "origin", "workplace", "study", "uses", "zodiac"}:
            value = value_normalized(raw)
            if attribute == "origin" and not _zh_place_like(value):
                continue
        elif attribute == "age":
            value = number_value(raw)
        elif attribute == "residence":
            value = value_normalized(re.sub(r"(?:市|省|区)$", "", raw))[:4]
        elif attribute in {"job", "job_or_origin"}:
            value = value_normalized(re.sub(r"^(?:一名|一个|一位|个|名)", "", raw))
            if not value or not (_ZH_JOB_END.search(value) or re.match(r"^(?:开|做|干|搞|当)", value) or "的" in raw):
                if attribute == "job_or_origin" and value.endswith("人") and _zh_place_like(value[:-1]):
                    return Reading(Slot(subject, sub_name, "origin", "", value[:-1]))
                continue
            attribute, value = "job", re.sub(r"^(?:当|做|干)", "", value)
        elif attribute in {"allergy", "restriction"}:
            key, value = _zh_thing(raw), "+"
            if not key:
                continue
            if attribute == "restriction":
                attribute, key = "diet", "不" + match.group("verb") + key
        elif attribute == "diet":
            attribute, value = "diet", "vegetarian"
        elif attribute == "favourite":
            category = match.group("category")
            attribute, value = f"favourite:{_ZH_CATEGORIES.get(category, category)}", value_normalized(raw)
        elif attribute == "unlikes":
            attribute, key, value = "likes", _zh_thing(raw), "0"
        elif attribute in {"likes", "dislikes"}:
            key = _zh_thing(raw)
            if not key or key in {"你", "这个", "那个", "他", "她", "它", "这样", "那样"}:
                return None
            value = "-" if attribute == "dislikes" else "+"
            attribute = "likes"
        elif attribute == "stopped":
            attribute, key, value = "activity", _zh_thing(raw), "no"
        elif attribute in {"plan", "learning"}:
            attribute, key, value = "activity", _zh_thing(raw), "+"
        elif attribute == "state":
            attribute, value = _ZH_STATES[raw]
        elif attribute == "event":
            date = match.groupdict().get("date")
            attribute, key, value = "event", _zh_thing(raw), value_normalized(date) if date else "+"
        elif attribute == "has":
            count = re.match(rf"({_ZH_NUM}|几)", raw)
            word = re.search(rf"({_ZH_REL}|{_ZH_PET_WORDS})", raw).group(1)
            relation = ZH_RELATIONS.get(word) or ("dog_or_cat:" + word)
            if match.group("pname") and len(zh_names(match.group("pname"))) < 2:  # 「叫咪咪和豆豆」 is a count
                return Reading(Slot(relation, match.group("pname"), "name", "", match.group("pname")))
            return Reading(Slot(SELF, "", f"count:{relation}", "", number_value(count.group(1)) if count else "1"))
        elif attribute == "habit":
            if not match.group("freq") and not re.match(r"^会(?:弹|打|拉|吹|说|讲|做|画|写|游|跳|唱|下)", raw):
                continue
            attribute, key, value = "activity", _zh_thing(re.sub(r"^(?:会|在)?去?", "", raw)), "+"
        elif attribute == "passed":
            attribute, value = "alive", "no"
        elif attribute == "achieved":
            attribute, key, value = "event", value_normalized(raw), "done"
        return Reading(Slot(subject, sub_name, attribute, key, value))
    return None


def zh_read(clause: str, *, name: str = "", subject_hint: tuple[str, str] | None = None) -> Reading | None:
    """The fact one Chinese clause states about the person (``name`` also stands for 我), or None."""
    clause = clause.strip().rstrip("。！!；;")
    if not clause or _ZH_HEDGE.search(clause):
        return None
    clause = _ZH_TIME_LEAD.sub("", clause)
    me = f"我|{re.escape(name)}" if name else "我"  # a fact says it of the person by name
    restricted = re.match(
        rf"^(?:医生|大夫)(?:不让|不许|叫我别|让我别|让我少|叫我少|要我少|要我别)(?:{me})?(吃|喝|碰)太?(.{{1,8}})$",
        clause,
    )
    if restricted:
        return Reading(Slot(SELF, "", "diet", "不" + restricted.group(1) + _zh_thing(restricted.group(2)), "+"))
    # 「五月天是我最喜欢的乐队」 says the same as 「我最喜欢的乐队是五月天」
    whose = f"我|我们|{re.escape(name)}" if name else "我|我们"
    inverted = re.match(
        r"^(?P<value>(?!这|那|它|他|她|哪|谁|什么)[^，,]{1,12}?)(?:现在|如今|已经|也|一直)?(?:是|成了|成为了?|变成了?)"
        rf"(?P<whose>{whose})(?:现在|目前|最近|如今)?(?P<favourite>最(?:喜欢|爱|喜爱)(?:听|看|吃|喝|玩|读|用|去)?的"
        r"[\u4e00-\u9fff]{1,4})$",
        clause,
    )
    if inverted:
        clause = f"{inverted.group('whose')}{inverted.group('favourite')}是{inverted.group('value')}"
    subject = _zh_subject(clause, name=name)
    if subject is None:
        named = re.match(
            rf"^(?P<who>[\u4e00-\u9fff]{{2,3}}?)(?P<rest>(?:今年|今天|已经|上个月|刚|都|也|还)*(?:满|过了)?{_ZH_NUM}岁.*)$",
            clause,
        )
        if named and subject_hint is None and not re.match(r"^(?:他|她|它|这|那|你|今|明|去|每)", named.group("who")):
            return _zh_reading("", named.group("who"), named.group("rest"))
        if re.match(r"^(?:他|她|它)", clause) and subject_hint:
            return _zh_reading(subject_hint[0], subject_hint[1], clause[1:])
        return None
    return _zh_reading(*subject)
