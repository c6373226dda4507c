"""API views for temporal summaries (read-only: the sleep cycle writes them), as the caller may see them."""

from __future__ import annotations

import django_filters
from rest_framework import mixins

from anima.core.api.views import ApiViewSet
from anima.core.forms import RangeDateFilter
from conversations.access import SCOPED, access_of
from temporal.models import TemporalSummary, Window
from temporal.privacy import cross_person_mode
from temporal.serializers import TemporalSummarySerializer


class TemporalSummaryFilter(django_filters.FilterSet):
    window = django_filters.ChoiceFilter(choices=Window.choices, field_name="body__window")
    since = RangeDateFilter(field_name="source_day", lookup_expr="gte")
    until = RangeDateFilter(field_name="source_day", lookup_expr="lte")

    class Meta:
        model = TemporalSummary
        fields = ["window", "since", "until"]


class TemporalSummaryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ApiViewSet):
    queryset = TemporalSummary.objects.order_by("-source_day", "id")
    serializer_class = TemporalSummarySerializer
    filterset_class = TemporalSummaryFilter
    lookup_value_regex = r"\d{1,18}"
    access_scopes = SCOPED

    def get_serializer_context(self) -> dict:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no caller
            return super().get_serializer_context()
        # A scoped token reads its persons' sections in full and other people's as the prompts do.
        access = access_of(self.request)
        return {
            **super().get_serializer_context(),
            "viewer_ids": access.person_ids,
            "cross_person": cross_person_mode(),
        }
