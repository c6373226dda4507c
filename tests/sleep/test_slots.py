from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anima.core.segmentation import text_simplified
from sleep.offline.light import facts_read
from sleep.slots import Slot, en_read, restates, slot_read, supersedes


@settings(max_examples=80, deadline=None)
@given(text=st.text(max_size=200), name=st.sampled_from(["Leo", "小雨", ""]))
def test_reading_a_slot_never_fails(text, name):
    slot = slot_read(text, name=name)
    assert slot is None or slot.attribute


def _name(said: str) -> str:
    """The speaker's name in the language of what they said."""
    return "小雨" if any("\u4e00" <= ch <= "\u9fff" for ch in said) else "Sam"


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        ("My name is Sam.", []),  # the person's own name is no fact ("Sam's name is Sam")
        ("Call me Sammy, everyone does.", ["Sam also goes by Sammy"]),
        ("Honestly I can't stand olives.", ["Sam can't stand olives"]),
        ("We've got a beagle called Rufus.", ["Sam's family has got a beagle called Rufus"]),
        ("My grandson Jamie had his birthday, he's 11 now.", ["Sam's grandson Jamie is 11 now"]),
        ("She's 11 now.", []),  # nobody to point at: the pronoun is not left dangling
        ("我叫小雨。", []),
        ("我养了一只布偶，叫雪球。", ["小雨养了一只布偶，叫雪球"]),
        ("她今年五岁了。", []),
        ("我女儿叫朵朵，她今年五岁了。", ["小雨的女儿叫朵朵", "小雨的女儿朵朵今年五岁"]),
    ],
)
def test_disclosures_name_the_person_and_resolve_or_drop_pronouns(said, expected):
    assert [content for _, content, _ in facts_read(said, name=_name(said))] == expected


@pytest.mark.parametrize(
    ("said", "slot"),
    [
        ("My dog is called Rex.", Slot("dog", "rex", "name", "", "rex")),
        ("Our cat's called Miso.", Slot("cat", "miso", "name", "", "miso")),
        ("My sister is named Anna.", Slot("sister", "anna", "name", "", "anna")),
        ("My son goes by Jay these days.", Slot("son", "jay", "name", "", "jay")),
        ("The film is called Dune.", None),  # what is called so is no one the person has
        ("My project is called Atlas.", None),
        ("I adopted a dog named Biscuit.", Slot("dog", "biscuit", "exists", "", "+")),
        ("We just got a kitten called Luna.", Slot("cat", "luna", "exists", "", "+")),
        ("We finally adopted a dog!", None),  # one more dog: how many there are now, it does not say
        ("I got a dog bed.", None),
        ("I work night shifts at the town hospital.", Slot("self", "", "workplace", "", "town hospital")),
        ("I work part-time at a bakery.", Slot("self", "", "workplace", "", "bakery")),
        ("I just started a new job at a bank.", Slot("self", "", "workplace", "", "bank")),
        ("I'm getting married in June.", Slot("self", "", "activity", "married", "+")),  # not "in june"
    ],
)
def test_a_name_a_pet_just_had_a_workplace_and_a_wedding_are_read_however_they_are_said(said, slot):
    assert slot_read(said, name="Sam") == slot


