"""API views for the sleep cycle: run history with step outputs, and manual triggers (staff only)."""

from __future__ import annotations

import django_filters
from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.permissions import IsAdminUser, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from anima.core.api.views import ApiViewSet
from anima.core.forms import RangeDateFilter
from sleep.cycle import SLEEP_CYCLE
from sleep.models import PipelineRun, RunStatus, RunTrigger
from sleep.pipeline import PipelineBusy, PipelineError
from sleep.serializers import PipelineRunSerializer, SleepTriggerSerializer
from sleep.services import sleep_cycle_run
from sleep.tasks import sleep_cycle_enqueue


class SleepBusy(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "busy"


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

    def get_permissions(self):
        if self.action == "create":
            return [IsAdminUser()]
        return [IsAuthenticated()]

    @extend_schema(
        request=SleepTriggerSerializer,
        responses={
            201: PipelineRunSerializer,
            202: inline_serializer("SleepQueued", {"queued": serializers.BooleanField()}),
            409: OpenApiResponse(description="Another sleep cycle is running"),
        },
    )
    def create(self, request: Request) -> Response:
        """Run the cycle, or one step, for a day: on the Celery worker when a broker is set (202), else now (201)."""
        data = SleepTriggerSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        if settings.CELERY_BROKER_URL:
            sleep_cycle_enqueue(**data.validated_data)
            return Response({"queued": True, **data.data}, status=status.HTTP_202_ACCEPTED)
        try:
            run = sleep_cycle_run(**data.validated_data, trigger=RunTrigger.MANUAL)
        except PipelineBusy as exc:
            raise SleepBusy(str(exc)) from None
        except PipelineError as exc:
            raise ValidationError({"step": [str(exc)]}) from None
        run = PipelineRun.objects.prefetch_related("steps").get(pk=run.pk)
        return Response(PipelineRunSerializer(run).data, status=status.HTTP_201_CREATED)

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
