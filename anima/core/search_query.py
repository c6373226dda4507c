"""The search query language: user text to a tsquery string of quoted lexemes and a trigram text.

One language for every text search (memory recall, the history timeline), so ``AND`` /
``OR`` / ``NOT`` and ``"quoted phrases"`` mean the same wherever the agent tools offer them.

User text never reaches SQL as SQL. The FTS query is a tsquery *string* of quoted
lexemes joined by operators we emit ourselves; it travels as a parameter to
``to_tsquery('english', …)`` so the database normalises each lexeme exactly as it
normalised the indexed text (stemming, stopwords). The trigram branch gets the
query's content words, also as a parameter.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from anima.core.errors import AnimaError
from anima.core.segmentation import text_simplified, text_without_app_codes, words_cut
from anima.core.text import CJK_IDEOGRAPH, FUNCTION_WORDS, is_chinese

# A 10 KB query must stay a reasonable tsquery: beyond this many lexemes the tail is dropped.
MAX_LEXEMES = 160
# Free text with more content words than this is treated as a passage (a dialogue), not a query.
LONG_QUERY_WORDS = 24
LONG_QUERY_KEYWORDS = 60
TRIGRAM_WORDS = 8
# A word of fewer letters than this (not Chinese) has too few trigrams for a typo of it to be told from another word:
# "pet" is as similar to "people" (0.5, their first two letters) as the trigram branch asks. Full-text search
# finds its inflections ("pets") without it.
MIN_TRIGRAM_LETTERS = 4

OPERATORS = {"AND": "&", "OR": "|", "NOT": "!"}
_TOKEN_RE = re.compile(r'"([^"]*)"?|(\S+)')
_OPERATOR_WORD_RE = re.compile(r"(?<!\S)(?:" + "|".join(OPERATORS) + r")(?!\S)")
_CJK_RUN_RE = re.compile(CJK_IDEOGRAPH + "+")
_WORDLIKE_RE = re.compile(r"\w", re.UNICODE)


class QuerySyntaxError(AnimaError):
    """The query is malformed (e.g. ends in an operator); the message says how."""

    default_field = "q"


@dataclass(frozen=True)
class SearchQuery:
    """What the two branches search with; ``tsquery`` is input for ``to_tsquery('english', …)``."""

    tsquery: str
    trigram_text: str
    # (word, weight) pairs: FTS ranks by BM25, the summed weight of the words a row holds, each times its
    # inverse document frequency among the rows searched. A passage's words are weighted (``_keywords``), a plain
    # query's weigh alike; a query with operators or quotes has none and is ranked by ts_rank_cd.
    weighted_terms: tuple[tuple[str, float], ...] = ()
    # A plain query or a passage (no operators or quotes): ``tsquery`` is exactly these lexemes OR-ed, and
    # ``trigram_text`` these words joined; they let document-frequency pruning drop common ones.
    terms: tuple[str, ...] = ()
    trigram_words: tuple[str, ...] = ()
    # The text used operators or quotes: only FTS can honour it (no trigram text, no substring stand-in).
    explicit: bool = False

    @property
    def is_empty(self) -> bool:
        return not self.tsquery and not self.trigram_text


def search_text_plain(text: str) -> str:
    """``text`` as plain words: a chat message is not a query, so its double quotes and upper-case
    AND / OR / NOT (「他说 "明天见"」, "I do NOT eat fish") stay words instead of phrase or operator syntax, and
    what a chat app writes for an emoji, a sticker or a file (「考上了[强]」, "got the job :fire:") is no word of it."""
    plain = text_without_app_codes(text).replace('"', " ")
    return _OPERATOR_WORD_RE.sub(lambda match: match[0].lower(), plain)


# A transcript's line: who speaks, then what they said, perhaps in quotes. A speaker is bracketed (「<Bart>:」,
# "[Maya]:"), a name of one or two words ("Assistant:", "Dr. Chen:"; not "The vet said:", nor a time such as "10:30"
# nor an address's "https:") or of up to four Chinese characters (「小雨：」; not 「我昨天跟你说过：」).
_LATIN_NAME = r"[A-Za-z\u00c0-\u024f][\w'.\-]{0,19}(?: [\w'.\-]{1,20})?"
_SPEAKER_LINE_RE = re.compile(
    rf"^\s*(?P<who><[^<>\n]{{1,40}}>|\[[^\[\]\n]{{1,40}}\]|{_LATIN_NAME}|{CJK_IDEOGRAPH}{{1,4}})\s*[:：](?!//)"
    r"\s*(?P<said>.*?)\s*$"
)
_QUOTED_RE = re.compile(r'^(?:"(.*)"|“(.*)”|「(.*)」)$', re.DOTALL)


def text_without_speakers(text: str) -> str:
    """A transcript as what its lines say: each line without its speaker's label and the quotes around it.

    A transcript starts with a label, and at least half its lines have one: a message of several lines goes on
    without one. Either a speaker speaks twice or there are only two turns: a list such as "Breakfast:
    eggs / Lunch: soup / Dinner: rice" is not one. Any other text comes back as it is.

    Recall reads a pasted stretch of dialogue this way. A label on every turn says who spoke, not about what, and
    in a short line's vector it weighs as much as the words (``<Bart>: "Can I do it again?"``): on MADial, whose
    queries are such transcripts, the dense branch found as much with any name for its speakers once they were
    taken out, and more (docs/benchmarks.md)."""
    lines = [line for line in text.splitlines() if line.strip()]
    said = [_SPEAKER_LINE_RE.match(line) for line in lines]
    turns = [match for match in said if match]
    if not said or not said[0] or len(turns) < 2 or 2 * len(turns) < len(lines):
        return text
    # Who speaks, by the label alone: the spaces after its colon (a no-break space too) are no part of it.
    speakers = {match["who"].strip("<>[]").strip().casefold() for match in turns}
    if len(turns) > 2 and len(speakers) == len(turns):
        return text
    return "\n".join(
        _unquoted(match["said"] if match else line.strip()) for line, match in zip(lines, said, strict=True)
    )


def _unquoted(line: str) -> str:
    quoted = _QUOTED_RE.match(line)
    return next(part for part in quoted.groups() if part is not None) if quoted else line


# What a Latin-script name must not run into on either side to be that name ("Leo" in 「Leo的老板」, not in "Leon").
_NAME_EDGE = r"A-Za-z0-9\u00c0-\u024f"


def text_without_names(text: str, *, names: Sequence[str]) -> str:
    """``text`` with every mention of ``names`` taken out (case aside; a Latin-script name as a whole word, with
    its possessive: "Maya's"; a Chinese one wherever it stands)."""
    for pattern in _name_patterns(names):
        text = pattern.sub(" ", text)
    return text


def text_as_asker(text: str, *, names: Sequence[str]) -> str:
    """``text`` with ``names``, the asker's own, read as the asker's first person: in Maya's own recall "What is
    Maya's job?" asks what "What is my job?" does, and 「Maya 是做什么工作的」 what 「我是做什么工作的」 does."""
    chinese = is_chinese(text)
    # A name that is also a word ("Will", "May") is the name only as a name is written: "What will Leo do?" asks of Leo.
    for pattern in _name_patterns(names, words_as_written=True):
        if chinese:
            text = re.sub(rf"\s*(?:{pattern.pattern})\s*", "我", text, flags=pattern.flags)
        else:
            text = pattern.sub(lambda match: "my" if match.group("possessive") else "I", text)
    return text