@pytest.mark.parametrize(
    ("said", "name"),
    [
        ("Peanuts are a no-go for me, severe allergy.", "Nina"),
        ("I've been learning Spanish on Duolingo every evening.", "Raj"),
        ("I'm no longer training for the marathon, my knee gave out.", "Dan"),
        ("I'm not into sushi anymore, weirdly.", "Ben"),
        ("My dog is called Rex.", "Sam"),
        ("We just adopted a puppy called Max.", "Sam"),
        ("I work night shifts at the town hospital.", "Sam"),
        ("我是一名小学老师，教语文。", "阿晨"),
        ("我有两个女儿，大的叫郭芳，小的叫郭婷。", "老郭"),
        ("我血压高，医生不让我吃太咸。", "老郭"),
        ("我不开出租车了，现在给一家公司开班车。", "老郭"),
        ("我老公不做厨师了，开了个小饭馆。", "芳芳"),
        ("我现在三十三了。", "芳芳"),
        ("我今年三十四。", "小陈"),
        ("我老婆怀孕了，预产期是明年二月。", "阿强"),
        ("我在学日语。", "小陈"),
        ("我是一名小學老師，教語文。", "阿晨"),
        ("我老婆懷孕了，預產期是明年二月。", "阿強"),
        ("我的信箱是 qiang@example.com", "阿強"),
        ("I just started a new job at a bank.", "Sam"),
        ("I'm getting married in June.", "Sam"),
        ("I finally adopted a dog! His name is Biscuit, he's a two-year-old beagle.", "Sam"),
        ("We got a puppy. He's called Max.", "Sam"),
    ],
)
def test_every_fact_the_offline_mind_writes_reads_back_to_its_slot(said, name):
    # Deep sleep retires or merges a fact only by the slot its own text reads to: a fact that does not read back
    # never gives way to the change that replaces it, and both stay.
    facts = [(content, slot) for _, content, slot in facts_read(said, name=name) if slot is not None]
    assert facts
    for content, slot in facts:
        back = slot_read(content, name=name)
        assert back is not None, content
        assert (back.subject, back.attribute, back.key, back.value) == (
            slot.subject,
            slot.attribute,
            slot.key,
            slot.value,
        ), content


@pytest.mark.parametrize(
    ("said", "slot"),
    [
        ("我今年三十四。", Slot("self", "", "age", "", "34")),
        ("我去年搬到了北京。", Slot("self", "", "residence", "", "北京")),
        ("我在学日语。", Slot("self", "", "activity", "日语", "+")),
        ("我在学校工作。", Slot("self", "", "workplace", "", "学校")),  # a school is a place, not a lesson
        # A state in the English grammar's words, so that "I'm pregnant" and 「我怀孕了」 say the same.
        ("我怀孕了！", slot_read("I'm pregnant!", name="Sam")),
        ("我还是单身。", slot_read("I'm still single.", name="Sam")),
    ],
)
def test_chinese_says_an_age_a_move_a_lesson_and_a_state_as_english_does(said, slot):
    assert slot is not None and slot_read(said, name="小陈") == slot


@pytest.mark.parametrize(
    ("said", "facts"),
    [
        (
            "I finally adopted a dog! His name is Biscuit, he's a two-year-old beagle.",
            {
                ("Ana's dog's name is Biscuit", Slot("dog", "biscuit", "name", "", "biscuit")),
                ("Ana's dog Biscuit is a two-year-old beagle", Slot("dog", "biscuit", "age", "", "2")),
            },
        ),
        ("We got a puppy. He's called Max.", {("Ana's dog is called Max", Slot("dog", "max", "name", "", "max"))}),
        ("I have a cat. Her name is Luna.", {("Ana's cat's name is Luna", Slot("cat", "luna", "name", "", "luna"))}),
        ("I got a dog bed. Its name is Bob.", set()),  # a dog bed is no dog, and "its" then points nowhere
    ],
)
def test_a_pet_just_had_is_what_his_or_her_name_points_at(said, facts):
    named = {(content, slot) for _, content, slot in facts_read(said, name="Ana") if slot.attribute != "count:cat"}
    assert named == facts


@pytest.mark.parametrize(
    ("said", "name", "facts"),
    [
        ("我的邮箱是chen@example.com。", "陈明", {("陈明的邮箱是chen@example.com", "email", "chen@example.com")}),
        # As Taiwan (信箱) and Hong Kong (電郵) call it.
        ("我的信箱是chen@example.com。", "陳明", {("陳明的信箱是chen@example.com", "email", "chen@example.com")}),
        ("我的電郵是chen@example.com。", "陳明", {("陳明的電郵是chen@example.com", "email", "chen@example.com")}),
        ("I grew up in Cork.", "Ana", {("Ana grew up in Cork", "origin", "cork")}),
        ("I was raised in the UK.", "Ana", {("Ana was raised in the UK", "origin", "uk")}),
        ("Call me Cat.", "Carla", {("Carla also goes by Cat", "name", "cat")}),
    ],
)
def test_an_address_against_chinese_text_and_where_someone_grew_up_are_facts(said, name, facts):
    assert {(content, slot.attribute, slot.value) for _, content, slot in facts_read(said, name=name)} == facts


