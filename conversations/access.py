"""Who is asking: what an API token (or console session) may see and do, for every surface.

The REST API uses it through ``TokenAuthentication`` and ``ScopedAccess`` (settings); the MCP
server and the OpenAI-compatible proxy reuse the same pieces:

- ``TokenAuthentication`` reads ``Authorization: Token <key>`` and ``Authorization: Bearer <key>``;
  ``authenticate_authorization`` does it for a header value that did not come through DRF (MCP).
- ``access_for_user(user)`` is the ``Access`` of a user: *operator* (staff: everything), *agent*
  or *person* (a ``TokenScope`` row), else *none* (no rights).
- ``Access.narrow(person=..., conversation=...)`` applies what a request names (a header, a
  flag, an argument): it only ever narrows; outside the binding it raises ``AccessDenied``.
  ``access_narrow_by_name`` does the same from a slug / conversation reference.
- ``Access.require`` gates an operation by scope; ``person_for`` / ``write_check`` /
  ``conversation_check`` / ``identity_map_check`` check one row; ``owned`` / ``conversations`` filter
  querysets. A conversation looked up by id goes through ``conversations``, so one the caller cannot
  see is answered like one that does not exist and never named.
- ``access_for_headers(user=..., person=..., conversation=...)`` is a user's access narrowed by the
  ``X-Anima-Person`` / ``X-Anima-Conversation`` headers (a user without a scope is refused): the
  rule of every token-authenticated surface. ``access_of(request)`` applies it to a DRF request
  (cached on it); ``ScopedAccess`` is the DRF permission that refuses a view's operation to scopes
  it does not list.

``AccessDenied`` (``anima.core.errors``, re-exported here) is an HTTP 403 whose message names why.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from django.db.models import Q, QuerySet
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions

from anima.core.db import row_id_parse
from anima.core.errors import AccessDenied, AnimaError
from conversations.models import Conversation, Person, ScopeKind, TokenScope, person_slug_valid
from conversations.selectors import conversation_person, conversations_of_persons, identity_resolve

OPERATOR = "operator"
AGENT = ScopeKind.AGENT.value
PERSON = ScopeKind.PERSON.value
NONE = "none"
SCOPED = (OPERATOR, AGENT, PERSON)

__all__ = [
    "AGENT",
    "CONVERSATION_HEADER",
    "NONE",
    "OPERATOR",
    "OPERATOR_ACCESS",
    "PERSON",
    "PERSON_HEADER",
    "SCOPED",
    "Access",
    "AccessDenied",
    "ScopedAccess",
    "TokenAuthentication",
    "access_for_headers",
    "access_for_user",
    "access_narrow_by_name",
    "access_of",
    "access_of_scope",
    "conversation_find",
]

PERSON_HEADER = "X-Anima-Person"
CONVERSATION_HEADER = "X-Anima-Conversation"


def _slugs(persons: Iterable[Person]) -> str:
    return ", ".join(sorted(person.slug for person in persons)) or "nobody"


def conversation_label(conversation: Conversation) -> str:
    return conversation.external_id or f"#{conversation.pk}"


@dataclass(frozen=True, eq=False)
class Access:
    """What one caller may reach. ``person_ids`` None means any person (an operator not narrowed)."""

    scope: str
    binding: str
    person_ids: frozenset[int] | None = None
    # The conversations it may act in, as a filter on Conversation.
    conversation_q: Q = field(default_factory=Q)
    # The one person it acts for / the one conversation it acts in, when there is exactly one.
    person: Person | None = None
    conversation: Conversation | None = None

    @property
    def is_operator(self) -> bool:
        return self.scope == OPERATOR

    @property
    def global_only(self) -> bool:
        """Reads for nobody in particular: bound but with no single person, so global rows only."""
        return self.person_ids is not None and self.person is None

    def require(self, *scopes: str, to: str) -> None:
        """Refuse ``to`` (what is being done) unless this access has one of ``scopes``."""
        if self.scope not in scopes:
            raise AccessDenied(f"{to} needs {' or '.join(scopes)} scope; this is {self.binding}")

    def reaches(self, person_id: int | None) -> bool:
        return person_id is not None and (self.person_ids is None or person_id in self.person_ids)

    def person_for(self, person: Person | None) -> Person | None:
        """The person a call acts for: ``person`` when within the binding, else (None) the bound one."""
        if person is None:
            return self.person
        if not self.reaches(person.pk):
            raise AccessDenied(f"person {person.slug} is outside {self.binding}")
        return person

    def write_check(self, person: Person | None, *, what: str) -> None:
        """A write of ``what`` owned by ``person``: scoped tokens write only rows of their own persons."""
        if person is None:
            if not self.is_operator:
                raise AccessDenied(f"{what} without a person is global: operator scope only; this is {self.binding}")
            if self.person_ids is not None:
                # Narrowed to a person, or to a conversation whose human is unknown: it acts for those it reaches,
                # and a global row is everyone's (a stranger's e-mail remembered globally reaches every prompt).
                raise AccessDenied(f"{what} without a person is global: beyond {self.binding}")
            return
        self.person_for(person)

    def owned(self, queryset: QuerySet, *, field: str = "person") -> QuerySet:
        """Rows of ``queryset`` owned by a person it reaches, plus global (person-less) rows."""
        if self.person_ids is None:
            return queryset
        return queryset.filter(Q(**{f"{field}__isnull": True}) | Q(**{f"{field}__in": self.person_ids}))

    def persons(self, queryset: QuerySet[Person]) -> QuerySet[Person]:
        return queryset if self.person_ids is None else queryset.filter(pk__in=self.person_ids)

    def conversations(self, queryset: QuerySet[Conversation]) -> QuerySet[Conversation]:
        return queryset.filter(self.conversation_q)

    def sees(self, conversation: Conversation) -> bool:
        return Conversation.objects.filter(pk=conversation.pk).filter(self.conversation_q).exists()

    def conversation_check(self, conversation: Conversation) -> None:
        """Within reach: for one the caller named by external id or wrote (look ids up through ``conversations``)."""
        if not self.sees(conversation):
            raise AccessDenied(f"conversation {conversation_label(conversation)} is outside {self.binding}")

    def conversation_write_check(self, conversation: Conversation) -> None:
        """A conversation as written: still within reach, and resolving to nobody or a person it reaches."""
        self.conversation_check(conversation)
        owner = conversation_person(conversation=conversation)
        if owner is not None and not self.reaches(owner.pk):
            raise AccessDenied(
                f"conversation {conversation_label(conversation)} would belong to {owner.slug}, outside {self.binding}"
            )

    def identity_map_check(self, *, channel: str, external_id: str, person_slug: str) -> None:
        """map_identity: operator scope, and a narrowed operator maps only accounts of persons it reaches.

        Narrowing narrows writes too: ``mcp --person leo`` (or ``X-Anima-Person: leo``) may not take
        over an account of someone else, nor give an account to someone else.
        """
        self.require(OPERATOR, to="map_identity")
        if self.person_ids is None:
            return
        target = Person.objects.filter(slug=person_slug).first()
        if target is None or not self.reaches(target.pk):
            raise AccessDenied(f"map_identity to person {person_slug} is outside {self.binding}")
        owner = identity_resolve(channel=channel, external_id=external_id)
        if owner is not None and not self.reaches(owner.pk):
            # Whose it is stays unsaid: only that it is not this caller's to move.
            raise AccessDenied(f"{channel}:{external_id} is mapped to another person, outside {self.binding}")

    def narrow(self, *, person: Person | None = None, conversation: Conversation | None = None) -> Access:
        """This access limited to ``conversation`` (its resolved person becomes the person) and/or ``person``."""
        narrowed = self
        if conversation is not None:
            self.conversation_check(conversation)
            owner = conversation_person(conversation=conversation)
            narrowed = replace(
                narrowed,
                binding=f"{self.binding}, narrowed to conversation {conversation_label(conversation)}",
                person_ids=frozenset({owner.pk}) if owner else frozenset(),
                conversation_q=self.conversation_q & Q(pk=conversation.pk),
                person=owner,
                conversation=conversation,
            )
        if person is not None:
            narrowed.person_for(person)
            narrowed = replace(
                narrowed,
                binding=f"{narrowed.binding}, narrowed to person {person.slug}",
                person_ids=frozenset({person.pk}),
                conversation_q=narrowed.conversation_q & conversations_of_persons(person_ids=[person.pk]),
                person=person,
            )
        return narrowed


OPERATOR_ACCESS = Access(scope=OPERATOR, binding="an operator token (staff: everything)")
NO_ACCESS = Access(
    scope=NONE,
    binding="a token without a scope (no rights until an operator gives it one: python manage.py token_scope)",
    person_ids=frozenset(),
    conversation_q=Q(pk__in=[]),
)


def access_for_user(user) -> Access:
    """The access of ``user``: operator when staff, else what its ``TokenScope`` binds, else none."""
    if user is None or not user.is_authenticated:
        return NO_ACCESS
    if user.is_staff:
        return OPERATOR_ACCESS
    row = TokenScope.objects.filter(user=user).prefetch_related("persons", "conversations__person").first()
    if row is None:
        return NO_ACCESS
    return access_of_scope(row)


def access_of_scope(row: TokenScope) -> Access:
    persons = list(row.persons.all())
    conversations = list(row.conversations.all())
    person_ids = {person.pk for person in persons}
    served = [conversation_person(conversation=conversation) for conversation in conversations]
    reached = {person.pk: person for person in [*persons, *(p for p in served if p is not None)]}
    if row.scope == PERSON:
        binding = f"a person token of {_slugs(persons)}"
    else:
        parts = [f"persons {_slugs(persons)}"] if persons else []
        parts += [f"conversations {', '.join(conversation_label(c) for c in conversations)}"] if conversations else []
        binding = f"an agent token bound to {' and '.join(parts) or 'nothing'}"
    return Access(
        scope=row.scope,
        binding=binding,
        person_ids=frozenset(reached),
        conversation_q=Q(pk__in=[c.pk for c in conversations]) | conversations_of_persons(person_ids=person_ids),
        person=next(iter(reached.values())) if len(reached) == 1 else None,
        conversation=conversations[0] if len(conversations) == 1 and not persons else None,
    )


def conversation_find(reference: str) -> Conversation | None:
    """A conversation by external id, else by numeric id."""
    found = Conversation.objects.select_related("person").filter(external_id=reference).first()
    if found is None and (row_id := row_id_parse(reference)) is not None:
        found = Conversation.objects.select_related("person").filter(pk=row_id).first()
    return found


def access_narrow_by_name(
    access: Access,
    *,
    person: str | None = None,
    conversation: str | None = None,
    person_field: str = "person",
    conversation_field: str = "conversation",
) -> Access:
    """``access.narrow`` from a person slug and a conversation reference; unknown names are an AnimaError."""
    found_conversation = None
    if conversation:
        found_conversation = conversation_find(conversation)
        # One the caller cannot see is answered like one that does not exist: nothing of it is named.
        if found_conversation is None or not access.sees(found_conversation):
            raise AnimaError(f"no conversation {conversation!r}", field=conversation_field)
    found_person = None
    if person:
        if not person_slug_valid(person):
            raise AnimaError(f"{person!r} is not a person slug", field=person_field)
        found_person = Person.objects.filter(slug=person).first()
        if found_person is None:
            raise AnimaError(f"unknown person {person!r}", field=person_field)
    return access.narrow(person=found_person, conversation=found_conversation)


# --- DRF ------------------------------------------------------------------------------------------


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's token authentication under either keyword: ``Token <key>`` or ``Bearer <key>`` (OpenAI-style clients)."""

    keywords = ("token", "bearer")

    def authenticate(self, request):
        # Header values arrive as latin-1 text (WSGI and ASGI alike); DRF hands them back as bytes.
        return self.authenticate_authorization(authentication.get_authorization_header(request).decode("latin-1"))

    def authenticate_authorization(self, authorization: str):
        """``(user, token)`` of an ``Authorization`` header value; None when it holds no token of ours.

        Raises AuthenticationFailed for a malformed header or an unknown or inactive token.
        """
        parts = authorization.split()
        if not parts or parts[0].lower() not in self.keywords:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Invalid token header: expected '<Token|Bearer> <key>'.")
        return self.authenticate_credentials(parts[1])


class TokenAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = TokenAuthentication
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": 'An API token: "Token <key>" or "Bearer <key>".',
        }


def access_for_headers(*, user, person: str | None, conversation: str | None) -> Access:
    """The access of ``user``, narrowed by the ``X-Anima-Person`` / ``X-Anima-Conversation`` header values.

    Raises AccessDenied for a user without a scope or a header outside the binding, AnimaError
    (a 400 naming the header) for a header naming nobody.
    """
    base = access_for_user(user)
    if base.scope == NONE:
        raise AccessDenied(f"this is {base.binding}")
    return access_narrow_by_name(
        base,
        person=person,
        conversation=conversation,
        person_field=PERSON_HEADER,
        conversation_field=CONVERSATION_HEADER,
    )


def access_of(request) -> Access:
    """The access of a DRF request: :func:`access_for_headers` of its user and headers, cached on it."""
    cached = getattr(request, "_anima_access", None)
    if cached is None:
        cached = access_for_headers(
            user=request.user,
            person=request.headers.get(PERSON_HEADER),
            conversation=request.headers.get(CONVERSATION_HEADER),
        )
        request._anima_access = cached
    return cached


class ScopedAccess(permissions.BasePermission):
    """Authenticated, with a scope the view allows for this operation.

    A view lists the scopes of its operations in ``access_scopes`` (default: operator only) and,
    per action (viewsets) or HTTP method (views), in ``access_scopes_by_action``.
    """

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        operation = getattr(view, "action", None) or request.method.lower()
        default = getattr(view, "access_scopes", (OPERATOR,))
        allowed = getattr(view, "access_scopes_by_action", {}).get(operation, default)
        access_of(request).require(*allowed, to=f"{request.method} {request.path}")
        return True
