"""Base view classes of every app's API."""

from __future__ import annotations

from django.db import transaction
from rest_framework import exceptions, generics, viewsets
from rest_framework.request import Request
from rest_framework.views import APIView

from anima.core.jsonvalue import unstorable_paths


class ApiMixin:
    """Query strings are checked like bodies: a NUL character is a 400 naming the parameter."""

    def initial(self, request: Request, *args, **kwargs) -> None:
        super().initial(request, *args, **kwargs)
        bad = [key for key, values in request.query_params.lists() if unstorable_paths([key, *values])]
        if bad:
            raise exceptions.ValidationError({key: ["NUL characters are not allowed."] for key in bad})


class AtomicWritesMixin:
    """Model writes in a savepoint, so a unique-key race (409) leaves the connection usable."""

    def perform_create(self, serializer) -> None:
        with transaction.atomic():
            super().perform_create(serializer)

    def perform_update(self, serializer) -> None:
        with transaction.atomic():
            super().perform_update(serializer)


class ApiView(ApiMixin, APIView):
    pass


class ApiGenericView(ApiMixin, generics.GenericAPIView):
    pass


class ApiViewSet(ApiMixin, viewsets.GenericViewSet):
    pass
