from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anima.core.text import (
    is_chinese,
    text_keywords,
    third_person_en,
    third_person_zh,
    without_addresses,
)


@pytest.mark.parametrize(
    ("said", "told"),
    [
        ("先自我介绍一下：我叫 Leo，我是一名软件工程师。", "先自我介绍一下：Leo 是一名软件工程师。"),
        ("我叫Leo。", ""),
        ("我女儿七岁了", "Leo 的女儿七岁了"),
    ],
)
def test_chinese_told_about_the_person_never_says_their_name_is_their_name(said, told):
    assert third_person_zh(said, "Leo") == told


@pytest.mark.parametrize(
    ("said", "told"),
    [
        ("My name is Sam, I moved to Berlin last spring.", "They moved to Berlin last spring."),
        ("I'm called Sam", ""),
        ("My daughter's name is Lily", "Sam's daughter's name is Lily"),
        ("I play the cello", "Sam plays the cello"),
        ("We'll be moving to Denver", "Sam's family will be moving to Denver"),
        ("The whole family is moving to Austin", "Sam's whole family is moving to Austin"),
    ],
)
def test_english_told_about_the_person_never_says_their_name_is_their_name(said, told):
    assert third_person_en(said, "Sam") == told


@given(st.text(alphabet="我叫是的 Leo，。abc", max_size=40))
def test_no_self_naming_survives_in_chinese(said):
    assert "Leo 叫 Leo" not in third_person_zh(said, "Leo")


def test_chinese_time_and_filler_words_are_no_keywords():
    words = text_keywords("等会儿我们去吃火锅，过一会儿再说。那个时候东西很多，今天的火锅店很热闹", count=4)

    assert words and all("火锅" in word for word in words)


def test_keywords_read_a_word_of_another_script_and_full_width_letters_whole():
    # jieba alone cuts a word at every letter outside ASCII: "café" was "caf" + "é", and neither was a keyword.
    assert text_keywords("We met at the café again; the café was full and the café's cake was great.", count=1) == [
        "café"
    ]
    assert text_keywords("Мы снова были в Казани. В Казани тепло, Казани нравится", count=1) == ["Казани"]
    assert text_keywords("我的ｉＰｈｏｎｅ坏了，这台ｉＰｈｏｎｅ修不好", count=3, script="latin") == ["iPhone"]
    assert text_keywords("小雨在café里喝咖啡，café很安静", count=3, script="latin") == ["café"]
    assert "café" not in text_keywords("小雨在café里喝咖啡，café很安静", count=3, script="cjk")


@pytest.mark.parametrize(
    ("text", "left", "chinese"),
    [
        ("我的邮箱是leo@example.com。", "我的邮箱是 。", True),
        ("mail me at leo@example.com, thanks", "mail me at  , thanks", False),
        ("看这个https://example.com/a?b=1很有用", "看这个 很有用", True),
    ],
)
def test_an_address_is_blanked_alone_even_against_chinese_text(text, left, chinese):
    # Blanked with it, the Chinese words before it made 「我的邮箱是…」 read as not Chinese at all.
    assert without_addresses(text) == left
    assert is_chinese(without_addresses(text)) is chinese