def _name_patterns(names: Sequence[str], *, words_as_written: bool = False) -> list[re.Pattern]:
    """A pattern for each of ``names``, longest first: a Latin-script name as a whole word with its possessive
    (group ``possessive``), a Chinese one wherever it stands; case aside, but for a name that is also a function
    word when ``words_as_written``."""
    patterns = []
    for name in sorted({name.strip() for name in names if name.strip()}, key=len, reverse=True):
        if _CJK_RUN_RE.search(name):
            pattern = f"{re.escape(name)}(?P<possessive>)"
        else:
            pattern = rf"(?<![{_NAME_EDGE}]){re.escape(name)}(?P<possessive>['\u2019]s)?(?![{_NAME_EDGE}])"
        as_written = words_as_written and name.casefold() in FUNCTION_WORDS
        patterns.append(re.compile(pattern, 0 if as_written else re.IGNORECASE))
    return patterns


def _quote_lexeme(text: str) -> str:
    # tsquery quoting: backslash escapes, a single quote is doubled.
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def _clean(text: str) -> str:
    # Control characters (NUL cannot even be sent to PostgreSQL) become spaces; line breaks stay (turns).
    return "".join(" " if unicodedata.category(ch) in ("Cc", "Cs") and ch != "\n" else ch for ch in text)