@pytest.mark.parametrize(
    ("said", "name"),
    [
        ("Call me lazy, but I skipped the gym.", "Carla"),
        ("I'm from the school of thought that tea fixes everything.", "Carla"),
        ("I'm learning that commuting is the worst part of my day.", "Ana"),
        ("我住的那条街今天停电了。", "陈明"),
        ("我喜欢的那家奶茶店关门了。", "小丽"),
        ("我老家寄来的腊肠好好吃。", "小丽"),
        ("现在回头看，其实准备得还挺充分。", "Leo"),
    ],
)
def test_an_idiom_or_a_relative_clause_says_nothing_of_the_person(said, name):
    # 「我住的那条街」 is a street, not where the person lives; "call me lazy" gives no name.
    assert facts_read(said, name=name) == []


@pytest.mark.parametrize(
    ("said", "name", "facts"),
    [
        # 女朋友 is a partner, not a friend's news; and she stays a girlfriend in what comes next.
        ("我女朋友叫 Vivian，在做 UI 设计。", "晓峰", ["晓峰的女朋友叫 Vivian", "晓峰的女朋友Vivian在做 UI 设计"]),
        (
            "My girlfriend Zoe is a vet. She loves climbing.",
            "Ben",
            ["Ben's girlfriend Zoe is a vet", "Ben's girlfriend Zoe loves climbing"],
        ),
        ("我不开货车了，腰受不了。", "老陈", ["老陈不开货车了，腰受不了"]),  # 「受不了」 keeps its 了
        ("I got promoted to head chef!", "Felix", ["Felix got promoted to head chef"]),
        ("started learning guitar, 20 mins every night before bed", "Marcus", ["Marcus started learning guitar"]),
        (
            "I've signed up for a half marathon in April",
            "Bridget",
            ["Bridget has signed up for a half marathon in April"],
        ),
        ("My cat's name's Pudding.", "Marcus", ["Marcus's cat's name's Pudding"]),
        ("土豆今天一岁了！", "佳佳", ["土豆今天一岁"]),
        ("我戒奶茶了，现在改喝美式", "佳佳", ["佳佳戒奶茶", "佳佳现在改喝美式"]),
        (
            "got a cat tho, her name's pudding, she's 12 and grumpy",
            "Marcus",
            ["Marcus's cat's name's pudding", "Marcus's cat Pudding is 12 and grumpy"],
        ),
        ("i'm a nurse lol", "Marcus", ["Marcus is a nurse"]),
        ("我是广东潮汕人，现在在北京漂着", "晓峰", ["晓峰是广东潮汕人", "晓峰现在在北京漂着"]),
        # Voice input leaves out the commas; 俺 is 我, 媳妇儿 媳妇.
        ("俺今年五十八了 在郑州生活", "秀英", ["秀英今年五十八", "秀英在郑州生活"]),
        # where one lives is its own fact, not a detail of where one is from (a move could not retire it)
        ("老家河南周口的 现在跟老伴在郑州住", "秀英", ["秀英老家河南周口的", "秀英现在跟老伴在郑州住"]),
        ("媳妇儿叫小红 在小学当语文老师", "国栋", ["国栋的媳妇叫小红", "国栋的媳妇小红在小学当语文老师"]),
        ("im a nurse, my bf is an electrician", "Shauna", ["Shauna is a nurse", "Shauna's bf is an electrician"]),
        ("my absolute fav band is Wet Leg", "Bea", ["Bea's absolute fav band is Wet Leg"]),
        (
            "we've got 2 kids, Yusuf's 8 and Layla's 4",
            "Tariq",
            ["Tariq's family has got 2 kids", "Tariq's child Yusuf is 8", "Tariq's child Layla is 4"],
        ),
        (
            "I'm originally from Cape Town but I've lived in Glasgow for eight years",
            "Felix",
            ["Felix is originally from Cape Town", "Felix has lived in Glasgow for eight years"],
        ),
    ],
)
def test_everyday_chat_states_these_facts_as_said(said, name, facts):
    written = facts_read(said, name=name)
    assert [content for _, content, _ in written] == facts
    for content, slot in ((content, slot) for _, content, slot in written):
        assert slot_read(content, name=name) == slot, content


