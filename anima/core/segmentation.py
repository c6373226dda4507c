"""Word segmentation for full-text search (jieba), run synchronously before every write.

PostgreSQL's parser sees an unsegmented Chinese sentence as one long word, so the
text indexed (``fts_segmented``) is jieba's output joined by spaces. English and
other space-delimited text passes through; the ``english`` text-search config
stems it inside the database.
"""

from __future__ import annotations

import importlib
import logging
import re
import threading

import jieba

logger = logging.getLogger(__name__)

jieba.setLogLevel(logging.WARNING)
_init_lock = threading.Lock()
# Runs of non-ASCII text go through jieba; ASCII words (emails, URLs, versions, code) stay whole.
_RUNS = re.compile(r"[\x00-\x7f]+|[^\x00-\x7f]+")
_initialized = False


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
            jieba.initialize()
            _initialized = True


def word_tags(text: str) -> list[tuple[str, str]]:
    """``text``'s words with jieba's part-of-speech tags ("a…" adjectives, "m" numerals, "q" measure words…)."""
    return [(pair.word, pair.flag) for pair in importlib.import_module("jieba.posseg").cut(text)]


def segment_text(text: str | None) -> str | None:
    """Return ``text`` as space-separated search tokens, or None if segmentation fails.

    A failure must never stop the row from being written: the caller stores NULL
    and the row simply is not found by full-text search until re-segmented.
    """
    if text is None:
        return None
    try:
        tokens: list[str] = []
        for run in _RUNS.findall(text):
            if run.isascii():
                tokens.extend(run.split())
            else:
                segmentation_load()
                tokens.extend(token for token in (t.strip() for t in jieba.cut_for_search(run)) if token)
        return " ".join(tokens)
    except Exception:
        logger.warning("segmentation failed; storing NULL fts_segmented", exc_info=True)
        return None
