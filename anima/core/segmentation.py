"""Word segmentation for full-text search (jieba), run synchronously before every write.

PostgreSQL's parser sees an unsegmented Chinese sentence as one long word, so the
text indexed (``fts_segmented``) is jieba's output joined by spaces. English and
other space-delimited text passes through; the ``english`` text-search config
stems it inside the database. Traditional Chinese is indexed and searched in its
simplified characters (``text_simplified``).
"""

from __future__ import annotations

import functools
import importlib
import logging
import re
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from django.db.models import QuerySet

from anima.core.text import (
    CHAT_PHRASES,
    CHAT_SOUND,
    CHAT_WORDS,
    CJK_IDEOGRAPH,
    FUNCTION_WORDS,
    sentences,
    text_straight,
)

logger = logging.getLogger(__name__)

_init_lock = threading.Lock()
# Runs of non-ASCII text go through jieba; ASCII words (emails, URLs, versions, code) stay whole.
_RUNS = re.compile(r"[\x00-\x7f]+|[^\x00-\x7f]+")
_CJK_CHARACTER = re.compile(CJK_IDEOGRAPH)
# A letter or digit that is not Chinese. A run of them holding one outside ASCII is a word of a script jieba does not
# segment (touché, José, привет, Straße): jieba cuts it at every such letter (touch + é, п + р + и…), so "touché"
# would find "keep in touch" and one Russian word every other. It is kept whole, as the database's parser reads it.
_OTHER_LETTER = rf"(?:(?!{CJK_IDEOGRAPH})[^\W_])"
_OTHER_SCRIPT_RUN = re.compile(rf"{_OTHER_LETTER}+")  # whole runs: one pass over a long word, not one per letter
# A Chinese input method may type Latin letters and digits full width (ＱＱ, ｉＰｈｏｎｅ, ２０２３): they are searched
# as the ASCII ones, which is what a query typed the other way holds.
_HALF_WIDTH = {
    code: code - 0xFEE0
    for start, end in ((0xFF10, 0xFF19), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A))
    for code in range(start, end + 1)
}
# Those letters as the database's regular expressions read them (a data migration's filter): accented Latin, Greek,
# Cyrillic, Armenian, Hebrew, Arabic, the Indic scripts to Lao, Georgian, Latin Extended Additional and Greek Extended,
# kana, Hangul, and full-width Latin letters and digits.
OTHER_SCRIPT_LETTER = (
    "[\u00c0-\u024f\u0370-\u06ff\u0900-\u0eff\u10a0-\u10ff\u1e00-\u1fff\u3040-\u30ff\uac00-\ud7af"
    "\uff10-\uff19\uff21-\uff3a\uff41-\uff5a]"
)
_WORD_CHARACTER = re.compile(r"[^\W_]")
_DRAWN_OUT = re.compile(r"([a-z])\1{2,}")
# A chat word said again without a space ("okok"), up to four times: a longer word is not read for that (the match
# takes time quadratic in the word's length, and a message may be one long token).
_REPEATED = re.compile(r"(.+?)\1+")
_REPEATED_MAX = 4 * max(len(word) for word in CHAT_WORDS if word.isascii())
_DEGREE = frozenset("真太挺很超好蛮")
# What the tagger marks as an interjection (好家伙), a modal particle, an onomatopoeia or an adverb (马上, 绝了) names
# nothing to look up, nor does a function word: a preposition (跟, 把), a conjunction (和, 但是) or an auxiliary (的,
# 了, 着: jieba tags each kind apart, uj, ul, uz…); nor does a number alone (666, 233 and 886 are chat for praise,
# laughter and goodbye). Latin words are tagged "eng" and go by the word lists.
_NAMELESS_TAGS = frozenset(("e", "y", "o", "d", "p", "c", "u", "ud", "ug", "uj", "ul", "uv", "uz"))
# A wish names an occasion, not a subject: "happy new year", "merry christmas", "have a good weekend", "enjoy
# your evening", 「周末愉快」「生日快乐」. Only the wish's form reads as one: "I have a flight tomorrow" names a flight.
# It is taken out of a message as a set phrase is.
_OCCASION = r"(?:new\s+year|[a-z']*day|holidays?|christmas|xmas|easter|thanksgiving|anniversary|weekend|halloween)"
_WISH = (
    rf"\b(?:happy|merry)\s+{_OCCASION}\b"
    r"|\b(?:have\s+an?\s+(?:good|nice|great|lovely|wonderful|relaxing|fun)|enjoy\s+(?:your|the))\s+"
    r"(?:[a-z]*day|night|evening|morning|afternoon|weekend|week|time|trip|holidays?|vacation|break|meal|flight)\b"
    # A Chinese wish is a clause of its own: 「小雨生日快乐」 names 小雨. A particle may close it (「周末快乐哦」).
    rf"|(?<!\w)(?:祝[你您]?)?{CJK_IDEOGRAPH}{{1,3}}(?:快乐|愉快)[哦噢喔呀啊啦哈嘛哟呗吖]*(?!\w)"
)

