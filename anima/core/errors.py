"""The one application-error base: every error a caller can fix carries its message and the field at fault.

The API's exception handler knows only this class (a 400 naming ``field``), so it imports no app.
"""

from __future__ import annotations


class AnimaError(ValueError):
    """Bad input that the caller can correct; ``field`` names what to correct ("" when it is the whole request)."""

    default_field = "non_field_errors"

    def __init__(self, message: str, *, field: str = "") -> None:
        self.field = field or self.default_field
        super().__init__(message)
