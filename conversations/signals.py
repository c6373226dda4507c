"""Signals of this app, for the layers above it (which may react; this app never imports them)."""

from __future__ import annotations

from django.dispatch import Signal

# Sent inside the storing transaction with ``messages``: the Message objects just inserted, with
# their ``pk`` (never one that was already stored, e.g. skipped by a re-import).
messages_stored = Signal()