@pytest.mark.parametrize(
    ("said", "name"),
    [
        ("Anyway, I'm 10 minutes away from the shops, better go", "Bridget"),  # no age of 1
        ("I love Mondays, said no one ever", "Noor"),
        ("sure, I LOVE doing my taxes 🙃", "Bridget"),
        ("我周末打算去看演唱会……开玩笑的，根本抢不到票", "晓峰"),
        # The colleague's commute, not the speaker's.
        ("我同事小王住在滨江，每天骑电动车上班", "小敏"),
        ("我在公司待着", "小敏"),  # where one is now, not where one lives
        ("今天豆包过生日 满五岁了", "秀英"),  # 豆包's fifth birthday, not the speaker's age
        ("My colleague lives in Berlin, cycles to work every day.", "Ana"),
    ],
)
def test_a_joke_a_distance_or_someone_elses_life_is_no_fact_of_the_speaker(said, name):
    assert facts_read(said, name=name) == []


def test_quitting_what_was_liked_supersedes_the_like():
    (liked,) = [slot for _, _, slot in facts_read("我最爱喝奶茶，一天不喝就难受", name="佳佳")]
    quit_, switched = [slot for _, _, slot in facts_read("我戒奶茶了，现在改喝美式", name="佳佳")]
    assert supersedes(quit_, liked)
    assert (switched.attribute, switched.key, switched.value) == ("likes", "美式", "+")


def test_a_pronoun_stands_for_the_hinted_person_but_a_word_starting_like_one_does_not():
    hint = ("sister", "Mia")
    assert en_read("she is 30 years old", subject_hint=hint).slot == Slot("sister", "mia", "age", "", "30")
    assert en_read("here is 30 years old", subject_hint=hint) is None
    assert en_read("items are 30 years old", subject_hint=hint) is None


def test_numbers_and_negations_decide_a_slot():
    seven = slot_read("Maya's daughter is 7", name="Maya")
    eight = slot_read("Maya's daughter just turned 8", name="Maya")
    assert supersedes(eight, seven) and not restates(eight, seven)
    likes, dislikes = slot_read("Raj likes coffee", name="Raj"), slot_read("Raj hates coffee", name="Raj")
    assert supersedes(likes, dislikes)
    assert not supersedes(slot_read("Raj likes tea", name="Raj"), likes)  # likes coexist
    assert restates(slot_read("Leo 住在杭州", name="Leo"), slot_read("Leo 现在住在杭州", name="Leo"))
    assert Slot.from_body({"slot": {"attribute": "job", "value": "Nurse "}}) == Slot("self", "", "job", "", "nurse")


def _read(said: str) -> list[tuple[str, str, Slot]]:
    name = _name(said)
    facts = facts_read(said, name=name)
    for _, content, slot in facts:
        assert slot_read(content, name=name) == slot  # the stored wording reads back into the slot it was written in
    return facts


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("My favourite band is Radiohead.", "These days my favourite band is Arctic Monkeys."),
        ("My favorite film is Alien.", "Lately my favorite film is Dune."),
        ("My favourite food is pho.", "My favourite food these days is ramen."),
        ("My fave drink is tea.", "Right now my current fave drink is matcha."),
        ("我最喜欢的乐队是五月天。", "这段时间我最喜欢的乐队是草东没有派对。"),
        ("我最喜欢的电影是沙丘。", "如今最喜欢的电影是奥本海默。"),
        ("我最喜欢的歌手是周杰伦。", "我最近最爱听的歌手是陈奕迅。"),
        ("My favourite band is Radiohead.", "These days Arctic Monkeys are my favourite band."),
        ("我最喜欢的乐队是五月天。", "最近草东是我最喜欢的乐队。"),
    ],
)
def test_a_favourite_said_with_a_time_word_changes_the_favourite(before, after):
    [(_, _, old)] = _read(before)
    [(kind, _, new)] = _read(after)
    assert kind == "preference" and supersedes(new, old)


