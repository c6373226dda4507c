"""Privacy between people: what one person told the companion reaches another person's prompt as a topic line.

Day / month / year summaries are stored as per-conversation *sections* — ``{conversation_id,
person_id, who, channel, title, topic, text}`` — and half-hour chunks carry a ``topic`` beside
their ``summary``. The console shows everything; a prompt for person P shows P's own sections in
full and other people's as runtime config ``memory.temporal_summary.cross_person`` says:
``topics`` (their topic lines, the default), ``full`` (their text) or ``none`` (nothing).

A topic line is validated here before it is stored, whoever wrote it (the offline provider or a
model): no e-mail address, URL, handle, phone number, digit or quotation survives, and a line
that repeats a run of its source (six CJK characters, four words) falls back to the source's keywords.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from anima.core.config import config_get
from anima.core.text import clip, is_chinese, normalized, text_keywords

TOPICS, FULL, NONE = "topics", "full", "none"
TOPIC_MAX_CHARS = 80

_EMAIL = re.compile(r"[\w.+-]+\s*(?:@|＠)\s*[\w-]+(?:\s*\.\s*[\w-]+)+")
_URL = re.compile(r"(?:https?://|www\.)\S+|\b[\w-]+(?:\.[\w-]+)*\.(?:com|net|org|io|cn|me|app|dev)\b\S*", re.I)
_HANDLE = re.compile(r"(?<!\w)@\w+")
# A phone number or any other run of digits, with the separators that hold it together.
_NUMBER = re.compile(r"[+＋]?\d[\d\s()（）.\-–/]*\d|\d")
# Numbers spelled in Chinese (一三八零零…): four or more numerals in a row.
_CJK_NUMBER = re.compile(r"[零〇一二三四五六七八九十百千万亿两壹贰叁肆伍陆柒捌玖拾]{4,}")
_QUOTED = re.compile(r"「[^」]*」|『[^』]*』|“[^”]*”|‘[^’]*’|\"[^\"]*\"|(?<!\w)'[^']*'(?!\w)")
_QUOTE_MARKS = re.compile(r"[「」『』“”‘\"]|(?<!\w)['’]|['’](?!\w)")
_EMPTY_BRACKETS = re.compile(r"[(（\[【]\s*[)）\]】]")
_SPACES = re.compile(r"\s+")
_EDGE = re.compile(r"^[\s,，、;；:：.。!！?？\-–—·/]+|[\s,，、;；:：\-–—·/]+$")
_REPEATED_PUNCTUATION = re.compile(r"([,，、;；:：.。])(?:\s*[,，、;；:：.。])+")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"\s+([,，、;；:：.。!！?？])")
_CJK = re.compile(r"[\u3400-\u9fff]")
_WORD_SPLIT = re.compile(r"[\s\u3400-\u9fff]+")
# A topic repeating this much of its source in a row is a quotation, whatever its punctuation.
VERBATIM_CJK_CHARS = 6
VERBATIM_WORDS = 4


def contact_scrub(text: str) -> str:
    """``text`` without e-mail addresses, URLs, handles, numbers and quotations."""
    for pattern in (_QUOTED, _EMAIL, _URL, _HANDLE, _NUMBER, _CJK_NUMBER, _QUOTE_MARKS, _EMPTY_BRACKETS):
        text = pattern.sub(" ", text)
    return _SPACES.sub(" ", text)


def topic_rule(*, source: str) -> str:
    """What a prompt asks of a topic line (``topic_line`` enforces it); ``source`` names what it must not copy."""
    return (
        f"one short line (at most {TOPIC_MAX_CHARS} characters) of the theme and mood that another person may "
        "read: no contact data (e-mail, phone, address, account, link), no numbers, no quotation and no sentence "
        f"copied from {source}"
    )


def topic_clean(text: str) -> str:
    """A topic line as stored: one line, no contact data, numbers or quotes, at most TOPIC_MAX_CHARS."""
    line = contact_scrub(text.replace("\x00", ""))
    line = _REPEATED_PUNCTUATION.sub(r"\1", _SPACE_BEFORE_PUNCTUATION.sub(r"\1", line))
    line = _EDGE.sub("", line.strip())
    return clip(line, TOPIC_MAX_CHARS)


def keywords_topic(source: str) -> str:
    """The topic of ``source`` as its keywords (the offline answer, and the fallback of a bad line)."""
    scrubbed = contact_scrub(source)
    words = text_keywords(scrubbed, count=4)
    return topic_clean(("、" if is_chinese(scrubbed) else ", ").join(words))


def _runs(text: str) -> tuple[set[str], set[tuple[str, ...]]]:
    """Every six CJK characters and every four words in a row of ``text``."""
    cjk = "".join(_CJK.findall(text))
    words = [word for word in (normalized(part) for part in _WORD_SPLIT.split(text)) if word]
    return (
        {cjk[i : i + VERBATIM_CJK_CHARS] for i in range(len(cjk) - VERBATIM_CJK_CHARS + 1)},
        {tuple(words[i : i + VERBATIM_WORDS]) for i in range(len(words) - VERBATIM_WORDS + 1)},
    )


def _quotes_source(line: str, source: str) -> bool:
    """True when ``line`` repeats a run of ``source``: six CJK characters or four words in a row."""
    line_chars, line_words = _runs(line)
    source_chars, source_words = _runs(contact_scrub(source))
    return bool(line_chars & source_chars or line_words & source_words)


def topic_line(candidate: str, *, source: str) -> str:
    """``candidate`` cleaned; the keywords of ``source`` when it is empty after cleaning or repeats the source."""
    line = topic_clean(candidate or "")
    if not line or _quotes_source(line, source):
        return keywords_topic(source)
    return line


def cross_person_mode() -> str:
    return config_get(section="memory.temporal_summary")["cross_person"]


def section_header(section: dict) -> str:
    parts = [section.get("who") or "", f"({section['channel']})" if section.get("channel") else ""]
    parts.append(f"“{section['title']}”" if section.get("title") else "")
    return " ".join(part for part in parts if part)


def section_for(section: dict, *, viewer_ids: frozenset[int] | None, mode: str) -> dict | None:
    """A section as a viewer may see it: whole when its own (or ``full``), else its topic line, else None.

    ``viewer_ids`` None is the console, which sees everything; otherwise the persons whose
    sections are the viewer's own (empty for a conversation whose human is unknown).
    """
    if viewer_ids is None or section.get("person_id") in viewer_ids or mode == FULL:
        return section
    if mode == TOPICS and section.get("topic"):
        return {"who": section.get("who") or "", "topic": section["topic"]}
    return None


def sections_for(sections: Iterable[dict], *, viewer_ids: frozenset[int] | None, mode: str) -> list[dict]:
    visible = (section_for(section, viewer_ids=viewer_ids, mode=mode) for section in sections)
    return [section for section in visible if section is not None]


def section_render(section: dict) -> str:
    """One visible section as a line: its header and text, or who and the topic."""
    if "text" in section:
        header = section_header(section)
        return f"{header}: {section['text']}" if header else section["text"]
    return f"{section['who']}: {section['topic']}" if section.get("who") else section["topic"]


def sections_render(sections: Iterable[dict], *, viewer_ids: frozenset[int] | None, mode: str) -> list[str]:
    return [section_render(section) for section in sections_for(sections, viewer_ids=viewer_ids, mode=mode)]


def summary_sections(*, body: dict, content: str) -> list[dict]:
    """The sections of a stored summary; one written before sections existed is one section of nobody's."""
    sections = body.get("sections")
    if isinstance(sections, list):
        return sections
    return [{"conversation_id": None, "person_id": None, "topic": keywords_topic(content), "text": content}]


def chunk_topic(chunk: dict) -> str:
    """A half-hour chunk as other people see it: who and its topic line.

    Chunks written before topics existed get the keywords of their summary.
    """
    topic = chunk.get("topic") or keywords_topic(chunk.get("summary") or "")
    return f"{chunk['who']}: {topic}" if chunk.get("who") else topic
