"""The search query language (anima.core.search_query): operators, phrases, stopword operands, refusals."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from anima.core.errors import AnimaError
from anima.core.search_query import (
    QuerySyntaxError,
    search_query_build,
    search_text_plain,
    text_as_asker,
    text_without_names,
    text_without_speakers,
)
from anima.core.segmentation import segmentation_load


@pytest.fixture(scope="module", autouse=True)
def _segmentation_loaded():
    # The first passage a process reads loads jieba's keyword tables (most of a second, as a served process loads
    # them before its first request): the property tests' deadlines are for the query, not that.
    segmentation_load(tags=True)


@pytest.mark.parametrize("text", ["cat AND", "cat OR", "NOT", "cat AND NOT", "AND cat", "cat AND OR dog"])
def test_dangling_operators_are_refused_with_a_clear_error(text):
    with pytest.raises(QuerySyntaxError, match="operator"):
        search_query_build(text=text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('cat AND "the"', "'cat'"),
        ("the OR cat", "'cat'"),
        ("cat AND the AND miso", "'cat' & 'miso'"),
        ("cat AND NOT the", "'cat'"),
    ],
)
def test_an_operand_that_is_only_stopwords_drops_with_its_operator(text, expected):
    assert search_query_build(text=text).tsquery == expected


def test_a_query_that_really_ends_in_an_operator_is_still_refused():
    with pytest.raises(QuerySyntaxError):
        search_query_build(text="cat AND")


def test_a_malformed_query_is_an_application_error_naming_the_query_field():
    with pytest.raises(AnimaError) as caught:
        search_query_build(text="cat OR")
    assert isinstance(caught.value, QuerySyntaxError) and caught.value.field == "q"


@pytest.mark.parametrize(
    ("text", "explicit"), [("kitten puppy", False), ('"green tea"', True), ("kitten AND puppy", True)]
)
def test_operators_or_quotes_make_a_query_explicit_and_fts_only(text, explicit):
    query = search_query_build(text=text)
    assert query.explicit is explicit
    assert bool(query.trigram_text) is not explicit


@pytest.mark.parametrize(
    ("text", "trigram_text", "searched"),
    [("my pet gecko", "gecko", "pet"), ("cat dog", "", "cat"), ("我的猫", "猫", "猫")],
)
def test_the_trigram_text_leaves_out_latin_words_of_three_letters_or_fewer(text, trigram_text, searched):
    query = search_query_build(text=text)
    assert query.trigram_text == trigram_text
    assert f"'{searched}'" in query.tsquery  # full-text search still has it


@pytest.mark.parametrize(("text", "character"), [("狗狗生病了", "狗"), ("我想猫猫了", "猫")])
def test_a_doubled_chinese_word_also_searches_its_character(text, character):
    assert f"'{character}'" in search_query_build(text=text).tsquery


def test_a_doubled_function_character_adds_nothing():
    # 我我 is a stutter, not a word: 我 is a function word every query drops.
    assert "'我'" not in search_query_build(text="我我 想你").tsquery


@given(st.text(max_size=200))
def test_plain_text_never_has_query_syntax(text):
    # No quotes, no operators: never a phrase or a NOT, and never refused as a malformed query.
    assert not search_query_build(text=search_text_plain(text + " AND")).explicit


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What is Maya's job?", "What is   job?"),
        ("MAYA’s cat and maya", "  cat and  "),
        ("Maya Silva works nights", "  works nights"),
        ("Leo 的老板是谁", "  的老板是谁"),
        ("Leo的老板", " 的老板"),
        ("Leon, Leonardo and Leo", "Leon, Leonardo and  "),
        ("小雨喜欢画画", " 喜欢画画"),
    ],
)
def test_a_name_comes_out_as_a_whole_word_with_its_possessive(text, expected):
    assert text_without_names(text, names=["Maya Silva", "Maya", "Leo", "小雨"]) == expected


@given(
    st.text(max_size=100),
    st.from_regex(r"[A-Za-z]{2,12}", fullmatch=True),
    st.sampled_from(["", "'s", "’s"]),
    st.text(max_size=100),
)
def test_a_name_said_anywhere_in_any_text_comes_out_and_nothing_raises(before, name, possessive, after):
    rest = text_without_names(f"{before} {name.upper()}{possessive} {after}", names=[name])

    assert name.lower() not in rest.lower().split()
    # What stood around it stays, but for other mentions of the name.
    assert text_without_names(before, names=[name]).strip() in rest


@pytest.mark.parametrize(
    ("text", "asker"),
    [
        ("What is Maya's job?", "What is my job?"),
        ("where does maya live", "where does I live"),
        ("Maya 是做什么工作的", "我是做什么工作的"),
        ("小雨的老师叫什么", "我的老师叫什么"),
        ("Mayan ruins near Mayapur", "Mayan ruins near Mayapur"),  # another word, not the name
        ("What will Leo do for work?", "What will Leo do for work?"),  # the word, not the name Will
        ("Where does Will live?", "Where does I live?"),
    ],
)
def test_the_askers_own_name_reads_as_the_first_person(text, asker):
    assert text_as_asker(text, names=["Maya", "小雨", "Will"]) == asker


@given(st.text(max_size=80), st.sampled_from(["Maya", "Maya Silva", "小雨", "Leo"]), st.text(max_size=80))
def test_the_askers_own_name_said_anywhere_is_read_as_them_and_nothing_raises(before, name, after):
    text = f"{before} {name} {after}"
    assert text_without_names(text_as_asker(text, names=[name]), names=[name]) == text_as_asker(text, names=[name])


@pytest.mark.parametrize(
    ("text", "kept", "gone"),
    [
        ("我考上清华了[强][强]", "清华", "强"),
        ("got the job :fire::fire:", "job", "fire"),
        ("Miso at the vet [Photo]", "vet", "photo"),
        ("<Media omitted> look at Miso", "miso", "media"),
    ],
)
def test_a_chat_message_is_searched_without_its_app_codes(text, kept, gone):
    query = search_query_build(text=search_text_plain(text))
    assert kept in query.tsquery.lower()
    assert gone not in query.tsquery.lower()
    assert gone not in query.trigram_text.lower()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('<Bart>: "I\'m doing a magic trick!"\n<Assistant>: "Fantastic!"', "I'm doing a magic trick!\nFantastic!"),
        ("Maya: I got a cat\nMia: what is its name?\n\nMaya: Miso", "I got a cat\nwhat is its name?\nMiso"),
        ("[Leo] : “hi”\n[Mia]: yo", "hi\nyo"),
        ("小雨：我今天很开心\n助手：「为什么？」", "我今天很开心\n为什么？"),
        ("Maya Silva: Lisbon is lovely\nUser 2: agreed", "Lisbon is lovely\nagreed"),
        # A message of several lines goes on without a label.
        ("Maya: I got a cat\n  she is tiny  \nLeo: name?\nMaya: Miso", "I got a cat\nshe is tiny\nname?\nMiso"),
        (
            '<Bart>: "I wore it today"\n"It looks great on you!"\n<Bart>: "thanks"',
            "I wore it today\nIt looks great on you!\nthanks",
        ),
    ],
)
def test_a_transcript_is_read_as_what_its_lines_say(text, said):
    assert text_without_speakers(text) == said


@pytest.mark.parametrize(
    "text",
    [
        "Maya: I got a cat",  # one line: a question may start with a name
        "I got a cat\nMaya: and she is called Miso",  # it does not start with a speaker
        "Maya: I got a cat\nand she is called Miso\nso cute",  # most lines have none
        "we meet at 10:30\n11:00 works too",
        "https://example.com/a\nhttps://example.com/b",
        "what did I say about the cat?",
        "Breakfast: eggs\nLunch: soup\nDinner: rice",  # a list: nobody speaks twice
        "The vet said: Miso is fine\nMy mom said: come home",  # what someone said, not who speaks
        "我昨天跟你说过：明天下雨\n你当时回我：知道了",  # clauses before a colon, not names
    ],
)
def test_text_that_is_not_a_transcript_is_read_as_written(text):
    assert text_without_speakers(text) == text


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["Maya", "<Bart>", "[Leo]", "小雨", "Assistant", "Dr. Chen"]),
            st.sampled_from([":", "：", " :"]),
            # Unquoted (quotes around a line go with its label): what was said, as said.
            st.text(st.characters(blacklist_categories=["Cc", "Cs", "Zl", "Zp"]), max_size=40).filter(
                lambda line: line.strip() and line.strip()[0] not in '"“「'
            ),
        ),
        min_size=2,
        max_size=8,
    )
)
@example(turns=[("Maya", ":", "\xa0fine"), ("<Bart>", ":", "ok"), ("Maya", ":", "good")])  # a no-break space after ":"
def test_any_transcripts_lines_come_back_without_their_speakers_and_in_order(turns):
    # Two speakers take turns, as a conversation does.
    text = "\n".join(f"{turns[index % 2][0]}{colon} {line}" for index, (_, colon, line) in enumerate(turns))

    assert text_without_speakers(text) == "\n".join(line.strip() for _, _, line in turns)
