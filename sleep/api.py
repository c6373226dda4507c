"""API views for the sleep cycle (operators only): run history with step outputs, and manual requests."""

from __future__ import annotations

import django_filters
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from anima.core.api.views import ApiViewSet
from anima.core.forms import RangeDateFilter
from sleep.cycle import SLEEP_CYCLE
from sleep.models import PipelineRun, RunStatus, RunTrigger
from sleep.pipeline import PipelineBusy, PipelineError
from sleep.serializers import PipelineRunSerializer, SleepTriggerSerializer
from sleep.services import sleep_cycle_request, sleep_runs_reap
from sleep.tasks import sleep_run_dispatch


class PipelineRunFilter(django_filters.FilterSet):
    day = RangeDateFilter()
    status = django_filters.ChoiceFilter(choices=RunStatus.choices)
    trigger = django_filters.ChoiceFilter(choices=RunTrigger.choices)

    class Meta:
        model = PipelineRun
        fields = ["day", "status", "trigger"]


class SleepRunViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ApiViewSet):
    queryset = PipelineRun.objects.prefetch_related("steps").order_by("-started_at", "-id")
    serializer_class = PipelineRunSerializer
    filterset_class = PipelineRunFilter
    lookup_value_regex = r"\d{1,18}"

    def list(self, request: Request, *args, **kwargs) -> Response:
        sleep_runs_reap()  # a run whose process died is shown failed, never "running"
        return super().list(request, *args, **kwargs)

    def retrieve(self, request: Request, *args, **kwargs) -> Response:
        sleep_runs_reap()
        return super().retrieve(request, *args, **kwargs)

    @extend_schema(
        request=SleepTriggerSerializer,
        responses={
            202: PipelineRunSerializer,
            409: inline_serializer(
                "SleepBusy", {"detail": serializers.CharField(), "run_id": serializers.IntegerField(allow_null=True)}
            ),
        },
    )
    def create(self, request: Request) -> Response:
        """Request the cycle, or one step, for a day (202 with the queued run; follow it at its URL).

        A worker carries it out when a broker is configured, else a background thread of this
        server. While another run is queued or running the answer is 409 naming it.
        """
        data = SleepTriggerSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            run = sleep_cycle_request(**data.validated_data)
        except PipelineBusy as exc:
            return Response({"detail": str(exc), "run_id": exc.run_id}, status=status.HTTP_409_CONFLICT)
        except PipelineError as exc:
            raise ValidationError({"step": [str(exc)]}) from None
        sleep_run_dispatch(run)
        return Response(PipelineRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        responses={
            200: inline_serializer(
                "SleepStep", {"name": serializers.CharField(), "depends_on": serializers.ListField()}, many=True
            )
        }
    )
    @action(detail=False, methods=["get"], pagination_class=None, filterset_class=None)
    def steps(self, request: Request) -> Response:
        """The steps of the sleep-cycle DAG and what each depends on."""
        return Response([{"name": step.name, "depends_on": list(step.depends_on)} for step in SLEEP_CYCLE.steps])
