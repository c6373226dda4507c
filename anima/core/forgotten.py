"""Fingerprints of what a forget took: how an import knows a fact or person was forgotten without the text.

A fingerprint is the SHA-256 of a kind and a normalized form (``same_content_key`` for texts, the slug for a
person, channel and id for an account): an import compares the fingerprints of what it reads with the
tombstones'. A hash reveals nothing by itself, though it confirms a guess of the exact fact.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from anima.core.models import ForgetTombstone
from anima.core.text import same_content_key

MEMORY, HISTORY, PERSON, IDENTITY = "memory", "history", "person", "identity"


def forgotten_fingerprint(*, kind: str, text: str) -> str:
    """The fingerprint of ``text`` (a memory or history text, a person's slug, ``channel\\0id``) as ``kind``."""
    key = same_content_key(text) if kind in (MEMORY, HISTORY) else text
    return hashlib.sha256(f"{kind}\0{key}".encode()).hexdigest()


def forgotten_account(*, channel: str, external_id: str) -> str:
    """A channel account as the text of its ``IDENTITY`` fingerprint."""
    return f"{channel}\0{external_id}"


def forgotten_excerpt(text: str, *, limit: int = 60) -> str:
    """What a warning calls a skipped text: its start on one line, quoted (it is the importer's own file)."""
    line = " ".join(text.split())
    return repr(line if len(line) <= limit else line[: limit - 1] + "…")


def forgotten_among(*, fingerprints: Iterable[str]) -> set[str]:
    """Those of ``fingerprints`` a finished forget recorded."""
    wanted = set(fingerprints)
    if not wanted:
        return set()
    recorded = ForgetTombstone.objects.filter(finished_at__isnull=False, fingerprints__overlap=list(wanted))
    return wanted.intersection(fp for row in recorded.values_list("fingerprints", flat=True) for fp in row)