# A reaction to what was just said, its object a pronoun ("love that", "loved it", "miss you"): it names nothing of its
# own. "I love this cafe" still names the cafe.
_REACTION = r"\b(?:lov(?:e[ds]?|ing)|miss(?:ed)?)\s+(?:that|it|this|you)\b"


# What a chat app writes in place of an emoji, a sticker or a file names nothing of the message: WeChat's and QQ's
# bracketed names ([捂脸], [强], [图片], [动画表情]), LINE's and Telegram's [Photo] and [Sticker], WhatsApp's "<Media
# omitted>", "image omitted" and "<attached: …>", and the shortcodes of Slack, Discord and GitHub (:joy:, :+1:). Such
# codes fill exported chats, and their words would find memories of faces, hearts and fire. Every part is bounded: a
# message may be one long token, and an unbounded run before a closing colon would be matched in quadratic time.
_MEDIA = r"(?:photo|image|picture|sticker|gif|video|voice|audio|file|document|location|contact|link|emoji|media)s?"
_APP_CODE = (
    rf"\[{CJK_IDEOGRAPH}{{1,6}}\]"
    rf"|\[(?:animated |voice |video )?{_MEDIA}(?: message| omitted)?\]"
    rf"|<?\b{_MEDIA} omitted\b>?|<attached:[^>\n]{{0,200}}>"
    r"|:(?=[0-9_+\-]{0,39}[a-z])[a-z0-9_+\-]{1,40}:"
)
_APP_CODE_RE = re.compile(_APP_CODE, re.IGNORECASE)


def text_without_app_codes(text: str) -> str:
    """``text`` without what a chat app writes in place of an emoji, a sticker or a file (``_APP_CODE``)."""
    return _APP_CODE_RE.sub(" ", text)


def _phrase_pattern(phrase: str) -> str:
    """An English phrase as whole words however spaced, its apostrophes optional; a Chinese one as written (its words
    have no spaces)."""
    if not phrase.isascii():
        return re.escape(phrase)
    # Chat often drops the apostrophe: "dont worry" and "thats rough" are the phrases written with it.
    return r"\b" + r"\s+".join(re.escape(word).replace("'", "'?") for word in phrase.split()) + r"\b"


_CHAT_PHRASE = re.compile(
    "|".join([*(_phrase_pattern(phrase) for phrase in CHAT_PHRASES), _WISH, _REACTION]), re.IGNORECASE
)
_initialized = False


@functools.cache
def _opencc(config: str) -> Any:
    import opencc

    return opencc.OpenCC(config)


def text_simplified(text: str) -> str:
    """``text`` with its traditional Chinese characters and phrases in their simplified forms (OpenCC's t2s tables);
    simplified Chinese and every other script pass unchanged.

    What search reads, embeds and tells chat from a topic by: one person writes 「我的貓」 where a fact says 「猫」, and
    jieba's dictionary and the chat lists are simplified, so 「謝謝」 and 「晚安囉」 would name words. Nothing stored or
    shown changes: a row keeps its text, only its search tokens and its vector are of the simplified one.
    """
    if text.isascii() or not _CJK_CHARACTER.search(text):
        return text
    simplified = _opencc("t2s").convert(text)
    if "著" in simplified:
        # Taiwan writes the particle 着 as 著 (看著, 睡著了), which t2s keeps: 著 is simplified too (著名). OpenCC's
        # Taiwan table tells them apart; only 著 is taken from it, as its other readings would change simplified
        # text (么 as 幺).
        taiwan = _opencc("tw2s").convert(text)
        if len(taiwan) == len(simplified):
            pairs = zip(simplified, taiwan, strict=True)
            simplified = "".join(read if plain == "著" else plain for plain, read in pairs)
    return simplified