def _content_words(text: str) -> list[str]:
    """jieba's search tokens of ``text`` without stopwords and punctuation, in order, deduplicated."""
    seen: dict[str, None] = {}
    for token in words_cut(text, search=True):
        word = token.strip().lower()
        if word and _WORDLIKE_RE.search(word) and word not in FUNCTION_WORDS:
            seen.setdefault(word, None)
    return list(seen)


def _bigrams(text: str) -> list[str]:
    """Adjacent character bigrams of every CJK run longer than two characters."""
    grams: list[str] = []
    for run in _CJK_RUN_RE.findall(text):
        if len(run) > 2:
            grams.extend(run[i : i + 2] for i in range(len(run) - 1))
    return grams


def _reduplicated(words: Sequence[str]) -> list[str]:
    """The character of every doubled Chinese word (狗狗, 猫猫, 妈妈): the same thing as the character alone."""
    return [
        word[0]
        for word in words
        if len(word) == 2 and word[0] == word[1] and _CJK_RUN_RE.fullmatch(word) and word[0] not in FUNCTION_WORDS
    ]


def tsquery_or(lexemes: Sequence[str]) -> str:
    """A tsquery operand matching any of ``lexemes`` (quoted, deduplicated); "" for none."""
    unique = list(dict.fromkeys(lexemes))
    if not unique:
        return ""
    joined = " | ".join(_quote_lexeme(lexeme) for lexeme in unique)
    return f"( {joined} )" if len(unique) > 1 else joined


@cache
def _jieba_idf() -> tuple[dict[str, float], float]:
    # Loaded on first passage, not at import: every Django process imports this module.
    import jieba.analyse

    return jieba.analyse.default_tfidf.idf_freq, jieba.analyse.default_tfidf.median_idf


def _keywords(text: str) -> list[tuple[str, float]]:
    """Weighted topic words of a passage: in how many of its lines a word occurs, times jieba's idf squared.

    The database then multiplies in each word's idf within the searched source. Measured on
    MADial-Bench (bench_recall): squaring the general-corpus idf gained ~1 point of R@10 in
    zh; weighting later turns up lost recall at k=10, so lines count alike.
    """
    idf, median = _jieba_idf()
    weights: dict[str, float] = {}
    for line in text.splitlines() or [text]:
        for word in _content_words(line):
            weights[word] = weights.get(word, 0.0) + (idf.get(word, median) / median) ** 2
    ranked = sorted(weights.items(), key=lambda item: -item[1])
    return ranked[:LONG_QUERY_KEYWORDS]


