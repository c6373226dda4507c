"""API representation of day / month / year summaries, as the caller may see them."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from anima.core.text import is_chinese
from temporal.models import TemporalSummary
from temporal.privacy import sections_for, sections_render, summary_sections


class TemporalSummarySerializer(serializers.ModelSerializer):
    """``context["viewer_ids"]``: the persons whose sections the caller reads in full (None: all of them);
    other people's sections follow ``context["cross_person"]``."""

    window = serializers.SerializerMethodField()
    period_start = serializers.DateField(source="source_day", read_only=True)
    content = serializers.SerializerMethodField()
    sections = serializers.SerializerMethodField()

    class Meta:
        model = TemporalSummary
        fields = ["id", "window", "period_start", "content", "sections", "created_at", "updated_at"]
        read_only_fields = fields

    def get_window(self, summary: TemporalSummary) -> str:
        return summary.body.get("window", "")

    def _visible(self, summary: TemporalSummary) -> list[dict]:
        # No conversation to take a language from: other people's topics follow the summary's own language.
        return sections_for(
            summary_sections(body=summary.body, content=summary.content),
            viewer_ids=self.context.get("viewer_ids"),
            mode=self.context.get("cross_person", ""),
            chinese=is_chinese(summary.content),
        )

    def get_content(self, summary: TemporalSummary) -> str:
        if self.context.get("viewer_ids") is None:
            return summary.content
        lines = sections_render(self._visible(summary), viewer_ids=None, mode="", chinese=False)
        return "\n".join(f"- {line}" for line in lines)

    @extend_schema_field(serializers.ListField(child=serializers.DictField()))
    def get_sections(self, summary: TemporalSummary) -> list[dict]:
        return self._visible(summary)
