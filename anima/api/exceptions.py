"""Every client error is a JSON 4xx whose body names the field; nothing a client sends becomes a 500."""

from __future__ import annotations

import sys

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError, IntegrityError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.views import exception_handler as drf_exception_handler

from anima.core.api.parsers import PayloadTooLarge
from anima.core.db import database_unreachable
from anima.core.errors import AccessDenied, AnimaError, Unavailable


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


class ServiceUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "unavailable"


DATABASE_UNAVAILABLE = "database unavailable"


def exception_handler(exc, context):
    exc = _as_api_exception(exc)
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(response.data, list):
        # A bare ValidationError("…") names no field: file it under non_field_errors like a serializer does.
        response.data = {"non_field_errors": response.data}
    return response


def _as_api_exception(exc):
    if isinstance(exc, DjangoValidationError):
        if hasattr(exc, "error_dict"):
            return exceptions.ValidationError(exc.message_dict)
        return exceptions.ValidationError({"non_field_errors": exc.messages})
    if isinstance(exc, AccessDenied):
        return exceptions.PermissionDenied(str(exc))
    if isinstance(exc, AnimaError):
        return exceptions.ValidationError({exc.field: [str(exc)]})
    if isinstance(exc, Unavailable):
        return ServiceUnavailable(str(exc))
    if isinstance(exc, DatabaseError) and database_unreachable(exc):
        return ServiceUnavailable(DATABASE_UNAVAILABLE)
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
    if isinstance(exc, IntegrityError):
        # A unique row written concurrently between validation and insert.
        return Conflict(str(exc).splitlines()[0])
    if isinstance(exc, exceptions.ParseError):
        # Malformed JSON: the field at fault is the body itself.
        return exceptions.ValidationError({"body": [str(exc.detail)]})
    return exc


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: an unreachable database is a 503 JSON answer on every path (the admin and health
    checks too, whose errors never pass the API's handler); anything else is Django's 500 page."""
    exc = sys.exc_info()[1]
    if exc is not None and database_unreachable(exc):
        return JsonResponse({"detail": DATABASE_UNAVAILABLE}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
    return defaults.server_error(request)