def search_query_build(*, text: str) -> SearchQuery:
    """Turn user text into a safe FTS query and a trigram text.

    Words are OR-ed; ``AND`` / ``OR`` / ``NOT`` (upper case, as separate words) are
    operators; ``"quoted phrases"`` keep adjacency; a CJK run longer than two
    characters also adds its character bigrams, a doubled character (狗狗) the
    character. A query using operators or quotes is searched by FTS alone
    (similarity cannot honour them). Text without operators and longer than
    LONG_QUERY_WORDS content words is a passage (e.g. a dialogue): it becomes
    its weighted keywords, see ``_keywords``.
    Raises QuerySyntaxError when an operator has no operand (e.g. the query ends in one).
    """
    # Searched as it is indexed: in simplified characters (``segment_text``).
    text = text_simplified(_clean(text or ""))
    if not any(word in OPERATORS for word in text.split()) and len(_content_words(text)) > LONG_QUERY_WORDS:
        return _passage_query(text)
    items: list[tuple[str, str]] = []  # ("op", symbol) or ("term", tsquery operand)
    plain_words: list[str] = []
    plain_lexemes: list[str] = []  # every OR-ed operand, unquoted (what the tsquery holds if has_syntax stays False)
    has_syntax = False
    lexeme_count = 0
    dropped = False  # the last operand said nothing searchable (a stopword, or past the lexeme cap)
    weights: dict[str, float] = {}  # a lexeme's BM25 weight, where it is not 1

    def drop_operand() -> None:
        # An operand that says nothing takes the operators that were waiting for it along.
        nonlocal dropped
        while items and items[-1][0] == "op":
            items.pop()
        dropped = True

    for match in _TOKEN_RE.finditer(text):
        phrase, word = match.group(1), match.group(2)
        if word is not None and word in OPERATORS:
            symbol = OPERATORS[word]
            if dropped and symbol != "!" and (not items or items[-1][0] == "op"):
                continue  # a binary operator right after a dropped operand joins nothing
            items.append(("op", symbol))
            has_syntax = True
            continue
        if lexeme_count >= MAX_LEXEMES:
            drop_operand()
            continue
        if phrase is not None:
            has_syntax = True
            # The database parser splits the quoted phrase and chains its words with <->.
            segmented = " ".join(token for token in words_cut(phrase) if token.strip())
            words = _content_words(phrase)
            if words:
                items.append(("term", _quote_lexeme(segmented)))
                plain_words.extend(words)
                lexeme_count += 1
                dropped = False
            else:
                drop_operand()
            continue
        words = _content_words(word)
        lexemes = words + _reduplicated(words) + _bigrams(word)
        if word.isascii() and len(words) > 1:
            # The index's parser keeps e-mails, URLs, versions whole ("leo@example.com"); so does to_tsquery. A row
            # holding it whole holds each of its parts in order: it weighs as much as they do together.
            lexemes.insert(0, word)
            weights[word] = float(len(words))
        if lexemes:
            lexemes = lexemes[: MAX_LEXEMES - lexeme_count]
            items.append(("term", tsquery_or(lexemes)))
            plain_words.extend(words)
            plain_lexemes.extend(lexemes)
            lexeme_count += len(lexemes)
            dropped = False
        else:
            drop_operand()
    tsquery = _join_items(items)
    if has_syntax:
        # Similarity cannot honour AND / NOT or adjacency: explicit syntax searches by FTS alone.
        return SearchQuery(tsquery=tsquery, trigram_text="", explicit=True)
    trigram_words = [
        word for word in dict.fromkeys(plain_words) if len(word) >= MIN_TRIGRAM_LETTERS or _CJK_RUN_RE.search(word)
    ][:TRIGRAM_WORDS]
    terms = tuple(dict.fromkeys(plain_lexemes))
    return SearchQuery(
        tsquery=tsquery,
        trigram_text=" ".join(trigram_words),
        terms=terms,
        trigram_words=tuple(trigram_words),
        # Ranked by BM25 as a passage is, each word weighing alike: a rare word says more than a common one
        # (ts_rank_cd counts "Leo" in every other line of Leo's as much as the one 「老板」 asked about).
        weighted_terms=tuple((_quote_lexeme(term), weights.get(term, 1.0)) for term in terms),
    )


def _passage_query(text: str) -> SearchQuery:
    """A passage (a dialogue, a long message): its weighted keywords; quotes in it are prose, not syntax."""
    keywords = _keywords(text)
    words = [word for word, _ in keywords]
    return SearchQuery(
        tsquery=tsquery_or(words),
        # Trigram similarity to a whole dialogue is noise: on MADial-Bench the branch cost ~15 points of R@10.
        trigram_text="",
        weighted_terms=tuple((_quote_lexeme(word), weight) for word, weight in keywords),
        # A window's words common in the searched rows are left to fill up its ranking, as a question's are: ranking
        # every row holding one of them ran a 9-line window over a million messages past the recall timeout.
        terms=tuple(words),
    )


def _join_items(items: list[tuple[str, str]]) -> str:
    """Join terms with the explicit operators; adjacent terms are OR-ed; NOT is a prefix."""
    parts: list[str] = []
    expect_operand = True  # at the start, or right after a binary operator
    pending_not = False
    for kind, value in items:
        if kind == "op" and value == "!":
            pending_not = not pending_not
            continue
        if kind == "op":
            if expect_operand or pending_not:
                symbol = {"&": "AND", "|": "OR"}[value]
                raise QuerySyntaxError(f"operator {symbol} needs a term on each side")
            parts.append(value)
            expect_operand = True
            continue
        if not expect_operand:
            parts.append("|")
        parts.append(f"!{value}" if pending_not else value)
        pending_not = False
        expect_operand = False
    if pending_not or (parts and expect_operand):
        raise QuerySyntaxError("the query ends in an operator (AND / OR / NOT); add a term after it")
    return " ".join(parts)