def text_ruled(text: str) -> str:
    """``text`` as rules written in simplified characters and with straight apostrophes read it: 「記住」 as 「记住」,
    "don’t" (a phone's apostrophe) as "don't". For reading only: what is stored or shown keeps its own text."""
    return text_simplified(text_straight(text))


def text_ruled_in_place(text: str) -> str:
    """``text_ruled(text)`` when it keeps every character where it was (a phrase table may change the length), else
    ``text``: a pattern matched on it ends where it would on ``text``, so ``text`` can be cut there."""
    ruled = text_ruled(text)
    return ruled if len(ruled) == len(text) else text


def text_traditional(text: str) -> str:
    """``text`` in traditional characters (OpenCC's s2t tables, which read a character by its phrase: 头发 → 頭髮,
    发了 → 發了); any other script unchanged."""
    if text.isascii() or not _CJK_CHARACTER.search(text):
        return text
    return _opencc("s2t").convert(text)


def text_traditional_forms(text: str) -> set[str]:
    """``text`` as each traditional standard writes it: OpenCC's s2t tables and Taiwan's and Hong Kong's
    character forms (为 is 爲 by s2t, 為 in both; 里 is 裏, and 裡 in Taiwan). Phrases stay as they are."""
    if text.isascii() or not _CJK_CHARACTER.search(text):
        return {text}
    return {text_traditional(text), _opencc("s2tw").convert(text), _opencc("s2hk").convert(text)}


def text_in_script_of(text: str, *, like: str, name: str = "") -> str:
    """``text``, made from the simplified reading of ``like`` (``text_simplified``), in ``like``'s script: unchanged
    when ``like`` holds no traditional character, else in traditional characters, each written as ``like`` writes it
    where ``like`` holds it in one way (裡 or 裏 for 里) and by OpenCC's s2t tables elsewhere. A fact read from
    「我女兒今年八歲了」 is stored as 「Leo的女兒今年八歲」, in the characters its person wrote.

    ``name``, a person's name as written, stands where ``text`` holds its simplified reading: no table converts a
    name (the surname 于 is not 於, and 陳明 stays 陳明 in a fact told in simplified characters)."""
    plain_name = text_simplified(name)
    if plain_name and plain_name in text:
        return name.join(text_in_script_of(part, like=like) for part in text.split(plain_name))
    own = _own_forms(like)
    if own is None:
        return text
    converted = text_traditional(text)
    if len(converted) != len(text):
        return converted
    return "".join(own.get(plain, written) for plain, written in zip(text, converted, strict=True))


# A prompt renders many short texts like the same messages (its headings, every topic word): read them once.
@functools.lru_cache(maxsize=256)
def _own_forms(like: str) -> dict[str, str] | None:
    """Each simplified character ``like`` writes in one traditional way, that way; None when ``like`` holds no
    traditional character."""
    simplified = text_simplified(like)
    if simplified == like:
        return None
    forms: dict[str, set[str]] = {}
    if len(simplified) == len(like):
        for plain, written in zip(simplified, like, strict=True):
            forms.setdefault(plain, set()).add(written)
    # A character ``like`` writes two ways (頭髮 and 發 are both 发) is left to the tables, which read its phrase.
    return {plain: next(iter(written)) for plain, written in forms.items() if len(written) == 1}


@functools.cache
def jieba_get() -> ModuleType:
    """The jieba module, imported on first use: its import (pkg_resources with it) is a sixth of a second that
    every process would pay at start-up, most of which never segment a word (``manage.py help``, a migration)."""
    import jieba

    jieba.setLogLevel(logging.WARNING)
    return jieba


