"""Signals of this app, for the layers above it (which may react; this app never imports them)."""

from __future__ import annotations

from django.dispatch import Signal

# Sent inside the storing transaction with ``messages``: the Message objects just stored (rows
# written by COPY have no ``pk`` on the object; ``conversation_id`` and ``external_id`` find them).
messages_stored = Signal()
