"""Application errors: bad input a caller can fix (a 400 naming the field), a refusal (a 403 naming why),
and a service that cannot answer now (a 503 with the message).

The API's exception handler knows only these classes, so it imports no app.
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


class Unavailable(Exception):
    """A dependency (the database, a search that ran out of time) cannot answer now; retrying later may help."""
