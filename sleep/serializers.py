"""API representations of sleep-cycle runs and the request that triggers one."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from anima.core.api.serializers import BoundedDateField, StrictSerializer
from sleep.cycle import SLEEP_CYCLE
from sleep.models import DeepSleepMode, PipelineRun, PipelineStepRun
from sleep.selectors import sleep_run_failures


class PipelineStepRunSerializer(serializers.ModelSerializer):
    duration_seconds = serializers.FloatField(read_only=True, allow_null=True)

    class Meta:
        model = PipelineStepRun
        fields = ["id", "step", "status", "attempt", "output", "error", "started_at", "finished_at", "duration_seconds"]
        read_only_fields = fields


class RunFailureSerializer(serializers.Serializer):
    step = serializers.CharField()
    error = serializers.CharField()
    conversation_id = serializers.IntegerField(required=False, help_text="The conversation light sleep failed for.")
    day = serializers.DateField(required=False, help_text="Its local day (a retry may be of an earlier day).")
    stage = serializers.CharField(required=False, help_text="semantic, limbic, narrative or outline.")


class PipelineRunSerializer(serializers.ModelSerializer):
    steps = PipelineStepRunSerializer(many=True, read_only=True)
    failures = serializers.SerializerMethodField(
        help_text="What the run left undone: failed steps, and the conversations of a partial step, with why."
    )

    class Meta:
        model = PipelineRun
        fields = [
            "id",
            "pipeline",
            "day",
            "trigger",
            "mode",
            "status",
            "options",
            "error",
            "started_at",
            "finished_at",
            "failures",
            "steps",
        ]
        read_only_fields = fields

    @extend_schema_field(RunFailureSerializer(many=True))
    def get_failures(self, run: PipelineRun) -> list[dict]:
        return sleep_run_failures(run=run)


class SleepTriggerSerializer(StrictSerializer):
    day = BoundedDateField(
        required=False, allow_null=True, default=None, help_text="Local day to sleep (default: yesterday)."
    )
    step = serializers.ChoiceField(
        choices=[step.name for step in SLEEP_CYCLE.steps],
        required=False,
        allow_null=True,
        default=None,
        help_text="Run only this step (default: the whole cycle).",
    )
    force = serializers.BooleanField(default=False, help_text="Skip dependency checks; may change locked blocks.")
    mode = serializers.ChoiceField(
        choices=DeepSleepMode.choices, required=False, allow_null=True, default=None, help_text="Deep-sleep mode."
    )
