"""API representation of global day / month / year summaries."""

from __future__ import annotations

from rest_framework import serializers

from temporal.models import TemporalSummary


class TemporalSummarySerializer(serializers.ModelSerializer):
    window = serializers.SerializerMethodField()
    period_start = serializers.DateField(source="source_day", read_only=True)

    class Meta:
        model = TemporalSummary
        fields = ["id", "window", "period_start", "content", "created_at", "updated_at"]
        read_only_fields = fields

    def get_window(self, summary: TemporalSummary) -> str:
        return summary.body.get("window", "")
