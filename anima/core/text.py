"""Language-agnostic text helpers: language detection, sentence-aware caps, dedupe keys, keywords."""

from __future__ import annotations

import copy
import functools
import hashlib
import re
import unicodedata

from anima.core.errors import AnimaError

# The longest message, memory or history text Anima stores (characters). Search indexes every row
# whole: at this size the worst text measured (distinct two-letter words, CJK runs) makes a
# ~0.3 MB tsvector, well under PostgreSQL's 1 MB limit. jieba segments it in about a second for
# ordinary Chinese; random CJK characters (all unknown words) take it 10-25 s on a small machine.
MAX_TEXT_CHARS = 100_000


def text_bounded(value: str, *, field: str, limit: int = MAX_TEXT_CHARS) -> str:
    """``value`` when it has at most ``limit`` characters; else an error naming ``field``."""
    if len(value) > limit:
        raise AnimaError(f"{field} is longer than {limit} characters ({len(value)})", field=field)
    return value


_CJK_RE = re.compile(r"[\u3400-\u9fff]")
# The CJK ideographs jieba segments and search indexes: the unified blocks and the compatibility ideographs.
CJK_IDEOGRAPH = "[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]"
_LATIN_RE = re.compile(r"[A-Za-z]")


def normalized(text: str) -> str:
    """Content compared for dedupe: NFKC, case-folded, whitespace and punctuation dropped."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in text if ch.isalnum())


def same_content_key(content: str) -> str:
    """What counts as "the same fact": the project's dedupe form (``normalized``: NFKC, case-folded, letters and
    digits only, as the nightly dedupe compares), or, for a text without letters or digits, the text itself."""
    return normalized(content) or " ".join(content.split()).casefold()


def content_key(text: str) -> str:
    return hashlib.sha1(normalized(text).encode()).hexdigest()[:16]


# ASCII only: an address written against Chinese text (「我的邮箱是leo@example.com。」) ends where the Latin does.
_ADDRESS_RE = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*|https?://[!-~]+")


def without_addresses(text: str) -> str:
    """``text`` with its e-mail addresses and links blanked: they carry neither a theme nor a language."""
    return _ADDRESS_RE.sub(" ", text)


def is_chinese(text: str) -> bool:
    """True when CJK characters outweigh Latin letters (one CJK char carries about a word)."""
    return len(_CJK_RE.findall(text)) * 3 >= max(len(_LATIN_RE.findall(text)), 1)


# Sentence ends: CJK and Latin marks, semicolons, line breaks; a Latin period only before whitespace, so
# "v1.2" and "leo@example.com" stay whole.
_SENTENCE_END = re.compile(r"(?<=[。！？!?；;\n])|(?<=\.)\s+")


def text_straight(text: str) -> str:
    """``text`` with straight apostrophes: phones type a right single quotation mark for one ("don’t forget"), and
    rules are written with the straight one ("don't")."""
    return text.replace("\u2019", "'")


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, stripped, empty ones left out."""
    return [part.strip() for part in _SENTENCE_END.split(text) if part.strip()]


