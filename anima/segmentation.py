"""Word segmentation for full-text search (jieba), run synchronously before every write.

PostgreSQL's parser sees an unsegmented Chinese sentence as one long word, so the
text indexed (``fts_segmented``) is jieba's output joined by spaces. English and
other space-delimited text passes through; the ``english`` text-search config
stems it inside the database.
"""

from __future__ import annotations

import logging
import threading

import jieba

logger = logging.getLogger(__name__)

jieba.setLogLevel(logging.WARNING)
_init_lock = threading.Lock()
_initialized = False


def _ensure_dictionary() -> None:
    # jieba loads its ~5 MB dictionary lazily; do it once per process, under a lock, not per call.
    global _initialized
    if _initialized:
        return
    with _init_lock:
        if not _initialized:
            jieba.initialize()
            _initialized = True


def segment_text(text: str | None) -> str | None:
    """Return ``text`` as space-separated search tokens, or None if segmentation fails.

    A failure must never stop the row from being written: the caller stores NULL
    and the row simply is not found by full-text search until re-segmented.
    """
    if text is None:
        return None
    try:
        _ensure_dictionary()
        tokens = (token.strip() for token in jieba.cut_for_search(text))
        return " ".join(token for token in tokens if token)
    except Exception:
        logger.warning("segmentation failed; storing NULL fts_segmented", exc_info=True)
        return None
