"""Base view classes of every app's API."""

from __future__ import annotations

from django.db import transaction
from rest_framework import exceptions, generics, serializers, viewsets
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from anima.core.jsonvalue import unstorable_paths


class ApiMixin:
    """Query strings are checked like bodies: a NUL character, or a parameter the endpoint does not take
    (a typo would otherwise be ignored and answer with everything), is a 400 naming the parameter.

    A GET takes its filters, its pagination, ``format`` and the fields of its ``query_serializer``.
    """

    query_serializer: type[serializers.Serializer] | None = None

    def initial(self, request: Request, *args, **kwargs) -> None:
        super().initial(request, *args, **kwargs)
        bad = [key for key, values in request.query_params.lists() if unstorable_paths([key, *values])]
        if bad:
            raise exceptions.ValidationError({key: ["NUL characters are not allowed."] for key in bad})
        if request.method in ("GET", "HEAD"):
            accepted = self.query_params_accepted()
            unknown = sorted(set(request.query_params) - accepted)
            if unknown:
                known = ", ".join(sorted(accepted))
                raise exceptions.ValidationError(
                    {key: [f"Unknown query parameter; this endpoint takes {known}."] for key in unknown}
                )

    def query_params_accepted(self) -> set[str]:
        accepted = {api_settings.URL_FORMAT_OVERRIDE}
        if self.query_serializer is not None:
            accepted |= set(self.query_serializer().fields)
        filterset = getattr(self, "filterset_class", None)
        if filterset is not None:
            accepted |= set(filterset.base_filters)
        paginator = getattr(self, "paginator", None)
        if paginator is not None:
            accepted |= {paginator.page_query_param, paginator.page_size_query_param}
        return accepted - {None}


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
