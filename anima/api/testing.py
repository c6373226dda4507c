"""Test helpers: API clients authenticated with a real token (the way the agent runtime calls)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient


def api_token(*, username: str = "agent", staff: bool = False) -> str:
    user, _ = get_user_model().objects.get_or_create(username=username, defaults={"is_staff": staff})
    token, _ = Token.objects.get_or_create(user=user)
    return token.key


def api_client(*, username: str = "agent", staff: bool = False) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token(username=username, staff=staff)}")
    return client
