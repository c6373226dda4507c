"""Serializer base classes shared by every app's API."""

from __future__ import annotations

from collections.abc import Mapping

from rest_framework import serializers

from anima.core.calendar import MomentError, moment_check, moment_parse


class StrictFieldsMixin:
    """Refuse unknown (and read-only) fields instead of silently dropping them."""

    def to_internal_value(self, data):
        if isinstance(data, Mapping):
            writable = {name for name, field in self.fields.items() if not field.read_only}
            unknown = sorted(str(key) for key in data if key not in writable)
            if unknown:
                raise serializers.ValidationError({name: ["Unknown or read-only field."] for name in unknown})
        return super().to_internal_value(data)


class StrictSerializer(StrictFieldsMixin, serializers.Serializer):
    pass


class StrictModelSerializer(StrictFieldsMixin, serializers.ModelSerializer):
    pass


class MomentField(serializers.CharField):
    """An ISO date (the whole local day) or datetime, as the recall surfaces take them."""

    def to_internal_value(self, data):
        text = super().to_internal_value(data)
        try:
            return moment_parse(text, field=self.field_name)
        except MomentError as exc:
            raise serializers.ValidationError(str(exc)) from None


def _range_check(value, field_name: str) -> None:
    try:
        moment_check(value, field=field_name)
    except MomentError as exc:
        raise serializers.ValidationError(f"{exc}.") from None


class BoundedDateTimeField(serializers.DateTimeField):
    """A datetime within the accepted range: far-off ones would overflow in time-zone and day arithmetic."""

    def to_internal_value(self, value):
        try:
            parsed = super().to_internal_value(value)
        except OverflowError:
            raise serializers.ValidationError("Datetime out of range.") from None
        _range_check(parsed, self.field_name)
        return parsed


class BoundedDateField(serializers.DateField):
    def to_internal_value(self, value):
        parsed = super().to_internal_value(value)
        _range_check(parsed, self.field_name)
        return parsed