def segmentation_load(*, tags: bool = False) -> None:
    """Load jieba's dictionary now (else on the first segmentation): once per process, under a lock; with
    ``tags`` also the part-of-speech tables of ``word_tags`` and the word frequencies of keyword extraction
    (a second more, else on their first call, which holds every other thread's import of them meanwhile).

    A pre-forking parent (a Celery worker, gunicorn's master) calls it so that every child shares them.
    """
    global _initialized
    if tags:
        importlib.import_module("jieba.analyse")  # imports jieba.posseg too
    if _initialized:
        return
    with _init_lock:
        if not _initialized:
            jieba_get().initialize()
            _initialized = True


def _pieces(text: str) -> Iterator[tuple[str, bool]]:
    """``text`` as (piece, whole) pairs, in order: each word of a script jieba does not segment is a piece to keep
    whole, the text between them a piece for jieba. Full-width Latin letters and digits are read as ASCII."""
    if text.isascii():  # most text: nothing to translate or to keep whole
        yield text, False
        return
    text = text.translate(_HALF_WIDTH)
    start = 0
    for match in _OTHER_SCRIPT_RUN.finditer(text):
        if match.group().isascii():
            continue
        if match.start() > start:
            yield text[start : match.start()], False
        yield match.group(), True
        start = match.end()
    if start < len(text):
        yield text[start:], False


def words_cut(text: str, *, search: bool = False) -> list[str]:
    """jieba's words of ``text`` (with ``search``, its search tokens: 面试官 also gives 面试), spaces and punctuation
    among them; a word of a script jieba does not segment (touché, привет) is one word."""
    segmentation_load()
    jieba = jieba_get()
    cut = jieba.cut_for_search if search else jieba.cut
    words: list[str] = []
    for piece, whole in _pieces(text):
        words.extend([piece] if whole else cut(piece))
    return words


def word_tags(text: str) -> list[tuple[str, str]]:
    """``text``'s words with jieba's part-of-speech tags ("a…" adjectives, "m" numerals, "q" measure words…); a word
    of a script jieba does not segment is tagged "eng", as jieba tags a Latin word."""
    segmentation_load()  # the dictionary it needs, loaded with jieba's log quiet
    posseg = importlib.import_module("jieba.posseg")
    tags: list[tuple[str, str]] = []
    for piece, whole in _pieces(text):
        tags.extend([(piece, "eng")] if whole else ((pair.word, pair.flag) for pair in posseg.cut(piece)))
    return tags


def word_parts(word: str, tag: str) -> list[tuple[str, str]]:
    """``word`` (tagged ``tag``) as search segmentation reads it: a word of 3+ characters also holds the dictionary
    words of 2 and 3 characters inside it (面试官 holds 面试), each with its dictionary tag; one jieba only guessed
    (not in its dictionary, as 空档期) stands for those parts alone. Other words are themselves."""
    if len(word) <= 2:
        return [(word, tag)]
    segmentation_load()
    dictionary = importlib.import_module("jieba.posseg").dt.word_tag_tab
    parts = [(word, dictionary[word])] if word in dictionary else []
    for size in (2, 3):
        spans = (word[start : start + size] for start in range(len(word) - size + 1))
        parts.extend((span, dictionary[span]) for span in spans if len(word) > size and span in dictionary)
    return parts


def text_informative(text: str) -> bool:
    """Whether ``text`` names anything: a word that is neither a function word nor chat (``CHAT_WORDS``:
    greetings, thanks, acknowledgements, interjections) nor a one-character Chinese verb (吃, 笑, 忙: in
    「吃了吗」「笑死我了」「在忙吗」 they are the greeting, not a topic). "lol ok", 「嗯嗯，好的谢谢」 and ":)" name
    nothing; "How is Miso?", 「我的猫呢」 and 「我的猫最近不爱吃饭」 do.

    A set phrase (``CHAT_PHRASES``: "long time no see", "good job") is chat as a whole, though its words are not.

    (A chat word in ``CHAT_WORDS`` includes every function word.)"""
    return bool(text_naming_words(text))


