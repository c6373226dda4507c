"""Project-level API views: the agent tools and the runtime config."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
    inline_serializer,
)
from drf_spectacular.views import SpectacularSwaggerView
from rest_framework import exceptions, serializers, status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from anima.agent.tools import TOOLS, UnknownTool, tool_call, tool_schemas
from anima.core.api.views import ApiView, ApiViewSet
from anima.core.config import SCHEMA, config_get, config_update
from anima.core.db import row_id_parse
from conversations.access import AGENT, OPERATOR, access_of
from conversations.models import Conversation


class DocsView(SpectacularSwaggerView):
    """The Swagger UI page; a client asking for JSON (or failing authentication) gets its errors as JSON."""

    renderer_classes = [*SpectacularSwaggerView.renderer_classes, JSONRenderer]


_TOOL_SCHEMA = inline_serializer(
    "ToolSchema", {"type": serializers.CharField(), "function": serializers.DictField()}, many=True
)


class ToolListQuerySerializer(serializers.Serializer):
    conversation = serializers.IntegerField(
        required=False, help_text="The conversation of the turn: tools that turn may not use are left out."
    )


class ToolListView(ApiView):
    access_scopes = (OPERATOR, AGENT)
    query_serializer = ToolListQuerySerializer

    @extend_schema(
        parameters=[ToolListQuerySerializer],
        responses={200: _TOOL_SCHEMA},
        operation_id="tools_list",
    )
    def get(self, request: Request) -> Response:
        """OpenAI function-calling schemas of the agent tools (for one conversation's turn, when given)."""
        raw = request.query_params.get("conversation")
        if raw is None:
            return Response(tool_schemas())
        row_id = row_id_parse(raw)
        # One the caller cannot see is answered like one that does not exist.
        visible = access_of(request).conversations(Conversation.objects.filter(pk=row_id))
        conversation = visible.first() if row_id is not None else None
        if conversation is None:
            raise exceptions.NotFound(f"no conversation {raw}")
        return Response(tool_schemas(conversation=conversation))


class ToolCallView(ApiView):
    access_scopes = (OPERATOR, AGENT)

    @extend_schema(
        parameters=[OpenApiParameter("name", str, OpenApiParameter.PATH, enum=[tool.name for tool in TOOLS])],
        request={"application/json": {"type": "object", "additionalProperties": True}},
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiResponse(description="Invalid arguments"), 404: None},
        operation_id="tools_call",
    )
    def post(self, request: Request, name: str) -> Response:
        """Execute one tool call; the body is the call's JSON arguments, validated against the tool's schema."""
        try:
            return Response(tool_call(name=name, arguments=request.data, access=access_of(request)))
        except UnknownTool as exc:
            raise exceptions.NotFound(str(exc)) from None


_SECTION_PATTERN = "|".join(section.replace(".", r"\.") for section in SCHEMA)


_SECTION = OpenApiParameter("section", str, OpenApiParameter.PATH, enum=list(SCHEMA))


@extend_schema_view(retrieve=extend_schema(parameters=[_SECTION]), partial_update=extend_schema(parameters=[_SECTION]))
class ConfigViewSet(ApiViewSet):
    """Runtime config (operators only): effective values per section; changes are validated whole."""

    lookup_field = "section"
    lookup_value_regex = _SECTION_PATTERN
    pagination_class = None

    @extend_schema(responses={200: OpenApiTypes.OBJECT}, operation_id="config_list")
    def list(self, request: Request) -> Response:
        return Response({section: config_get(section=section) for section in SCHEMA})

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def retrieve(self, request: Request, section: str) -> Response:
        return Response(config_get(section=section))

    @extend_schema(
        request={"application/json": {"type": "object", "additionalProperties": True}},
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiResponse(description="Invalid values")},
    )
    def partial_update(self, request: Request, section: str) -> Response:
        if not isinstance(request.data, dict):
            raise exceptions.ValidationError({"body": ["Expected a JSON object of settings."]})
        values = config_update(section=section, values=request.data, changed_by=request.user.get_username())
        return Response(values, status=status.HTTP_200_OK)
