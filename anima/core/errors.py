"""The application-error bases: an error a caller can fix carries its message and the field at fault; a
service that cannot answer now says so.

The API's exception handler knows only these classes (a 400 naming ``field``, a 503 with the message),
so it imports no app.
"""

from __future__ import annotations


class AnimaError(ValueError):
    """Bad input that the caller can correct; ``field`` names what to correct ("" when it is the whole request)."""

    default_field = "non_field_errors"

    def __init__(self, message: str, *, field: str = "") -> None:
        self.field = field or self.default_field
        super().__init__(message)


class Unavailable(Exception):
    """A dependency (the database, a search that ran out of time) cannot answer now; retrying later may help."""