def text_naming_words(text: str) -> list[str]:
    """The words of ``text`` that name something (``text_informative``), in order."""
    plain = _CHAT_PHRASE.sub(" ", text_ruled(text_without_app_codes(text)))
    tagged = [(token.strip().lower(), tag) for token, tag in word_tags(plain)]
    # The tagger splits a few chat words that plain segmentation keeps whole (再会: 再 + 会): two adjacent words
    # that make one are that word.
    paired = {i for i in range(len(tagged) - 1) if tagged[i][0] + tagged[i + 1][0] in CHAT_WORDS}
    paired |= {i + 1 for i in paired}
    return [
        word
        for i, (word, tag) in enumerate(tagged)
        if i not in paired
        and _WORD_CHARACTER.search(word)
        and not _chat_word(word)
        and not (len(word) == 1 and _CJK_CHARACTER.fullmatch(word) and tag.startswith("v"))
        and tag not in _NAMELESS_TAGS
        and not word.isdigit()
    ]


def _chat_word(word: str) -> bool:
    # A word drawn out ("heyyy", "sooo") is the word.
    if any(form in CHAT_WORDS or CHAT_SOUND.fullmatch(form) for form in (word, _DRAWN_OUT.sub(r"\1", word))):
        return True
    if word.isascii():
        # A lone Latin letter is a piece of chat spelling ("g'day", "how r u"), not a name; a chat word said twice
        # or more without a space ("okok", "byebye", "hihi") is the word.
        repeated = _REPEATED.fullmatch(word) if len(word) <= _REPEATED_MAX else None
        if len(word) == 1 or (repeated and _chat_word(repeated.group(1))):
            return True
        # A last letter typed twice for emphasis ("heyy", "okk", "thankss") is the word, unless what is left is a
        # function word: "bee", "inn" and "butt" name things.
        if len(word) > 2 and word[-1] == word[-2] and word[:-1] in CHAT_WORDS and word[:-1] not in FUNCTION_WORDS:
            return True
    # A chat word after a degree word is still one: jieba keeps 真不错 and 太厉害 whole.
    if len(word) > 2 and word[0] in _DEGREE and _chat_word(word[1:]):
        return True
    # jieba joins a function word and a chat word into one (那好, 我要): such a word is made of neither.
    return len(word) > 1 and all(_CJK_CHARACTER.fullmatch(ch) and ch in CHAT_WORDS for ch in word)


_QUESTION_END = re.compile(r"[?？][\W_]*$|[吗呢么嘛][\s~～]*$")
_WORD_RE = re.compile(rf"(?:{_OTHER_LETTER}|')+|{CJK_IDEOGRAPH}{{1,2}}")
_CLAUSE_END = re.compile(r"[,，、]")


def text_asks(text: str) -> bool:
    """Whether ``text`` ends in a question ("…?", 「…吗」)."""
    return bool(_QUESTION_END.search(text_simplified(text).strip()))


def text_word_count(text: str) -> int:
    """How many words ``text`` has, a Chinese one counted every two characters."""
    return len(_WORD_RE.findall(text_straight(text)))


def asks_only(text: str) -> bool:
    """True when ``text`` only asks: it ends in a question and every clause before that question's is a question too,
    a short interjection or names nothing (``text_informative``: a greeting, thanks, praise), so it states nothing
    of its own: "Wow! What got you into running?", "Hey Mel! Good to see you! How have you been?", 「真的吗？哪家？」.
    Parts without a word (an emoji after the question mark) are left out; a line of no words but a question mark
    (「？」, "??") asks too."""
    parts = [clause for part in sentences(text) for clause in _CLAUSE_END.split(part) if _WORD_RE.search(clause)]
    if not parts:
        return "?" in text or "？" in text
    if not text_asks(parts[-1]):
        return False
    # The cheap tests first: only a longer statement clause is tagged.
    return all(text_asks(part) or text_word_count(part) <= 3 or not text_informative(part) for part in parts[:-1])


