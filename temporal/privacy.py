"""Privacy between people: what one person told the companion reaches another person's prompt as a topic line.

Day / month / year summaries are stored as per-conversation *sections* — ``{conversation_id,
person_id, who, channel, title, topic, text}`` — and half-hour chunks carry a ``topic`` beside
their ``summary``. The console shows everything; a prompt for person P shows P's own sections in
full and other people's as runtime config ``memory.temporal_summary.cross_person`` says:
``topics`` (their topic lines, the default), ``full`` (their text) or ``none`` (nothing).

A topic line is a few general themes of a closed vocabulary (``temporal.themes``: work, health,
family, … / 工作、健康、家庭 …), stored as their keys and rendered in the viewer's language. Whoever
proposed it (the offline provider or a model), only vocabulary names in it count: a model's line
naming none is mapped by the same keyword rules, then the themes of the source decide. No word of
what was said is ever copied, so no contact detail, number, name or quotation can pass.
"""

from __future__ import annotations

from collections.abc import Iterable

from anima.core.config import config_get
from temporal.themes import GENERAL, VOCABULARY, themes_named, themes_of, themes_render

TOPICS, FULL, NONE = "topics", "full", "none"

TOPIC_RULE = (
    "one to three general themes, comma-separated, each exactly one of these words: "
    f"{', '.join(VOCABULARY)} — nothing else (no name, place, detail, number or quotation)"
)


def topic_of(source: str) -> str:
    """The topic line of ``source`` by the keyword rules, as stored (its theme keys)."""
    return themes_render(themes_of(source) or [GENERAL.key], chinese=False)


def topic_line(candidate: str, *, source: str) -> str:
    """A proposed topic line as stored: the themes it names, else those the rules find in it, else ``source``'s."""
    keys = themes_named(candidate or "") or themes_of(candidate or "")
    return themes_render(keys, chinese=False) if keys else topic_of(source)


def topic_shown(topic: str, *, fallback: str, chinese: bool, script: str = "") -> str:
    """A stored topic line in the viewer's language (Chinese in ``script``'s characters); one written before the
    vocabulary (a line of keywords) gives way to the themes of ``fallback``, the text it stood for."""
    keys = themes_named(topic or "") or themes_of(fallback or "") or [GENERAL.key]
    return themes_render(keys, chinese=chinese, script=script)


def cross_person_mode() -> str:
    return config_get(section="memory.temporal_summary")["cross_person"]


def section_header(section: dict) -> str:
    parts = [section.get("who") or "", f"({section['channel']})" if section.get("channel") else ""]
    parts.append(f"“{section['title']}”" if section.get("title") else "")
    return " ".join(part for part in parts if part)


def section_for(
    section: dict, *, viewer_ids: frozenset[int] | None, mode: str, chinese: bool, script: str = ""
) -> dict | None:
    """A section as a viewer may see it: whole when its own (or ``full``), else its topic line in the viewer's
    language (``chinese``, in ``script``'s characters), else None.

    ``viewer_ids`` None is the console, which sees everything; otherwise the persons whose
    sections are the viewer's own (empty for a conversation whose human is unknown).
    """
    if viewer_ids is None or section.get("person_id") in viewer_ids or mode == FULL:
        return section
    if mode == TOPICS:
        fallback = section.get("text") or ""
        topic = topic_shown(section.get("topic") or "", fallback=fallback, chinese=chinese, script=script)
        return {"who": section.get("who") or "", "topic": topic}
    return None


def sections_for(
    sections: Iterable[dict], *, viewer_ids: frozenset[int] | None, mode: str, chinese: bool, script: str = ""
) -> list[dict]:
    visible = (
        section_for(section, viewer_ids=viewer_ids, mode=mode, chinese=chinese, script=script) for section in sections
    )
    return [section for section in visible if section is not None]


def section_render(section: dict) -> str:
    """One visible section as a line: its header and text, or who and the topic."""
    if "text" in section:
        header = section_header(section)
        return f"{header}: {section['text']}" if header else section["text"]
    return f"{section['who']}: {section['topic']}" if section.get("who") else section["topic"]


def sections_render(
    sections: Iterable[dict], *, viewer_ids: frozenset[int] | None, mode: str, chinese: bool, script: str = ""
) -> list[str]:
    visible = sections_for(sections, viewer_ids=viewer_ids, mode=mode, chinese=chinese, script=script)
    return [section_render(section) for section in visible]


def summary_sections(*, body: dict, content: str) -> list[dict]:
    """The sections of a stored summary; one written before sections existed is one section of nobody's."""
    sections = body.get("sections")
    if isinstance(sections, list):
        return sections
    return [{"conversation_id": None, "person_id": None, "topic": topic_of(content), "text": content}]


def chunk_topic(chunk: dict, *, chinese: bool, script: str = "") -> str:
    """A half-hour chunk as other people see it: who and its topic line, in the viewer's language (and
    ``script``'s characters)."""
    fallback = chunk.get("summary") or ""
    topic = topic_shown(chunk.get("topic") or "", fallback=fallback, chinese=chinese, script=script)
    return f"{chunk['who']}: {topic}" if chunk.get("who") else topic
