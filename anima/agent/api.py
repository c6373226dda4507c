"""The agent endpoints: turn assembly (``POST /api/conversations/{id}/prepare-turn/``) and the
OpenAI-compatible memory proxy (``POST /v1/chat/completions``)."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from anima.agent.proxy import UpstreamError, proxy_complete, proxy_stream, proxy_turn
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


_ERROR_TYPES = {401: "authentication_error", 403: "permission_error", 404: "not_found_error", 503: "unavailable"}


def _openai_error(message: str, *, status: int, param: str | None = None, kind: str | None = None) -> Response:
    error = {"message": message, "type": kind or _ERROR_TYPES.get(status, "invalid_request_error"), "param": param}
    return Response({"error": {**error, "code": None}}, status=status)


def openai_exception_handler(exc, context) -> Response | None:
    """The API's errors in the shape OpenAI clients read: ``{"error": {"message", "type", "param", "code"}}``."""
    if isinstance(exc, UpstreamError):
        return _openai_error(str(exc), status=exc.status, kind="upstream_error")
    response = exception_handler(exc, context)
    if response is None:
        return None
    if "detail" in response.data:
        return _openai_error(str(response.data["detail"]), status=response.status_code)
    param, messages = next(iter(response.data.items()))
    messages = messages if isinstance(messages, list) else [messages]
    return _openai_error(" ".join(str(m) for m in messages), status=response.status_code, param=param)


class ChatCompletionsView(ApiView):
    # Scopes (operator or agent) are checked by proxy_turn: the conversation header may name one to create.
    permission_classes = [IsAuthenticated]

    def get_exception_handler(self):
        return openai_exception_handler

    # The OpenAI chat-completions API, documented by OpenAI: not part of Anima's own schema.
    @extend_schema(exclude=True)
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