@pytest.mark.parametrize(
    ("said", "job"),
    [
        ("I just started a new job as a pharmacist in Leeds.", "pharmacist"),
        ("I've started working as a nurse.", "nurse"),
        ("I landed my first job as a software engineer!", "software engineer"),
        ("I recently got a role as a barista at a cafe.", "barista"),
        ("I took the job as a favour to him.", None),  # "as a favour" is no job
        ("I started a new job last week.", None),  # news, but no job named
    ],
)
def test_a_new_job_told_as_news_is_the_persons_job(said, job):
    slot = slot_read(said, name="Kai")
    assert (slot.value if slot else None) == job
    if job:
        assert slot.attribute == "job" and supersedes(slot, slot_read("I'm a teacher.", name="Kai"))


@pytest.mark.parametrize(
    ("said", "count"),
    [
        ("I have seven cats.", ("count:cat", "7")),
        ("I have got eleven rabbits.", ("count:rabbit", "11")),
        ("I have twenty-one cats.", ("count:cat", "21")),
        ("I have 12 dogs.", ("count:dog", "12")),
        ("I own 3 bikes.", None),  # owning things is no household
    ],
)
def test_how_many_of_a_kind_someone_has_is_read_in_words_or_digits(said, count):
    slot = slot_read(said)
    assert ((slot.attribute, slot.value) if slot and slot.attribute.startswith("count:") else None) == count


@pytest.mark.parametrize(
    ("said", "named"),
    [
        ("We have two cats, Miso and Tofu.", {("cat", "miso"), ("cat", "tofu")}),
        ("I have a dog called Rex and a cat named Luna.", {("dog", "rex"), ("cat", "luna")}),
        ("We've got three dogs: Rex, Ace and Bo.", {("dog", "rex"), ("dog", "ace"), ("dog", "bo")}),
        ("I have two kids named Ben and Mia.", {("child", "ben"), ("child", "mia")}),
        (
            "I have a dog called Rex and six cats named Miso and Tofu.",
            {("dog", "rex"), ("cat", "miso"), ("cat", "tofu")},
        ),
        ("我家有两只猫，一只叫咪咪，一只叫豆豆。", {("cat", "咪咪"), ("cat", "豆豆")}),
        ("我养了两只狗，分别叫大黄和小黑。", {("dog", "大黄"), ("dog", "小黑")}),
        ("我养了一只狗叫旺财，还有一只猫叫咪咪。", {("dog", "旺财"), ("cat", "咪咪")}),
        ("We have two kids, both at school.", set()),
        ("我家有两只宠物，猫和狗。", set()),
        ("我有个女儿，喜欢唱歌和跳舞。", set()),
    ],
)
def test_each_pet_or_relative_named_in_a_list_is_a_fact_of_its_own(said, named):
    facts = _read(said)
    assert {(slot.subject, slot.name) for _, _, slot in facts if slot.name} == named
    for subject, own in named:  # one fact per name, naming that one only
        [content] = [content for _, content, slot in facts if (slot.subject, slot.name) == (subject, own)]
        others = {other for _, other in named} - {own}
        assert own in content.casefold() and not any(other in content.casefold() for other in others)


@pytest.mark.parametrize(
    ("before", "after", "place"),
    [
        ("I live in Boston.", "Guess what — we're moving to Denver next month.", "denver"),
        ("I live in Portland.", "Big news: my family is moving to Austin.", "austin"),
        ("We live in Leeds.", "Exciting news, my wife and I are relocating to York in June.", "york"),
        ("我住在杭州。", "告诉你个消息，我们全家下个月搬到成都。", "成都"),
        ("我们住在南京。", "跟你说个好消息我们一家三口搬去苏州了。", "苏州"),
        ("I live in Reno.", "You'll never guess, the whole family is moving to Tulsa.", "tulsa"),
        ("I live in Reno.", "Great news! We'll be moving to Boise in March.", "boise"),
        ("我住在武汉。", "有个好消息，我们下个月要搬到厦门了。", "厦门"),
        ("我住在上海。", "官宣：我们全家搬回长沙了。", "长沙"),
        ("I live in Lyon.", "Big news: I've relocated to Nantes, new flat and everything.", "nantes"),
        ("I live in Cork.", "So I have moved to Galway for good.", "galway"),
    ],
)
def test_a_household_move_after_a_lead_in_changes_where_the_person_lives(before, after, place):
    [(_, _, old)] = _read(before)
    [(_, _, new)] = _read(after)
    assert new.attribute == "residence" and new.value == place and supersedes(new, old)