def _characters(tokens: list[str]) -> list[str]:
    """The Chinese characters inside ``tokens``' words that are not words of their own there, once each.

    A one-character word of a message (猫, 车, 狗) names what a memory calls 橘猫, 新车 or 小狗; jieba keeps
    those whole, so only the characters, indexed after the words (phrases keep their adjacency), let the
    word find them. Function characters (的, 了, 是) stay out: every query drops them anyway.
    """
    standalone = set(tokens)
    characters: dict[str, None] = {}
    for token in tokens:
        if len(token) > 1:
            for character in _CJK_CHARACTER.findall(token):
                if character not in standalone and character not in FUNCTION_WORDS:
                    characters.setdefault(character, None)
    return list(characters)


def segment_text(text: str | None) -> str | None:
    """Return ``text`` as space-separated search tokens, or None if segmentation fails.

    A failure must never stop the row from being written: the caller stores NULL
    and the row simply is not found by full-text search until re-segmented.
    """
    if text is None:
        return None
    try:
        tokens: list[str] = []
        for piece, whole in _pieces(text_simplified(text)):
            if whole:
                tokens.append(piece)
                continue
            for run in _RUNS.findall(piece):
                if run.isascii():
                    tokens.extend(run.split())
                else:
                    segmentation_load()
                    tokens.extend(token for token in (t.strip() for t in jieba_get().cut_for_search(run)) if token)
        return " ".join(tokens + _characters(tokens))
    except Exception:
        logger.warning("segmentation failed; storing NULL fts_segmented", exc_info=True)
        return None


def segmented_rows_refresh(
    *,
    queryset: QuerySet,
    text_of: Callable[[Any], str],
    batch_size: int = 500,
    progress: Callable[[int, int], None] | None = None,
    holding: str = CJK_IDEOGRAPH,
    written: Callable[[list[int]], None] | None = None,
) -> int:
    """Re-segment the rows of ``queryset`` whose content holds a character of ``holding`` (a character class the
    database's regular expressions read; by default a Chinese character); how many changed.

    For data migrations after the segmentation changed (they pass their historical model's queryset and
    how its searchable text is made): rows are read in id order, a batch at a time, and only rows whose
    stored segmentation differs are written. ``progress(read, changed)`` is called after every batch,
    ``written(ids)`` with the ids of each batch's rows written.
    """
    read = changed = last = 0
    rows = queryset.filter(content__regex=holding).order_by("pk")
    while batch := list(rows.filter(pk__gt=last)[:batch_size]):
        last = batch[-1].pk
        stale = []
        for row in batch:
            segmented = segment_text(text_of(row))
            if segmented is not None and segmented != row.fts_segmented:
                row.fts_segmented = segmented
                stale.append(row)
        queryset.model.objects.bulk_update(stale, ["fts_segmented"])
        if written is not None and stale:
            written([row.pk for row in stale])
        read += len(batch)
        changed += len(stale)
        if progress is not None:
            progress(read, changed)
    return changed


def segmented_rows_migrate(
    queryset: QuerySet,
    *,
    what: str,
    fields: tuple[str, ...] = ("content",),
    holding: str = CJK_IDEOGRAPH,
    rows_with: str = "Chinese",
    written: Callable[[list[int]], None] | None = None,
) -> int:
    """A data migration's ``segmented_rows_refresh`` of ``queryset`` (its historical model's rows, ``what`` they are),
    each row's searchable text being its ``fields`` joined by line breaks, empty ones left out; how many changed."""
    return segmented_rows_refresh(
        queryset=queryset,
        text_of=lambda row: "\n".join(value for value in (getattr(row, field) for field in fields) if value),
        progress=segmented_rows_progress(what, rows_with=rows_with),
        holding=holding,
        written=written,
    )


def segmented_rows_progress(
    what: str, *, every: int = 10_000, rows_with: str = "Chinese"
) -> Callable[[int, int], None]:
    """A ``segmented_rows_refresh`` progress callback printing a line every ``every`` rows read (a migration's
    output: re-segmenting takes about 40 s per 100,000 Chinese messages on two cores); ``rows_with`` names what
    the rows read hold, as its ``holding`` pattern matches."""
    shown = 0

    def show(read: int, changed: int) -> None:
        nonlocal shown
        if read - shown >= every:
            shown = read
            print(f"\n    {what}: {read:,} rows with {rows_with} read, {changed:,} re-segmented", end="", flush=True)

    return show
