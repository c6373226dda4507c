from __future__ import annotations

import json
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conversations.models import Conversation, Identity, Message, Person
from conversations.services import conversations_import, message_create
from conversations.signals import messages_stored
from tests.factories import ConversationFactory, PersonFactory, SemanticMemoryFactory


def _line(conv: dict, messages: list[dict]) -> str:
    return json.dumps({"conversation": conv, "messages": messages}, ensure_ascii=False)


def _conv(external_id: str = "c1", **extra) -> dict:
    return {
        "external_id": external_id,
        "platform": "telegram",
        "channel": "telegram",
        "chat_id": "42",
        "person": "leo",
        "title": "t",
        **extra,
    }


def _msg(n: int, role: str = "user", content: str | None = None, **extra) -> dict:
    return {
        "external_id": f"m{n}",
        "role": role,
        "content": content or f"消息 {n}",
        "created_at": f"2026-11-27T09:{n:02d}:00+08:00",
        **extra,
    }


def test_import_creates_people_identities_conversations_and_messages():
    report = conversations_import(lines=[_line(_conv(), [_msg(1), _msg(2, "assistant")])])
    assert report.ok and report.created == {"conversations": 1, "messages": 2}
    conversation = Conversation.objects.get(external_id="c1")
    assert conversation.person.slug == "leo"
    assert Identity.objects.get(channel="telegram", external_id="42").person == conversation.person
    assert list(conversation.messages.values_list("role", flat=True)) == ["user", "assistant"]
    assert conversation.updated_at == conversation.messages.last().created_at


def test_import_is_idempotent_and_appends_only_new_messages():
    lines = [_line(_conv(), [_msg(1), _msg(2, "assistant")])]
    conversations_import(lines=lines)
    again = conversations_import(lines=lines)
    assert again.ok and again.created == {"conversations": 0, "messages": 0}
    more = conversations_import(lines=[_line(_conv(), [_msg(1), _msg(2, "assistant"), _msg(3)])])
    assert more.created == {"conversations": 0, "messages": 1}
    assert Message.objects.count() == 3 and Person.objects.count() == 1


def test_messages_stored_announces_only_the_messages_an_import_inserted():
    announced: list[list[Message]] = []

    def receiver(*, messages, **_signal):
        announced.append(list(messages))

    messages_stored.connect(receiver)
    try:
        conversations_import(lines=[_line(_conv(), [_msg(1), _msg(2, "assistant")])])
        conversations_import(lines=[_line(_conv(), [_msg(1), _msg(2, "assistant")])])  # nothing new: no signal
        conversations_import(lines=[_line(_conv(), [_msg(1), _msg(2, "assistant"), _msg(3)])])
    finally:
        messages_stored.disconnect(receiver)

    first, third = announced
    assert [m.external_id for m in first] == ["m1", "m2"]
    assert [(m.pk, m.external_id) for m in third] == [(Message.objects.get(external_id="m3").pk, "m3")]


def test_messages_without_external_id_are_still_idempotent():
    message = {"role": "user", "content": "没有编号", "created_at": "2026-11-27T09:00:00+08:00"}
    conversations_import(lines=[_line(_conv(), [message])])
    conversations_import(lines=[_line(_conv(), [message])])
    assert Message.objects.count() == 1


def test_bad_lines_are_reported_by_number_and_good_lines_kept():
    lines = [
        _line(_conv("good1"), [_msg(1)]),
        "{not json",
        _line(_conv("bad-role"), [_msg(1, role="robot")]),
        _line(_conv("bad-date"), [{"role": "user", "content": "x", "created_at": "yesterday"}]),
        _line(_conv("bad-person", person="Not A Slug"), []),
        json.dumps({"conversation": {"platform": "web"}}),
        json.dumps({"conversation": _conv("typo"), "mesages": []}),
        "",
        _line(_conv("good2"), [_msg(2)]),
    ]
    report = conversations_import(lines=lines)
    errors = dict(report.errors)
    assert sorted(errors) == [2, 3, 4, 5, 6, 7]
    assert "invalid JSON" in errors[2]
    assert "messages[0].role" in errors[3]
    assert "messages[0].created_at" in errors[4]
    assert "conversation.person" in errors[5]
    assert "conversation.external_id is required" in errors[6]
    assert "mesages" in errors[7]
    assert set(Conversation.objects.values_list("external_id", flat=True)) == {"good1", "good2"}


def test_a_naive_timestamp_is_read_in_the_companion_time_zone():
    conversations_import(
        lines=[_line(_conv(), [{"role": "user", "content": "x", "created_at": "2026-11-27T09:00:00"}])]
    )
    assert Message.objects.get().created_at.isoformat() == "2026-11-27T01:00:00+00:00"


def test_imported_citations_count_once_and_only_for_existing_entities():
    memory = SemanticMemoryFactory(person=PersonFactory(slug="leo"))  # the imported conversation's person
    content = f"记得 [[anima:{memory.pk}]] 和 [[anima:{memory.pk}]] 还有 [[anima:999999]]"
    lines = [_line(_conv(), [_msg(1, content=content), _msg(2, role="tool", content=f"[[anima:{memory.pk}]]")])]
    conversations_import(lines=lines)
    conversations_import(lines=lines)
    memory.refresh_from_db()
    [reference] = memory.references.all()
    assert reference.message.role == "user"
    assert memory.reference_count == reference.weight  # one citing message, counted once, by its weight


def test_message_create_touches_the_conversation_and_records_citations():
    conversation = ConversationFactory()
    memory = SemanticMemoryFactory(person=conversation.person)
    later = conversation.updated_at + timedelta(hours=1)
    message = message_create(
        conversation=conversation, role="assistant", content=f"你说过 [[anima:{memory.pk}]]", created_at=later
    )
    conversation.refresh_from_db()
    memory.refresh_from_db()
    assert conversation.updated_at == later
    assert memory.references.get().message == message


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    content=st.text(max_size=2000),
    title=st.text(max_size=300),
    payload=st.none() | st.dictionaries(st.text(max_size=20), st.text(max_size=50), max_size=3),
)
def test_any_text_either_round_trips_or_is_refused_as_a_line_error(content, title, payload):
    line = _line(_conv("prop", title=title), [_msg(1, content=content or "x", tool_payload=payload)])
    report = conversations_import(lines=[line])
    payload_text = "".join(k + v for k, v in (payload or {}).items())
    if "\x00" in content + title + payload_text:
        assert report.errors and "NUL" in report.errors[0][1]
        assert not Conversation.objects.filter(external_id="prop").exists()
        return
    assert report.ok, report.errors
    stored = Message.objects.get(conversation__external_id="prop", external_id="m1")
    assert (stored.content, stored.tool_payload) == (content or "x", payload)
    Conversation.objects.filter(external_id="prop").delete()
