"""API views for global temporal summaries (read-only: the sleep cycle writes them)."""

from __future__ import annotations

import django_filters
from rest_framework import mixins

from anima.core.api.views import ApiViewSet
from anima.core.forms import RangeDateFilter
from temporal.models import TemporalSummary, Window
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
