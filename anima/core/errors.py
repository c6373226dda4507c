"""Application errors: bad input a caller can fix (a 400 naming the field), and a refusal (a 403 naming why).

The API's exception handler knows only these two classes, so it imports no app.
"""

from __future__ import annotations


class AnimaError(ValueError):
    """Bad input that the caller can correct; ``field`` names what to correct ("" when it is the whole request)."""

    default_field = "non_field_errors"

    def __init__(self, message: str, *, field: str = "") -> None:
        self.field = field or self.default_field
        super().__init__(message)


class AccessDenied(Exception):
    """The caller reaches outside what its token may see or do (HTTP 403); the message says why."""
