"""Who is asking: an Access per user, bindings, narrowing, and the one write path of scopes."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.exceptions import AuthenticationFailed

from anima.core.errors import AccessDenied, AnimaError
from conversations.access import (
    NONE,
    OPERATOR,
    PERSON_HEADER,
    TokenAuthentication,
    access_for_headers,
    access_for_user,
    access_narrow_by_name,
)
from conversations.models import Conversation, Identity, Person
from conversations.services import token_scope_clear, token_scope_set
from tests.factories import ConversationFactory, IdentityFactory, PersonFactory, UserFactory


def test_staff_is_operator_and_a_user_without_a_scope_has_no_rights():
    assert access_for_user(UserFactory(is_staff=True)).scope == OPERATOR
    ConversationFactory()
    none = access_for_user(UserFactory())
    assert none.scope == NONE
    assert not none.conversations(Conversation.objects.all()).exists()
    with pytest.raises(AccessDenied):
        none.require(OPERATOR, "agent", "person", to="anything")


def test_an_agent_bound_to_a_conversation_acts_for_its_resolved_person():
    leo = PersonFactory(slug="leo")
    IdentityFactory(person=leo, channel="telegram", external_id="7")
    # No person on the row: the channel account resolves it.
    conversation = ConversationFactory(channel="telegram", chat_id="7", person=None, external_id="tg-7")
    ConversationFactory(person=leo)  # Leo's other conversation is not this agent's
    user = UserFactory()
    token_scope_set(user=user, scope="agent", persons=[], conversations=[conversation])

    access = access_for_user(user)

    assert (access.scope, access.person, access.conversation) == ("agent", leo, conversation)
    assert list(access.conversations(Conversation.objects.all())) == [conversation]
    assert access.person_for(None) == leo and not access.global_only
    with pytest.raises(AccessDenied, match="person maya is outside an agent token bound to conversations tg-7"):
        access.person_for(PersonFactory(slug="maya"))


def test_an_agent_bound_to_persons_reaches_their_conversations_by_account_too():
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    own = ConversationFactory(person=leo)
    by_account = ConversationFactory(person=None, channel="wechat", chat_id="w1")
    Identity.objects.create(channel="wechat", external_id="w1", person=leo)
    ConversationFactory(person=maya)
    ConversationFactory(person=None, channel="wechat", chat_id="unmapped")
    user = UserFactory()
    token_scope_set(user=user, scope="agent", persons=[leo, maya], conversations=[])

    access = access_for_user(user)
    as_leo = access.narrow(person=leo)

    assert access.person is None and access.global_only  # two persons: nobody in particular
    assert set(as_leo.conversations(Conversation.objects.all())) == {own, by_account}
    assert as_leo.person == leo and as_leo.person_ids == frozenset({leo.pk})


def test_narrowing_by_conversation_then_person_only_narrows():
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    conversation = ConversationFactory(person=leo, external_id="c-leo")
    operator = access_for_user(UserFactory(is_staff=True))

    narrowed = access_narrow_by_name(operator, conversation="c-leo")
    by_id = access_narrow_by_name(operator, conversation=str(conversation.pk))

    assert narrowed.person == by_id.person == leo and narrowed.is_operator
    with pytest.raises(AccessDenied, match="person maya is outside"):
        narrowed.narrow(person=maya)
    with pytest.raises(AnimaError) as unknown:
        access_narrow_by_name(operator, conversation="nope", conversation_field="X-Anima-Conversation")
    assert unknown.value.field == "X-Anima-Conversation"


def test_a_token_under_either_keyword_then_headers_that_only_narrow():
    leo, _ = PersonFactory(slug="leo"), PersonFactory(slug="ada")
    bot = UserFactory()
    token_scope_set(user=bot, scope="agent", persons=[leo], conversations=[])
    key = Token.objects.create(user=bot).key
    auth = TokenAuthentication()

    assert [auth.authenticate_authorization(f"{kw} {key}")[0] for kw in ("Token", "Bearer", "bearer")] == [bot] * 3
    assert auth.authenticate_authorization("Basic abc") is None
    assert auth.authenticate_authorization("") is None
    for malformed in ("Bearer a b", "Bearer not-a-token"):
        with pytest.raises(AuthenticationFailed):
            auth.authenticate_authorization(malformed)
    assert access_for_headers(user=bot, person="leo", conversation=None).person == leo
    with pytest.raises(AccessDenied, match="person ada is outside an agent token bound to persons leo"):
        access_for_headers(user=bot, person="ada", conversation=None)
    with pytest.raises(AnimaError) as unknown:
        access_for_headers(user=bot, person="nobody", conversation=None)
    assert unknown.value.field == PERSON_HEADER
    with pytest.raises(AccessDenied, match="token_scope"):
        access_for_headers(user=UserFactory(), person=None, conversation=None)


def test_person_scope_writes_its_own_rows_only_and_never_global_ones():
    leo = PersonFactory(slug="leo")
    user = UserFactory()
    token_scope_set(user=user, scope="person", persons=[leo], conversations=[])
    access = access_for_user(user)

    access.write_check(leo, what="a memory")
    with pytest.raises(AccessDenied, match="global"):
        access.write_check(None, what="a memory")
    with pytest.raises(AccessDenied):
        access.write_check(PersonFactory(slug="maya"), what="a memory")


def test_an_operator_narrowed_to_a_person_or_an_unknown_humans_conversation_writes_nothing_global():
    leo = PersonFactory(slug="leo")
    stranger = ConversationFactory(person=None, chat_id="visitor-7")
    operator = access_for_user(UserFactory(is_staff=True))

    operator.write_check(None, what="a memory")  # acting for everyone, a global memory is its to write
    for narrowed in (operator.narrow(person=leo), operator.narrow(conversation=stranger)):
        with pytest.raises(AccessDenied, match="a memory without a person is global: beyond"):
            narrowed.write_check(None, what="a memory")
    operator.narrow(person=leo).write_check(leo, what="a memory")


@pytest.mark.parametrize(
    ("scope", "persons", "conversations", "field"),
    [
        ("person", 2, 0, "persons"),
        ("person", 1, 1, "persons"),
        ("agent", 0, 0, "persons"),
        ("owner", 1, 0, "scope"),
    ],
)
def test_invalid_scopes_are_refused_naming_the_field(scope, persons, conversations, field):
    with pytest.raises(AnimaError) as caught:
        token_scope_set(
            user=UserFactory(),
            scope=scope,
            persons=PersonFactory.create_batch(persons),
            conversations=ConversationFactory.create_batch(conversations),
        )
    assert caught.value.field == field


def test_staff_cannot_be_scoped_and_a_cleared_scope_takes_every_right_away():
    with pytest.raises(AnimaError) as caught:
        token_scope_set(user=UserFactory(is_staff=True), scope="person", persons=[PersonFactory()], conversations=[])
    user = UserFactory()
    token_scope_set(user=user, scope="person", persons=[PersonFactory()], conversations=[])

    assert caught.value.field == "user"
    assert token_scope_clear(user=user) is True and access_for_user(user).scope == NONE
    assert token_scope_clear(user=user) is False
    assert Person.objects.count() == 2  # clearing a scope touches nobody's data
