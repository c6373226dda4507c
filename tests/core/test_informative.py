"""Whether a message names anything (``text_informative``: passive recall's first test), and whether a line only
asks (``asks_only``: recall lowers it)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anima.core.segmentation import asks_only, text_asks, text_informative, text_naming_words
from anima.core.text import CHAT_PHRASES, CHAT_WORDS

# One word each that names something: a pet, a place, a thing, a plan, in both languages.
NAMING = ("Miso", "Lisbon", "peanut", "hospital", "cello", "邮箱", "猫", "婚礼", "川菜", "医院")
SEPARATORS = st.sampled_from([" ", ", ", "! ", "? ", "... ", "，", "。", "！", "？", " :) ", " 😂 "])
chat = st.lists(st.sampled_from(sorted(CHAT_WORDS)), min_size=1, max_size=6)


def _joined(words: list[str], separators: list[str]) -> str:
    return "".join(word + separator for word, separator in zip(words, separators, strict=False))


@pytest.mark.parametrize(
    "line",
    [
        "lol ok",
        "Thanks, that sounds great!",
        "heyyy",
        "hahaha",
        "thanks a million",
        "alrighty then",
        "嗯嗯，好的谢谢",
        "哈哈哈哈",
        "好嘞",
        "午安",
        ":)",
        "👍",
        "",
    ],
)
def test_greetings_thanks_and_laughter_name_nothing(line):
    assert not text_informative(line)


@pytest.mark.parametrize(
    "line", ["mhm", "mhmm", "okie dokie", "wait, really?", "thx a bunch", "你说得对", "说的对！", "嗯……让我想想"]
)
def test_back_channel_agreement_and_thinking_aloud_name_nothing(line):
    # Lines of the third check of the small-talk list (bench/recall/smalltalk.jsonl) and their spellings.
    assert not text_informative(line)


@pytest.mark.parametrize(
    "line",
    [
        "I can't wait for the concert",
        "wait for Miso",
        "a bunch of peanuts",
        "你说得对，猫该打疫苗了",
        "让我想想周末去哪",
    ],
)
def test_those_words_beside_a_subject_still_name_it(line):
    assert text_informative(line)


@pytest.mark.parametrize("line", ["嘿嘿，开心", "好高兴！", "so happy!!", "glad to hear"])
def test_joy_said_alone_names_nothing(line):
    # Like "glad" and "yay": a reaction, not a subject. A memory of a happy day is not what it asks for.
    assert not text_informative(line)


@pytest.mark.parametrize("line", ["今天去公园好开心", "I'm so happy with my new cello", "Maya 高兴吗"])
def test_joy_about_something_names_it(line):
    assert text_informative(line)


@pytest.mark.parametrize(
    "line",
    [
        "long time no see",
        "Long  time no see!!",
        "good job",
        "No way, just kidding",
        "最近怎么样？",
        "吃饭了吗",
        "真不错",
        "太厉害了",
    ],
)
def test_set_phrases_of_greeting_and_praise_name_nothing_though_their_words_would(line):
    assert not text_informative(line)


@pytest.mark.parametrize(
    "line",
    [
        "long time no see, how is Miso?",
        "good job on the marathon",
        "I finally got the job",
        "我的猫最近不爱吃饭",
        "我们去吃饭了吗，那家川菜馆",
    ],
)
def test_a_set_phrase_takes_only_its_own_words_out(line):
    assert text_informative(line)


@pytest.mark.parametrize(
    "line",
    [
        "What's my cat's name?",
        "How is Miso?",
        "I'm really looking forward to that evening",
        "我的猫最近不爱吃饭",
        "Leo 的邮箱是什么",
        "哦，那场舞我还记得！",
    ],
)
def test_a_question_or_a_follow_up_names_something(line):
    assert text_informative(line)


def test_every_chat_word_alone_names_nothing():
    # The tagger splits some words plain segmentation keeps whole (再会 into 再 and 会): each word is checked, not
    # only those a property run happens to draw.
    assert [word for word in sorted(CHAT_WORDS) if text_informative(word)] == []


@given(words=chat, separators=st.lists(SEPARATORS, min_size=6, max_size=6))
def test_any_run_of_chat_words_names_nothing(words, separators):
    assert not text_informative(_joined(words, separators))


@given(
    words=st.lists(st.sampled_from(sorted({*CHAT_WORDS, *CHAT_PHRASES})), min_size=1, max_size=6),
    separators=st.lists(SEPARATORS, min_size=6, max_size=6),
)
def test_any_run_of_chat_words_and_set_phrases_names_nothing(words, separators):
    assert not text_informative(_joined(words, separators))


@given(
    words=chat,
    separators=st.lists(SEPARATORS, min_size=7, max_size=7),
    naming=st.sampled_from(NAMING),
    where=st.integers(min_value=0, max_value=6),
)
def test_one_naming_word_among_chat_words_is_enough(words, separators, naming, where):
    words = [*words[:where], naming, *words[where:]]

    assert text_informative(_joined(words, separators))


@pytest.mark.parametrize(
    "line",
    [
        "How was Thanksgiving?",
        "Wow! What got you into running?",
        "Oh, really? When is it?",
        "真的吗？哪家？",
        "哈哈，你去了吗",
        "团子还好吗～",
        "What's the name of your cat? 😄",
        "？",
        "?? 😳",
        # What comes before the question names nothing: a greeting, praise, thanks.
        "Hi Hal! Good to hear from you. How was Thanksgiving?",
        "Hey Mel! Good to see you! How have you been?",
        "Sounds like you had a great time! What inspired you?",
        "好的好的没问题谢谢你啦，你那边怎么样？",
    ],
)
def test_a_line_that_only_asks(line):
    assert asks_only(line)


@pytest.mark.parametrize(
    "line",
    [
        "I went to Paris! Have you been?",
        "Sure thing! I can give it to you tomorrow, how does that sound?",
        "我上周去了杭州，你去过吗？",
        "Good to hear from you, I moved to Leeds last week. How are you?",
        "谢谢你，我的猫昨天做完手术了，你呢？",
        "Luis and Rosa invited me to theirs.",
        "ok 😊",
        "😂😂",
        "我家猫咪叫团子",
        "",
    ],
)
def test_a_line_that_says_something(line):
    assert not asks_only(line)


@given(st.text(max_size=80), st.sampled_from(["I moved to Leeds.", "我搬到杭州了", "my cat is called Mochi"]))
def test_a_line_ending_in_a_statement_never_only_asks(text, statement):
    assert not asks_only(f"{text}\n{statement}")


@pytest.mark.parametrize("line", ["666", "233333", "886!", "哈哈 2333"])
def test_a_number_alone_names_nothing(line):
    # Chat numerals: praise, laughter, goodbye.
    assert not text_informative(line)


@pytest.mark.parametrize("line", ["好家伙", "马上回来", "绝了", "that's wild", "interesting", "for real?", "you rock"])
def test_an_interjection_adverb_or_reaction_alone_names_nothing(line):
    assert not text_informative(line)


@pytest.mark.parametrize(
    "line",
    [
        "happy friday!",
        "Have a good weekend",
        "enjoy your evening",
        "周末愉快～",
        "祝你生日快乐！",
        "新年快乐",
        # A particle may close a Chinese wish.
        "周末快乐哦",
        "元旦快乐呀",
    ],
)
def test_a_wish_names_an_occasion_not_a_subject(line):
    assert not text_informative(line)


@pytest.mark.parametrize(
    "line",
    [
        "Happy birthday Miso!",
        "小雨生日快乐",
        "小雨生日快乐呀",
        "have a good time in Lisbon",
        "I have a flight tomorrow",
        "I have a great dog",
        "I enjoy the morning runs",
        "我女儿今年4岁",
        "马上要考试了",
        "让我想想周末去哪",
    ],
)
def test_a_wish_number_or_adverb_beside_a_subject_still_names_it(line):
    assert text_informative(line)


@pytest.mark.parametrize(
    "line",
    [
        "righto, catch ya later",
        "brilliant, ta",
        "ta-da!",
        "g'day!",
        "huh, fair point",
        "bet, see ya",
        "np, anytime",
        "yesss finally",
        "no worries at all mate",
        "oh dear",
        "hahaha classic",
        "ooh fancy",
        "I'm off to bed, night!",
        "gotta run",
        # A chat word said again without a space, and a lone letter of chat spelling.
        "okok",
        "byebye!",
        "how r u",
        "好耶！",
        "呜呜呜",
        "下次再聊哈",
        "哈哈哈哈你真可爱",
        # Lines of earlier checks: set phrases of agreement, sympathy and waiting, and a wish for a weekday.
        "for sure, sounds like a plan",
        "hold on a sec",
        "my goodness",
        "pretty good actually",
        "all good, no stress",
        "hey hey, long day?",
        "oof, that's rough",
        "cool beans",
        "have a lovely sunday!",
        "无语",
        "可不是嘛",
        "最近咋样",
        "有人吗",
        # A reaction whose object is what was just said.
        "love that",
        "loved it!",
        "miss you",
    ],
)
def test_slang_farewells_and_reactions_name_nothing(line):
    assert not text_informative(line)


@pytest.mark.parametrize(
    "line",
    [
        "I lost a bet with my brother",
        "my mate Danny got a new job",
        "a fancy restaurant downtown",
        "I finally passed my driving test",
        "vitamin D",
        "小猫很可爱",
        "我们再聊聊工作的事",
        "宝宝今天发烧了",
        "I had a long day at the hospital",
        "no stress about the exam",
        "hold on, is Miso sick?",
        "家里有人吗",
        "I have a dentist appointment on sunday",
        "I love this cafe",
        "love it when Miso purrs",
        "I'm gonna visit Lisbon",
        "honestly the cello lessons are hard",
        "我跟妈妈去了医院",
        "我的猫和狗",
        "life insurance",
        "we head out to the lake tomorrow",
        "小可爱今天发烧了吗",
    ],
)
def test_those_words_beside_a_subject_or_a_letter_beside_a_word_still_name_it(line):
    assert text_informative(line)


@given(
    word=st.sampled_from(sorted(word for word in CHAT_WORDS if word.isascii() and word.isalpha())),
    times=st.integers(2, 4),
)
def test_a_latin_chat_word_said_again_without_a_space_names_nothing(word, times):
    assert not text_informative(word * times)


@pytest.mark.parametrize(
    "line",
    [
        # Colloquial spellings, hedges and interjections.
        "hmm lemme think",
        "same here honestly",
        "welp, that's that",
        "anyhoo",
        "nighty night 😴",
        "gonna head out now, bye!",
        # Set phrases of greeting, laughter and agreement.
        "how's life treating ya",
        "gotcha, makes total sense now",
        "hahaha you're killing me",
        "say less",
        "no cap that's funny",
        "just saying hi 👋",
        # A term of endearment, laughing out loud, "interesting", "see you next time", "nothing much".
        "你好呀小可爱",
        "哈哈哈哈哈笑出声",
        "有点意思",
        "拜拜啦，下回见",
        # A preposition, a conjunction or an auxiliary names nothing (跟, 和, 的).
        "没啥事，就想跟你聊聊",
        "跟你说哦",
    ],
)
def test_colloquial_spellings_endearments_and_function_words_name_nothing(line):
    assert not text_informative(line)


@pytest.mark.parametrize(
    "line",
    [
        # What chat apps write for an emoji, a sticker or a file (WeChat, LINE, Telegram, WhatsApp, Slack).
        "[捂脸]",
        "哈哈哈[破涕为笑]",
        "[强][强][强]",
        "早[太阳]",
        "[动画表情]",
        "[图片]",
        ":joy:",
        "lol :joy: :joy:",
        ":fire::fire:",
        "sounds good :thumbsup:",
        "yay :partying_face:",
        "[Photo]",
        "[Voice message]",
        "<Media omitted>",
        "image omitted",
        "<attached: 00000042-PHOTO-2023-05-01-18-22-10.jpg>",
        # Emoticons and net abbreviations.
        "haha xD",
        "QAQ",
        "orz",
        "¯\\_(ツ)_/¯",
        "yyds",
        "xswl",
        ":tada: congrats!!",
        # A phone's apostrophe is a right single quotation mark.
        "that\u2019s rough",
        "how\u2019s life treating ya",
    ],
)
def test_chat_app_codes_and_emoticons_name_nothing(line):
    assert not text_informative(line)


@pytest.mark.parametrize(
    "line",
    [
        "我考上清华了[强][强]",
        "谢谢老板[抱拳]",
        "my [grandma] is sick",
        "I lost the photo of Miso",
        "see the file attached",
        "time is 10:30:45 at the hospital",
        "congrats on the new job!",
    ],
)
def test_a_subject_beside_chat_app_codes_is_still_named(line):
    assert text_informative(line)


@given(
    code=st.one_of(
        st.text(st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), min_size=1, max_size=6).map("[{}]".format),
        st.from_regex(r"[a-z][a-z0-9_+\-]{0,20}", fullmatch=True).map(":{}:".format),
    ),
    words=chat,
    naming=st.sampled_from(NAMING),
)
def test_an_app_code_adds_no_name_and_hides_none(code, words, naming):
    assert not text_informative(" ".join(words) + code)
    assert text_informative(f"{naming} {code}")


@pytest.mark.parametrize(
    "line",
    [
        # Text-message spellings and a last letter typed twice.
        "thx u",
        "thanx a lot",
        "sry, my bad",
        "gud nite",
        "heyy",
        "byee",
        "okk",
        "thankss",
        "jk jk",
        "im good hbu",
        "cya l8r",
        "gr8!",
        "emmm",
        # Contractions typed without the apostrophe are function words.
        "dont worry",
        "thats cool",
        "hows it going",
        "cant wait",
        # A set phrase written without its apostrophe is the phrase.
        "thats rough",
        "dont worry",
        # Chinese net spellings.
        "额，好吧",
        "木有事",
        "酱紫啊",
        "肿么了",
        "神马情况",
        "哈哈嗝",
        "栓Q",
        "泰裤辣",
    ],
)
def test_text_message_spellings_and_net_slang_name_nothing(line):
    assert not text_informative(line)


@pytest.mark.parametrize(
    "line",
    [
        # A function word with its last letter doubled may be a name: a bee, an inn.
        "a bee stung Miso",
        "we stayed at an inn",
        "bee",
        "I feel ill",
        "dont forget the cello lesson",
        "ur mom called about Lisbon",
        "额头受伤了",
    ],
)
def test_a_spelling_that_is_also_a_word_or_beside_a_subject_still_names(line):
    assert text_informative(line)


@pytest.mark.parametrize(
    "line",
    [
        # Small talk in traditional characters: read as the simplified chat words it is.
        "謝謝你喔",
        "晚安囉，明天見",
        "沒問題啦",
        "哈囉～最近好嗎",
        "先這樣囉",
        "我回來了～",
        # Taiwanese interjections and spellings, and praise jieba keeps whole.
        "蛤？",
        "齁，好啦",
        "欸欸欸",
        "醬子喔",
        "母湯喔",
        "超讚的耶",
        "好險好險",
        "不會啦，不用謝",
        "掰掰～下次聊",
        # Chinese small talk with English in it.
        "好的 thx",
        "sorry 刚看到",
        "晚點聊 cya",
        "沒事 np",
        "thank you 哦",
    ],
)
def test_small_talk_in_traditional_characters_or_mixed_with_english_names_nothing(line):
    assert not text_informative(line)


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("我的貓最近不愛吃飯", "猫"),
        ("週末要去醫院複查", "医院"),
        ("謝謝你，我的貓昨天做完手術了", "手术"),
        ("我想吃蛤蜊", "蛤蜊"),
        ("sorry 刚看到，婚礼在哪天？", "婚礼"),
    ],
)
def test_a_subject_in_traditional_characters_is_named_in_simplified_ones(line, named):
    assert named in text_naming_words(line)


def test_a_question_in_traditional_characters_asks():
    assert text_asks("真的嗎")
    assert asks_only("真的嗎？哪家？")


@pytest.mark.parametrize(
    "line",
    [
        # Chinese internet slang: pinyin initials, set phrases, emoji beside chat words.
        "nbnb",
        "牛逼",
        "dbq",
        "xdm",
        "u1s1",
        "yysy",
        "qwq",
        "确实",
        "我裂开了",
        "蚌埠住了",
        "有一说一",
        "[doge]",
        "冲冲冲",
        # English internet slang.
        "im dead 😂😂",
        "slay",
        "iconic",
        "periodt",
        "big mood",
        "yikes",
        "rip",
        "sheesh",
        "based",
        "vibes",
        "nm u?",
        "ofc",
        "yessir",
        "aight bet",
        "lowkey same",
    ],
)
def test_internet_slang_names_nothing(line):
    assert not text_informative(line)


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("他的吉他弹得真牛逼", "吉他"),
        ("我住在蚌埠", "蚌埠"),
        ("家里的水管裂开了", "水管"),
        ("I'm based in Lisbon now", "lisbon"),
        ("the vibes at Maya's party were great", "party"),
        ("RIP to Hiro's boot", "boot"),
        ("I'm dead tired after the night shift", "shift"),
    ],
)
def test_that_slang_beside_a_subject_still_names_it(line, named):
    assert named in text_naming_words(line)
