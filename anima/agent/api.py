"""The turn-assembly endpoint: ``POST /api/conversations/{id}/prepare-turn/``."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from anima.agent.turn import prepare_turn
from anima.core.api.serializers import StrictSerializer
from anima.core.api.views import ApiGenericView
from conversations.access import AGENT, OPERATOR, access_of
from conversations.models import Conversation


class PrepareTurnSerializer(StrictSerializer):
    user_message = serializers.CharField(max_length=100_000, trim_whitespace=False)
    store = serializers.BooleanField(default=True, help_text="Store the user message (default true).")


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
        messages = prepare_turn(conversation=conversation, **data.validated_data)
        return Response({"messages": messages})
