"""JSON bodies with a size limit and no NUL characters or lone surrogates (PostgreSQL cannot store them)."""

from __future__ import annotations

import io
import re
from typing import Any

from django.conf import settings
from rest_framework import exceptions, status
from rest_framework.parsers import JSONParser


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"

    def __init__(self, limit: int) -> None:
        super().__init__(f"Request body larger than {limit} bytes (ANIMA_MAX_BODY_BYTES).")


# JSON may escape a NUL (\u0000) or half a surrogate pair (\ud800); neither can be stored as UTF-8 text.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def nul_paths(value: Any, path: str = "") -> list[str]:
    """Paths (``items.2.title``) of every key or string holding a NUL character or a lone surrogate."""
    if isinstance(value, str):
        return [path or "body"] if _UNSTORABLE.search(value) else []
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            # The path names the field in the error body, which must itself be encodable.
            label = _UNSTORABLE.sub("\ufffd", str(key))
            child = f"{path}.{label}" if path else label
            if _UNSTORABLE.search(str(key)):
                found.append(child)
            found.extend(nul_paths(item, child))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(nul_paths(item, f"{path}.{index}" if path else str(index)))
    return found


def nul_refuse(value: Any) -> None:
    paths = nul_paths(value)
    if paths:
        raise exceptions.ValidationError(
            {path: ["NUL characters and lone surrogates are not allowed."] for path in paths}
        )


class LimitedJSONParser(JSONParser):
    """DRF's JSON parser, refusing bodies over DATA_UPLOAD_MAX_MEMORY_SIZE and strings with NUL."""

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        request = (parser_context or {}).get("request")
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        if limit is not None and declared and declared.isdigit() and int(declared) > limit:
            raise PayloadTooLarge(limit)
        # Read one byte past the limit: a body without (or lying about) Content-Length is caught too.
        raw = stream.read(limit + 1) if limit is not None else stream.read()
        if limit is not None and len(raw) > limit:
            raise PayloadTooLarge(limit)
        data = super().parse(io.BytesIO(raw), media_type, parser_context)
        nul_refuse(data)
        return data
