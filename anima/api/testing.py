"""Test helpers: API clients authenticated with a real token (the way the agent runtime calls)."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from conversations.models import Conversation, Person
from conversations.services import token_scope_set


def api_token(
    *,
    username: str = "agent",
    staff: bool = False,
    scope: str | None = None,
    persons: Iterable[Person] = (),
    conversations: Iterable[Conversation] = (),
) -> str:
    """The token of ``username`` (created on first use); staff is operator, else ``scope`` binds it."""
    user, _ = get_user_model().objects.get_or_create(username=username, defaults={"is_staff": staff})
    if scope is not None:
        token_scope_set(user=user, scope=scope, persons=list(persons), conversations=list(conversations))
    token, _ = Token.objects.get_or_create(user=user)
    return token.key


def api_client(
    *,
    username: str = "agent",
    staff: bool = False,
    scope: str | None = None,
    persons: Iterable[Person] = (),
    conversations: Iterable[Conversation] = (),
    keyword: str = "Token",
) -> APIClient:
    """A client sending ``Authorization: <keyword> <key>`` (``Token`` or ``Bearer``)."""
    key = api_token(username=username, staff=staff, scope=scope, persons=persons, conversations=conversations)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{keyword} {key}")
    return client


def operator_client(*, username: str = "operator") -> APIClient:
    """A staff user's client: operator scope, everything."""
    return api_client(username=username, staff=True)
