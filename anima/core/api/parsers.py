"""JSON bodies with a size limit and no NUL characters or lone surrogates (PostgreSQL cannot store them)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import exceptions, status
from rest_framework.parsers import JSONParser
from rest_framework.utils import json

from anima.core.jsonvalue import JsonValueError, json_loads, unstorable_paths


class PayloadTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"

    def __init__(self, limit: int) -> None:
        super().__init__(f"Request body larger than {limit} bytes (ANIMA_MAX_BODY_BYTES).")


def nul_refuse(value: Any) -> None:
    paths = unstorable_paths(value)
    if paths:
        raise exceptions.ValidationError(
            {path: ["NUL characters and lone surrogates are not allowed."] for path in paths}
        )


class LimitedJSONParser(JSONParser):
    """DRF's JSON parser, refusing bodies over DATA_UPLOAD_MAX_MEMORY_SIZE, deep nesting and unstorable strings."""

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
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            data = json_loads(
                raw.decode(encoding), where="body", parse_constant=json.strict_constant if self.strict else None
            )
        except JsonValueError as exc:
            raise exceptions.ValidationError({exc.field: [str(exc)]}) from None
        except ValueError as exc:  # malformed JSON or not in the declared encoding
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None
        nul_refuse(data)
        return data
