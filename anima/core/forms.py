"""Form fields shared by the console's forms and the API's query-string filters."""

from __future__ import annotations

import django_filters
from django import forms

from anima.core.calendar import DATE_RANGE_TEXT, MomentError, moment_check


class RangeDateField(forms.DateField):
    """A date within the accepted range (1900-01-01 … 2199-12-31)."""

    def clean(self, value):
        day = super().clean(value)
        if day is not None:
            try:
                moment_check(day, field="date")
            except MomentError:
                raise forms.ValidationError(f"must be {DATE_RANGE_TEXT}") from None
        return day


class RangeDateFilter(django_filters.DateFilter):
    """A date query parameter within the accepted range: outside it, a 400 naming the parameter."""

    field_class = RangeDateField
