"""The agent endpoints: turn assembly (``POST /api/conversations/{id}/prepare-turn/``) and the
OpenAI-compatible memory proxy (``POST /v1/chat/completions``, ``GET /v1/models``)."""

from __future__ import annotations

from django.conf import settings
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import exceptions, serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from anima.agent.proxy import UpstreamError, proxy_complete, proxy_models, proxy_stream, proxy_turn
from anima.agent.turn import prepare_turn
from anima.api.exceptions import exception_handler
from anima.core.api.serializers import StrictSerializer
from anima.core.api.views import ApiGenericView, ApiView
from conversations.access import AGENT, CONVERSATION_HEADER, OPERATOR, PERSON_HEADER, access_for_user, access_of
from conversations.models import Conversation


class PrepareTurnSerializer(StrictSerializer):
    message = serializers.CharField(
        max_length=100_000, trim_whitespace=False, help_text="The new user message (as `prepare_turn --message`)."
    )
    store = serializers.BooleanField(default=True, help_text="Store the user message (default true).")

    # The field's earlier name, still taken so existing clients keep working.
    OLD_NAME = "user_message"

    def to_internal_value(self, data):
        if isinstance(data, dict) and self.OLD_NAME in data:
            if "message" in data:
                refusal = "Give message only (user_message is its old name)."
                raise serializers.ValidationError({self.OLD_NAME: [refusal]})
            data = {"message" if key == self.OLD_NAME else key: value for key, value in data.items()}
        return super().to_internal_value(data)


class TurnMessageSerializer(serializers.Serializer):
    role = serializers.CharField()
    name = serializers.CharField(allow_blank=True)
    content = serializers.CharField(allow_blank=True)


class PrepareTurnView(ApiGenericView):
    queryset = Conversation.objects.select_related("person")
    serializer_class = PrepareTurnSerializer
    access_scopes = (OPERATOR, AGENT)

    def get_queryset(self):
        return access_of(self.request).conversations(super().get_queryset())

    @extend_schema(
        request=PrepareTurnSerializer,
        responses={200: inline_serializer("PreparedTurn", {"messages": TurnMessageSerializer(many=True)})},
        operation_id="conversations_prepare_turn_create",
        tags=["conversations"],
        examples=[
            OpenApiExample("A turn", value={"message": "How did the launch go?", "store": True}, request_only=True)
        ],
    )
    def post(self, request: Request, pk: str) -> Response:
        """The exact message list for the next LLM call (system prompt, timeline, passive recall, user message)."""
        conversation = self.get_object()
        data = PrepareTurnSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        messages = prepare_turn(
            conversation=conversation, user_message=data.validated_data["message"], store=data.validated_data["store"]
        )
        return Response({"messages": messages})


_ERROR_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    503: "unavailable",
}


def _openai_error(
    message: str, *, status: int, param: str | None = None, kind: str | None = None, headers: dict | None = None
) -> Response:
    error = {"message": message, "type": kind or _ERROR_TYPES.get(status, "invalid_request_error"), "param": param}
    return Response({"error": {**error, "code": None}}, status=status, headers=headers)


def openai_exception_handler(exc, context) -> Response | None:
    """The API's errors in the shape OpenAI clients read: ``{"error": {"message", "type", "param", "code"}}``."""
    if isinstance(exc, UpstreamError):
        return _openai_error(str(exc), status=exc.status, kind="upstream_error")
    response = exception_handler(exc, context)
    if response is None:
        return None
    # Retry-After (a 429) and WWW-Authenticate (a 401) tell the client what to do next: kept.
    headers = {name: response[name] for name in ("Retry-After", "WWW-Authenticate") if response.has_header(name)}
    if "detail" in response.data:
        return _openai_error(str(response.data["detail"]), status=response.status_code, headers=headers)
    param, messages = next(iter(response.data.items()))
    messages = messages if isinstance(messages, list) else [messages]
    return _openai_error(" ".join(str(m) for m in messages), status=response.status_code, param=param, headers=headers)