def clip(text: str, limit: int) -> str:
    """Hard-cut to ``limit`` characters, preferring the last sentence end inside the limit."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[:limit]
    ends = [cut.rfind(mark) for mark in "。！？.!?\n"]
    best = max(ends)
    return cut[: best + 1].rstrip() if best >= limit // 2 else cut.rstrip()


# Function words that carry no topic, in Chinese and English: dropped from every query (the ``english``
# config drops English ones in the database too; listing them keeps them out of the trigram text and of a
# passage's keywords), from keywords and from the words that group facts by subject.
FUNCTION_WORDS = frozenset(
    """
    的 了 是 我 你 他 她 它 们 我们 你们 他们 她们 吗 呢 啊 吧 呀 哦 嗯 啥 什么 怎么 怎样 这 那 这个 那个 这些 那些
    在 有 和 与 及 就 都 也 还 要 会 能 可以 对 把 被 给 让 从 到 向 又 很 太 更 最 没 没有 不 不是 一个 一些 一下
    自己 这样 那样 如何 为什么 哪 哪里 哪儿 多少 几 个 么 着 过 得 地 之 其 而 或 但 但是 如果 因为 所以 然后 还是
    真的 觉得 知道 记得 感觉 现在 时候 一起 一点 已经 非常 特别 今天 哈哈 好的 当然 是不是 有没有 一定 应该
    a an the and or not but if of to in on at by for with from as is are was were be been being am do does did
    have has had i me my you your he him his she her it its we us our they them their this that these those
    what which who whom whose when where why how can could will would shall should may might must just so
    very too also about into than then there here s t don didn doesn isn aren wasn weren im ive youre oh yes no
    dont doesnt didnt cant couldnt wouldnt shouldnt isnt arent wasnt werent havent hasnt hadnt wont aint hes shes
    thats whats hows whos wheres theres heres theyre youll youve youd theyll theyve theyd weve lets
    """.split()
)
# Chat words that are not function words but make poor keywords of a day or a dream.
KEYWORD_STOPWORDS = FUNCTION_WORDS | frozenset(
    "after again any because before doing down during each few further having hers more most much now off once "
    "only other out over own same some such through under until while yours really maybe think thing things going "
    "today tomorrow yesterday morning night well okay thanks thank haha feel felt said says like got get gets went "
    "gone definitely completely mostly better worse probably actually little less lots kind sure good great always "
    "never ever every anything something nothing time times tonight".split()
    # Chinese time and filler words jieba tags as nouns in running text (「等会儿」「时候」).
    + "会儿 一会儿 等会儿 时候 东西 事情 时间 样子 地方 办法 一下 一点 有点 今天 明天 昨天 晚上 早上 上午 下午 "
    "现在 刚才 以后 之前 感觉 真的 还是 那个 这个 什么 怎么 怎么样 为什么".split()
)


# What people say to keep a conversation going rather than about anything: greetings and farewells, thanks and
# apologies, acknowledgements and back-channel replies, interjections and laughter, in both languages. A message
# of nothing but these and function words names nothing to remember (``anima.core.segmentation.text_informative``).
CHAT_WORDS = KEYWORD_STOPWORDS | frozenset(
    """
    hi hello hey hiya howdy yo sup hola greetings welcome afternoon evening goodnight gn gm bye goodbye byebye cya
    ciao later ttyl brb gtg bbl soon see talk chat catch thx ty tysm appreciate appreciated cheers please pls plz
    sorry apologies pardon excuse ok kk okey alright right yeah yep yup yea ya nope nah fine cool nice awesome
    perfect excellent wonderful lovely neat sweet amazing fantastic true indeed exactly totally absolutely agree
    agreed same lot gotcha understood noted sounds sound seems fair fun funny lol lmao rofl hmm hm mm uh um oh ah wow
    whoa omg oops ugh yay meh huh eh np worries problem back day care glad hear heard new up doing whatever anyway
    all one enough re ll ve make makes take hope pleasure sense dream dreams enjoy everything guess let gotta go
    best hilarious happy okie dokie dokey wait interesting wild crazy legit cute bless ikr fr tbh ngl imo smh heya
    alrighty righto ta tada brilliant fancy classic bet anytime finally mate dear lmk afk oof rad seriously truly
    goodness pretty sec gonna wanna lemme gimme kinda sorta dunno honestly literally basically genuinely frankly
    obviously welp anyhoo anyways nighty congrats congratulations xd qaq orz awsl yyds xswl tql ツ tnx thanx thnks
    sry srry soz gud nite gnite helo hlo lolz lulz jk idc wyd hbu nvm ttys yw ur luv ily xo hugs cu l8r gr8 tmrw tmr
    tonite mua muah der dude bruh slay iconic periodt yikes rip sheesh based vibes nm ofc yessir aight lowkey
    highkey doge nb nbnb dbq xdm u1s1 yysy qwq
    """.split()
    + """
    你好 您好 嗨 哈喽 哈啰 早 早安 早上好 上午好 中午 中午好 下午好 晚上好 晚安 拜拜 再见 回见 再会 回头 下次 改天 晚点
    谢谢 谢 多谢 感谢 谢啦 辛苦 客气 没事 没关系 不用 好 好好 好滴 好嘞 好哒 行 嗯嗯 嗯呢 哦 噢 喔 哇 哇塞 嘛 哈 嘿 嘿嘿
    嘻嘻 呵呵 唉 哎 哎呀 哎哟 天 天哪 对 对对 是的 没错 收到 明白 了解 懂 懂了 同意 道理 真的假 假 假的 厉害 棒
    不错 还行 还好 一般 凑合 干嘛 在吗 聊 见 见面 又 回来 问题 好久不见 加油 恭喜 真 忙 休息 早点 原来如此 先 开心 高兴
    快乐 愉快 好梦 抱抱 么么哒 午安 耶 可爱 再聊 回聊 明儿见 无语 小可爱 亲爱的 额 酱紫 肿么 神马 偶 卧槽 吓死 破防 事
    掰 掰掰 赞 超赞 太赞 真赞 超棒 超好 好险 不用谢 酱子 母汤 蛤 齁 欸 唷 确实 裂开 冲冲
    """.split()
)
# Set phrases of greeting, farewell, praise, agreement, sympathy and reassurance whose words, read one by one, would
# name something ("long", "job", "mind", "plan"): a message is read without them first, and what else it says still
# counts ("long time no see, how is Miso?").
CHAT_PHRASES = (
    "long time no see",
    "sleep well",
    "nice to meet you",
    "good to know",
    "good luck",
    "good job",
    "well done",
    "keep it up",
    "not bad",
    "no big deal",
    "no way",
    "never mind",
    "my bad",
    "just kidding",
    "how come",
    "take it easy",
    "sleep tight",
    "see you around",
    "a bunch",
    "a bit",
    "for real",
    "you rock",
    "thanks for asking",
    "thanks a million",
    "checking in",
    "whatever works",
    "works for me",
    "fair point",
    "good point",
    "sounds like a plan",
    "hold on",
    "no stress",
    "long day",
    "cool beans",
    "big same",
    "that's rough",
    "gotta run",
    "off to bed",
    "ta-da",
    "how's life treating",
    "how's life",
    "total sense",
    "head out",
    "heading out",
    "killing me",
    "say less",
    "no cap",
    "just saying",
    "don't worry",
    "big mood",
    "i'm dead",
    # Chinese greetings whose words name a topic elsewhere (吃饭 in 「猫不爱吃饭」, 最近 in 「最近在忙项目」).
    "吃饭了吗",
    "吃过了吗",
    "最近怎么样",
    "最近好吗",
    "最近如何",
    "最近咋样",
    "最近忙啥",
    "有人吗",
    "可不是",
    "一路顺风",
    "祝你好运",
    "随便聊聊",
    "没什么",
    "说得对",
    "说的对",
    "让我想想",
    "没毛病",
    "等下",
    "待会",
    "下回见",
    "没啥事",
    "木有",
    "介个",
    "什么情况",
    "神马情况",
    "栓q",
    "泰裤辣",
    "不愧是你",
    "有意思",
    "有点意思",
    "笑出声",
    "刚看到",
    "才看到",
    # Internet slang whose characters name a thing or a city elsewhere (牛, 蚌埠).
    "牛逼",
    "蚌埠住了",
    "有一说一",
)
# Interjections and laughter however long they are drawn out: 哈哈哈哈, 嗯嗯嗯, hahaha, lolol, hmmm, emmm, mhm, ahhh.
CHAT_SOUND = re.compile(
    r"[哈嘿嘻呵嗯哦噢喔哇呀啦嘛哼唉哎啊嘞哒滴咯喽哟呗啰呜嘤嗝欸齁唷]+|(?:h+[aeiou]+)+h*|(?:l+o+)+l+|l+m+a+o+|h*m+|e+m+|m+h+m+|u+h+"
    r"|a+h+|o+h+|a+w+|w+o+w+"
)


# Nouns (and English words, tagged "eng"): verbs like 「没查」「老问」 make poor themes.
_KEYWORD_POS = ("n", "ns", "nz", "nt", "nw", "vn", "eng")


def text_keywords(text: str, *, count: int, script: str = "") -> list[str]:
    """Top content words (jieba TF-IDF): CJK words of ≥ 2 chars, other words of ≥ 4 letters minus stopwords.

    Words are cut as search cuts them (``anima.core.segmentation.word_tags``): a word of a script jieba does not
    segment is one word ("café", «Казани»), full-width letters are ASCII ("ｉＰｈｏｎｅ" is "iPhone").
    ``script`` "cjk" or "latin" keeps only words of that script ("latin": every word without a CJK character).
    """
    words = []
    for word in _keyword_extractor().extract_tags(text, topK=count * 4, allowPOS=_KEYWORD_POS):
        chinese = bool(_CJK_RE.search(word))
        if script and (script == "cjk") != chinese:
            continue
        if not chinese:
            if len(word) < 4 or not word.isalpha() or word.casefold() in KEYWORD_STOPWORDS:
                continue
        elif len(word) < 2 or word in KEYWORD_STOPWORDS:
            continue
        words.append(word)
    return words[:count]


@functools.cache
def _keyword_extractor():
    """jieba's TF-IDF keyword extractor (its IDF table and stop words) over segmentation's tagged words: jieba alone
    cuts a word at every letter outside ASCII ("caf" + "é")."""
    # Through segmentation, which quiets jieba's log before its dictionary loads (and imports this module).
    from anima.core.segmentation import jieba_get, word_tags

    jieba_get()
    import jieba.analyse
    import jieba.posseg

    class Tagger:
        @staticmethod
        def cut(sentence: str) -> list:
            return [jieba.posseg.pair(word, tag) for word, tag in word_tags(sentence)]

    extractor = copy.copy(jieba.analyse.default_tfidf)
    extractor.postokenizer = Tagger()
    return extractor


# ---------------------------------------------------------------- first person → third person

# Kin words after 我 take 的 (「我女儿」 → 「Leo 的女儿」).
_ZH_KIN_WORDS = (
    "外孙女|女朋友|男朋友|女儿|闺女|儿子|孩子|小孩|宝宝|老婆|妻子|媳妇|太太|老公|丈夫|先生|对象|妈妈|母亲|爸爸|父亲|哥哥|"
    "弟弟|姐姐|妹妹|奶奶|外婆|姥姥|爷爷|外公|姥爷|孙子|孙女|外孙|猫|狗|妈|爸"
)
_EN_KEEP_VERBS = frozenset(
    "can can't cannot could couldn't will won't would wouldn't should shouldn't must mustn't might may did didn't "
    "was wasn't had got quit went made took gave left came began became bought found lost met ran saw said put "
    "kept felt sold told thought taught brought grew spent wrote spoke drove rode swam ate drank sang knew flew fell "
    "held heard sat slept stood won wore broke chose forgot paid built sent meant".split()
)
_EN_ADVERBS = frozenset(
    "really usually always often normally regularly sometimes mostly also still actually just now currently "
    "recently finally never rarely absolutely totally kind sort of truly honestly basically".split()
)
_EN_PERSONAL = {"i'm": "is", "i am": "is", "i've": "has", "i'd": "would", "i'll": "will"}
_EN_FAMILY = {"we're": "is", "we've": "has", "we'd": "would", "we'll": "will"}


def _en_verb(word: str) -> str:
    lower = word.casefold()
    if lower in _EN_KEEP_VERBS or lower.endswith("ed") or (lower.endswith("n't") and lower != "don't"):
        return word
    special = {"do": "does", "don't": "doesn't", "have": "has", "are": "is", "am": "is", "go": "goes", "'re": "is"}
    if lower in special:
        return special[lower]
    if re.search(r"(?:s|sh|ch|x|z|o)$", lower):
        return f"{word}es"
    if re.search(r"[^aeiou]y$", lower):
        return f"{word[:-1]}ies"
    return f"{word}s"


def third_person_en(clause: str, name: str) -> str:
    """A first-person English statement about ``name`` in the third person ("I'm from Porto" → "Ana is from Porto")."""
    text = clause.replace("’", "'")
    for subjects, subject in ((_EN_PERSONAL, name), (_EN_FAMILY, f"{name}'s family")):
        for first, verb in subjects.items():
            text = re.sub(rf"^{re.escape(first)}\b", f"{subject} {verb}", text, flags=re.I)
    text = re.sub(r"^the (whole |entire )?family\b", rf"{name}'s \1family", text, flags=re.I)
    words = text.split()
    if words and words[0].casefold() in {"i", "we"}:
        subject = name if words[0].casefold() == "i" else f"{name}'s family"
        index = 1
        while index < len(words) and words[index].casefold() in _EN_ADVERBS:
            index += 1
        if index < len(words):
            words[index] = _en_verb(words[index])
        words[0] = subject
        text = " ".join(words)
    owner = [] if re.search(rf"\b{re.escape(name)}\b", text) else [f"{name}'s"]
    text = re.sub(r"\b(?:my|our)\b", lambda m: owner.pop() if owner else "their", text, flags=re.I)
    text = re.sub(r"\bmyself\b", "themselves", text, flags=re.I)
    text = re.sub(r"\bme\b", name if name not in text else "them", text)
    text = re.sub(r"\bI\b", "they", re.sub(r"\bI(?:'m| am)\b", "they're", text))
    text = _en_self_naming(name).sub("", text).strip()
    return text[0].upper() + text[1:] if text else text


def third_person_zh(text: str, name: str) -> str:
    """A first-person Chinese statement with ``name`` for 我 (「我女儿七岁」 → 「Leo 的女儿七岁」)."""
    text = re.sub(r"我们家|咱们家|咱家|我家", f" {name} 家", text)
    text = re.sub(r"我们|咱们", f" {name} 他们", text)
    text = re.sub(r"我的", f" {name} 的", text)
    text = re.sub(rf"我(?=(?:{_ZH_KIN_WORDS}))", f" {name} 的", text)
    text = re.sub(r"(?<!自)我", f" {name} ", text)  # 「自我介绍」 keeps its 我
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"(?<=[\u3400-\u9fff])\s+(?=[\u3400-\u9fff])", "", text)
    text = _zh_self_naming(name).sub("", text)
    return re.sub(r"\s+(?=[，。！？；：、）])|(?<=[，。！？；：、（])\s+", "", text).strip()


# "My name is Sam" told about Sam says nothing ("Sam's name is Sam"): the clause goes.
def _en_self_naming(name: str) -> re.Pattern:
    n = re.escape(name)
    return re.compile(rf"\b(?:(?:{n}'s|their) name is|{n} (?:is called|is named|goes by))\s+{n}\b\s*[,;.]?\s*", re.I)


def _zh_self_naming(name: str) -> re.Pattern:
    n = re.escape(name)
    return re.compile(rf"{n}\s*(?:叫|名叫|名字叫|的名字叫|的名字是)\s*{n}\s*[，,；;。]?")