@pytest.mark.parametrize(
    "said", ["It's my favourite film.", "这是我最喜欢的歌。", "Pizza night is my favourite thing."]
)
def test_a_favourite_needs_a_kind_and_a_value(said):
    assert _read(said) == []


def test_where_my_family_lives_is_not_where_i_live():
    assert _read("My family lives in Ohio.") == []  # perhaps the parents' home; "we live" and a move are the person's


def test_a_number_is_one_value_whether_spelled_or_in_digits():
    two, digits = slot_read("I have two cats.", name="Kai"), slot_read("I have 2 cats.", name="Kai")
    seven, eight = slot_read("My daughter is seven.", name="Kai"), slot_read("My daughter turned 8!", name="Kai")
    two_cats = slot_read("我有两只猫。", name="凯")

    assert restates(digits, two) and two.value == two_cats.value == "2"
    assert (seven.attribute, seven.value) == ("age", "7") and supersedes(eight, seven)
    assert slot_read("I am twenty-one now.", name="Kai").value == "21"
    assert slot_read("My son is one of the best players.", name="Kai") is None  # no age: the number goes on


@pytest.mark.parametrize(
    ("said", "attribute", "value"),
    [
        ("Leo 现在是四川人了", "origin", "四川"),
        ("我一直是东北人。", "origin", "东北"),
        ("我现在是一名护士。", "job", "护士"),
    ],
)
def test_being_one_of_a_place_is_an_origin_and_being_one_of_a_trade_a_job(said, attribute, value):
    slot = slot_read(said, name="Leo")
    assert (slot.attribute, slot.value) == (attribute, value)


@pytest.mark.parametrize("said", ["我是好人。", "我是个好人", "我现在是一名好人"])
def test_what_someone_is_like_is_no_place_they_come_from(said):
    assert slot_read(said, name="小雨") is None
    assert slot_read("我是大连人", name="小雨").value == "大连"  # a place jieba tags otherwise still is one


@pytest.mark.parametrize(
    ("traditional", "simplified", "told"),
    [
        ("我對花生過敏。", "我对花生过敏。", ["小陳對花生過敏"]),
        ("我女兒今年八歲了。", "我女儿今年八岁了。", ["小陳的女兒今年八歲"]),
        ("我在醫院當護士。", "我在医院当护士。", ["小陳在醫院當護士"]),
        (
            "我是廣東潮汕人，現在在北京漂著。",
            "我是广东潮汕人，现在在北京漂着。",
            ["小陳是廣東潮汕人", "小陳現在在北京漂著"],  # 著: Taiwan's particle 着
        ),
        ("我養了兩隻貓，一隻叫咪咪，一隻叫豆豆。", "我养了两只猫，一只叫咪咪，一只叫豆豆。", None),
    ],
)
def test_a_disclosure_in_traditional_characters_gives_the_slots_of_simplified_ones_told_in_its_own(
    traditional, simplified, told
):
    facts = facts_read(traditional, name="小陳")
    plain = facts_read(simplified, name="小陈")

    assert facts and [slot for *_, slot in facts] == [slot for *_, slot in plain]
    assert [text_simplified(content) for _, content, _ in facts] == [content for _, content, _ in plain]
    if told is not None:
        assert [content for _, content, _ in facts] == told
    # A stored fact reads to the same slot in either script.
    for (_, content, slot), (_, simple, _) in zip(facts, plain, strict=True):
        assert slot_read(content, name="小陳") == slot_read(simple, name="小陈") == slot


@pytest.mark.parametrize(
    "fact", ["Maya's daughter Lily is 7", "Maya's cat is called Luna", "Maya's birthday is 5 June"]
)
def test_a_fact_written_with_a_phones_apostrophe_fills_the_slot_of_the_straight_one(fact):
    slot = slot_read(fact, name="Maya")
    assert slot is not None and slot_read(fact.replace("'", "\u2019"), name="Maya") == slot