_OPENAI_ERROR = OpenApiResponse(
    inline_serializer(
        "OpenAiError",
        {
            "error": inline_serializer(
                "OpenAiErrorBody",
                {
                    "message": serializers.CharField(),
                    "type": serializers.CharField(),
                    "param": serializers.CharField(allow_null=True),
                    "code": serializers.CharField(allow_null=True),
                },
            )
        },
    ),
    description="An error in the shape OpenAI clients read; `param` names the field or header at fault.",
)
_PROXY_ERRORS = {
    400: _OPENAI_ERROR,
    401: _OPENAI_ERROR,
    403: _OPENAI_ERROR,
    429: _OPENAI_ERROR,
    503: OpenApiResponse(_OPENAI_ERROR.response, description="No chat model configured (the offline provider)."),
}


class ProxyModelSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField()
    created = serializers.IntegerField()
    owned_by = serializers.CharField()


class OpenAiView(ApiView):
    """The proxy's endpoints: errors in OpenAI's shape, scopes (operator or agent) checked by the proxy."""

    permission_classes = [IsAuthenticated]

    def get_exception_handler(self):
        return openai_exception_handler


class ModelsView(OpenAiView):
    @extend_schema(
        responses={
            200: inline_serializer(
                "ProxyModelList",
                {"object": serializers.CharField(), "data": ProxyModelSerializer(many=True)},
            ),
            **_PROXY_ERRORS,
        },
        operation_id="proxy_models_list",
        tags=["proxy"],
    )
    def get(self, request: Request) -> Response:
        """The models the proxy serves: the configured ``ANIMA_LLM_MODEL`` (every request goes to it, whatever
        model it names). 503 with the offline provider, like the chat completions."""
        return Response({"object": "list", "data": proxy_models(access=access_for_user(request.user))})


class ModelView(OpenAiView):
    @extend_schema(
        responses={200: ProxyModelSerializer, 404: _OPENAI_ERROR, **_PROXY_ERRORS},
        operation_id="proxy_models_retrieve",
        tags=["proxy"],
    )
    def get(self, request: Request, model: str) -> Response:
        """One model of ``GET /v1/models``; any other is a 404."""
        for served in proxy_models(access=access_for_user(request.user)):
            if served["id"] == model:
                return Response(served)
        raise exceptions.NotFound(f"no model {model!r}: this proxy serves {settings.ANIMA_LLM_MODEL!r}")


class ChatCompletionsView(OpenAiView):
    @extend_schema(
        request={
            "application/json": {
                "type": "object",
                "description": "An OpenAI chat-completion request; every parameter besides these is passed on.",
                "required": ["messages"],
                "properties": {
                    "model": {"type": "string", "description": "Ignored: the configured ANIMA_LLM_MODEL answers."},
                    "messages": {
                        "type": "array",
                        "items": {"type": "object", "additionalProperties": True},
                        "description": "The final user message is the new turn; earlier non-system messages are "
                        "the client's copy of history and are dropped (Anima keeps its own).",
                    },
                    "user": {"type": "string", "description": "A person slug: narrows like X-Anima-Person."},
                    "stream": {"type": "boolean", "description": "Server-sent events, passed through."},
                },
                "additionalProperties": True,
            }
        },
        parameters=[
            OpenApiParameter(
                PERSON_HEADER, str, OpenApiParameter.HEADER, description="A person slug: narrows the token's binding."
            ),
            OpenApiParameter(
                CONVERSATION_HEADER,
                str,
                OpenApiParameter.HEADER,
                description="The conversation's external id, created on first sight (platform api); required "
                "unless the token is bound to exactly one conversation.",
            ),
        ],
        responses={
            (200, "application/json"): OpenApiResponse(
                OpenApiTypes.OBJECT,
                description="The upstream's chat completion, unchanged in shape, [[anima:ID]] markers stripped.",
            ),
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR, description="With stream: true, the upstream's events as they arrive."
            ),
            **_PROXY_ERRORS,
            502: _OPENAI_ERROR,
            504: _OPENAI_ERROR,
        },
        operation_id="proxy_chat_completions",
        tags=["proxy"],
    )
    def post(self, request: Request) -> Response | StreamingHttpResponse:
        """A chat completion from the configured LLM, with Anima's memory assembled into the turn."""
        turn = proxy_turn(
            body=request.data,
            access=access_for_user(request.user),
            person=request.headers.get(PERSON_HEADER),
            conversation=request.headers.get(CONVERSATION_HEADER),
        )
        if request.data.get("stream"):
            return StreamingHttpResponse(
                proxy_stream(turn), content_type="text/event-stream", headers={"Cache-Control": "no-cache"}
            )
        return Response(proxy_complete(turn))
