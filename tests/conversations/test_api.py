"""Conversations, messages, people, identities and history over the API."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection

from anima.api.testing import api_client, operator_client
from conversations.models import Conversation, HistoryEntry, Identity, Message, Person
from memory.models import MemoryReference
from tests.factories import (
    ConversationFactory,
    HistoryEntryFactory,
    IdentityFactory,
    MessageFactory,
    PersonFactory,
    SemanticMemoryFactory,
)
from tests.locks import table_locked


def test_create_list_filter_and_update_conversations():
    client = operator_client()
    PersonFactory(slug="leo")

    created = client.post(
        "/api/conversations/",
        {"platform": "telegram", "channel": "telegram", "chat_id": "42", "person": "leo"},
        format="json",
    )
    ConversationFactory(platform="web")
    listed = client.get("/api/conversations/", {"platform": "telegram"}).json()
    patched = client.patch(f"/api/conversations/{created.json()['id']}/", {"title": "Evening chat"}, format="json")

    assert created.status_code == 201 and created.json()["person"] == "leo"
    assert [c["chat_id"] for c in listed["results"]] == ["42"]
    assert patched.json()["title"] == "Evening chat"


def test_conversation_validation_names_fields():
    client = operator_client()
    ConversationFactory(external_id="taken")

    response = client.post(
        "/api/conversations/", {"platform": "pigeon", "person": "nobody", "external_id": "taken"}, format="json"
    )

    assert response.status_code == 400
    assert set(response.json()) == {"platform", "person", "external_id"}


def test_posting_a_message_records_its_citations():
    conversation = ConversationFactory()
    memory = SemanticMemoryFactory(person=conversation.person)

    response = api_client(scope="agent", conversations=[conversation]).post(
        f"/api/conversations/{conversation.pk}/messages/",
        {"role": "assistant", "content": f"You like Python [[anima:{memory.pk}]]"},
        format="json",
    )

    assert response.status_code == 201
    assert MemoryReference.objects.filter(entity=memory, message_id=response.json()["id"]).exists()
    memory.refresh_from_db()
    assert memory.reference_count > 0


def test_message_post_is_idempotent_on_external_id():
    conversation = ConversationFactory()
    client = api_client(scope="agent", conversations=[conversation])
    body = {"role": "user", "content": "hello", "external_id": "tg-1", "created_at": "2026-10-01T10:00:00+08:00"}

    first = client.post(f"/api/conversations/{conversation.pk}/messages/", body, format="json")
    second = client.post(f"/api/conversations/{conversation.pk}/messages/", body, format="json")

    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["id"] == second.json()["id"]
    assert Message.objects.filter(conversation=conversation).count() == 1


def test_messages_list_oldest_first_and_refuses_bad_roles():
    conversation = ConversationFactory()
    older = MessageFactory(conversation=conversation, created_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    newer = MessageFactory(conversation=conversation, created_at=dt.datetime(2026, 1, 2, tzinfo=dt.UTC))
    client = operator_client()

    listed = client.get(f"/api/conversations/{conversation.pk}/messages/").json()
    bad = client.post(
        f"/api/conversations/{conversation.pk}/messages/", {"role": "narrator", "content": "x"}, format="json"
    )
    far = client.post(
        f"/api/conversations/{conversation.pk}/messages/",
        {"role": "user", "content": "x", "created_at": "0001-01-01T00:00:00+14:00"},
        format="json",
    )

    assert [m["id"] for m in listed["results"]] == [older.pk, newer.pk]
    assert bad.status_code == 400 and "role" in bad.json()
    assert far.status_code == 400 and "created_at" in far.json()


def test_prepare_turn_returns_the_message_list_and_stores_the_user_message():
    conversation = ConversationFactory()

    response = api_client(scope="agent", conversations=[conversation]).post(
        f"/api/conversations/{conversation.pk}/prepare-turn/", {"message": "早上好"}, format="json"
    )

    assert response.status_code == 200
    messages = response.json()["messages"]
    assert messages[0]["role"] == "system" and messages[-1] == {"role": "user", "name": "", "content": "早上好"}
    assert Message.objects.filter(conversation=conversation, content="早上好").exists()


def test_prepare_turn_still_takes_the_old_field_name_and_names_the_field_at_fault():
    conversation = ConversationFactory()
    client = operator_client()
    url = f"/api/conversations/{conversation.pk}/prepare-turn/"

    old = client.post(url, {"user_message": "hi", "store": False}, format="json")
    both = client.post(url, {"user_message": "hi", "message": "hi"}, format="json")
    missing = client.post(url, {"store": False}, format="json")

    assert old.status_code == 200 and old.json()["messages"][-1]["content"] == "hi"
    assert both.status_code == 400 and "user_message" in both.json()
    assert missing.status_code == 400 and "message" in missing.json()
    assert not Message.objects.filter(conversation=conversation).exists()


def test_persons_and_identity_mapping():
    client = operator_client()

    created = client.post("/api/persons/", {"slug": "leo", "display_name": "Leo"}, format="json")
    duplicate = client.post("/api/persons/", {"slug": "leo"}, format="json")
    bad_slug = client.post("/api/persons/", {"slug": "Leo Big"}, format="json")
    mapped = client.post(
        "/api/identities/",
        {"channel": "telegram", "external_id": "123", "person": "mia", "display_name": "Mia"},
        format="json",
    )
    moved = client.post(
        "/api/identities/", {"channel": "telegram", "external_id": "123", "person": "leo"}, format="json"
    )
    resolved = client.get("/api/identities/resolve/", {"channel": "telegram", "external_id": "123"})
    unknown = client.get("/api/identities/resolve/", {"channel": "telegram", "external_id": "999"})
    person = client.get("/api/persons/leo/").json()

    assert created.status_code == 201
    assert duplicate.status_code == 400 and "slug" in duplicate.json()
    assert bad_slug.status_code == 400 and "slug" in bad_slug.json()
    assert mapped.status_code == 201 and Person.objects.get(slug="mia").display_name == "Mia"
    assert moved.json()["person"] == "leo" and Identity.objects.count() == 1
    assert resolved.json()["slug"] == "leo"
    assert unknown.status_code == 404
    assert person["identities"][0]["external_id"] == "123"


def test_identities_filter_by_person():
    IdentityFactory(person=PersonFactory(slug="leo"))
    IdentityFactory(person=PersonFactory(slug="mia"))

    listed = operator_client().get("/api/identities/", {"person": "mia"}).json()

    assert [identity["person"] for identity in listed["results"]] == ["mia"]


def test_history_search_and_append():
    leo = PersonFactory(slug="leo")
    HistoryEntryFactory(
        person=leo, channel="telegram", content="讨论了杭州的天气", timestamp=dt.datetime(2026, 10, 3, tzinfo=dt.UTC)
    )
    HistoryEntryFactory(
        person=None, channel="cli", content="部署了新版本", timestamp=dt.datetime(2026, 10, 4, tzinfo=dt.UTC)
    )
    client = operator_client()

    text = client.get("/api/history/", {"q": "杭州"}).json()
    channel = client.get("/api/history/", {"channel": "cli"}).json()
    scoped = client.get("/api/history/", {"scope": "global"}).json()
    window = client.get("/api/history/", {"since": "2026-10-04", "until": "2026-10-05"}).json()
    appended = client.post(
        "/api/history/", {"content": "Leo 搬家了", "person": "leo", "channel": "telegram"}, format="json"
    )
    bad = client.get("/api/history/", {"until": "next week"})

    assert [e["content"] for e in text["results"]] == ["讨论了杭州的天气"]
    assert [e["content"] for e in channel["results"]] == ["部署了新版本"]
    assert [e["person"] for e in scoped["results"]] == [None]
    assert [e["content"] for e in window["results"]] == ["部署了新版本"]
    assert appended.status_code == 201 and HistoryEntry.objects.filter(person=leo).count() == 2
    assert bad.status_code == 400 and "until" in bad.json()


def test_history_search_honours_phrases_and_not_and_refuses_a_dangling_operator_naming_q():
    HistoryEntryFactory(content="she loves green tea")
    HistoryEntryFactory(content="green shirt, black tea")
    client = operator_client()

    phrase = client.get("/api/history/", {"q": '"green tea"'}).json()
    negated = client.get("/api/history/", {"q": "green AND NOT shirt"}).json()
    bad = client.get("/api/history/", {"q": "green tea AND"})

    assert [e["content"] for e in phrase["results"]] == ["she loves green tea"]
    assert [e["content"] for e in negated["results"]] == ["she loves green tea"]
    assert bad.status_code == 400
    assert list(bad.json()) == ["q"] and "operator" in bad.json()["q"][0]


def test_conversations_are_paginated():
    ConversationFactory.create_batch(3)

    page = operator_client().get("/api/conversations/", {"page_size": 2}).json()

    assert page["count"] == Conversation.objects.count() and len(page["results"]) == 2 and page["next"]


@pytest.mark.parametrize("slug", ["a--b", "-leo", "x_", "Leo", "李雷", "a" * 65])
def test_person_slugs_follow_the_same_rule_as_the_importers(slug):
    response = operator_client().post("/api/persons/", {"slug": slug}, format="json")
    assert response.status_code == 400
    assert "slug" in response.json()


@pytest.mark.django_db(transaction=True)
def test_a_history_search_past_the_recall_timeout_is_a_503_naming_it_for_the_api_and_the_tool(settings):
    settings.ANIMA_RECALL_TIMEOUT = 0.3
    HistoryEntryFactory(content="Leo moved to Porto")
    client = api_client(staff=True)
    with table_locked("history_entries"):
        api = client.get("/api/history/", {"q": "Porto"})
        tool = client.post("/api/tools/memory/", {"action": "search_history", "query": "Porto"}, format="json")

    cancelled = {"detail": "history search took longer than 0.3 s (ANIMA_RECALL_TIMEOUT) and was cancelled"}
    assert (api.status_code, api.json()) == (503, cancelled)
    assert (tool.status_code, tool.json()) == (503, cancelled)
    # The cancelled session searches normally again, under its usual settings.
    assert [entry["content"] for entry in client.get("/api/history/", {"q": "Porto"}).json()["results"]] == [
        "Leo moved to Porto"
    ]
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"


def test_an_operator_narrowed_to_a_person_maps_only_that_persons_accounts():
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    IdentityFactory(channel="telegram", external_id="maya-phone", person=maya)
    client = operator_client()

    def mapped(external_id: str, person: str):
        body = {"channel": "telegram", "external_id": external_id, "person": person}
        return client.post("/api/identities/", body, format="json", headers={"X-Anima-Person": "leo"})

    takeover, giveaway, own = mapped("maya-phone", "leo"), mapped("spare", "maya"), mapped("leo-laptop", "leo")

    assert takeover.status_code == 403
    assert takeover.json()["detail"] == (
        "telegram:maya-phone is mapped to another person, outside an operator token (staff: everything),"
        " narrowed to person leo"
    )
    assert giveaway.status_code == 403 and "map_identity to person maya is outside" in giveaway.json()["detail"]
    assert own.status_code == 201 and own.json()["person"] == "leo"
    assert dict(Identity.objects.values_list("external_id", "person__slug")) == {
        "maya-phone": "maya",
        "leo-laptop": "leo",
    }
    assert leo.identities.count() == 1


def test_conversations_and_persons_are_found_by_their_external_ids():
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    ConversationFactory(external_id="tg-leo", person=leo)
    ConversationFactory(external_id="tg-maya", person=maya)
    IdentityFactory(person=leo, channel="telegram", external_id="100")
    IdentityFactory(person=leo, channel="cli", external_id="200")
    IdentityFactory(person=maya, channel="telegram", external_id="200")
    client = operator_client()

    conversations = client.get("/api/conversations/", {"external_id": "tg-maya"}).json()["results"]
    by_account = client.get("/api/persons/", {"channel": "telegram", "external_id": "200"}).json()["results"]
    by_channel = client.get("/api/persons/", {"channel": "cli"}).json()["results"]
    nobody = client.get("/api/conversations/", {"external_id": "tg-nobody"}).json()["results"]
    accounts = client.get("/api/identities/", {"external_id": "200"}).json()["results"]

    assert [c["external_id"] for c in conversations] == ["tg-maya"]
    # channel and external_id match one account together: leo's cli:200 is not telegram:200.
    assert [p["slug"] for p in by_account] == ["maya"]
    assert [p["slug"] for p in by_channel] == ["leo"]
    assert nobody == []
    assert sorted((a["channel"], a["person"]) for a in accounts) == [("cli", "leo"), ("telegram", "maya")]


def test_a_scoped_token_finds_by_external_id_only_what_it_reaches():
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    ConversationFactory(external_id="tg-maya", person=maya)
    IdentityFactory(person=maya, channel="telegram", external_id="200")
    client = api_client(scope="agent", persons=[leo])

    assert client.get("/api/conversations/", {"external_id": "tg-maya"}).json()["results"] == []
    assert client.get("/api/persons/", {"channel": "telegram", "external_id": "200"}).json()["results"] == []


@pytest.mark.parametrize(
    "path",
    [
        "/api/conversations/",
        "/api/persons/",
        "/api/identities/",
        "/api/memories/",
        "/api/diary/",
        "/api/emotional-tendencies/",
        "/api/temporal-summaries/",
        "/api/sleep-runs/",
        "/api/history/",
        "/api/tools/",
        "/api/config/",
    ],
)
def test_an_unknown_query_parameter_on_a_list_is_a_400_naming_it(path):
    client = operator_client()

    response = client.get(path, {"externalid": "tg-leo"})

    assert response.status_code == 400, response.content
    assert list(response.json()) == ["externalid"]
    assert client.get(path, {"format": "json"}).status_code == 200


def test_recall_and_lookups_name_an_unknown_query_parameter_too():
    client = operator_client()

    recall = client.get("/api/recall/", {"q": "tea", "persn": "leo"})
    resolve = client.get("/api/identities/resolve/", {"channel": "telegram", "external_id": "1", "x": "1"})
    known = client.get("/api/recall/", {"q": "tea", "format": "json"})
    paged = client.get("/api/history/", {"q": "tea", "page": 1, "page_size": 5})

    assert recall.status_code == 400 and list(recall.json()) == ["persn"]
    assert "q" in recall.json()["persn"][0]  # it says what the endpoint takes
    assert resolve.status_code == 400 and list(resolve.json()) == ["x"]
    assert known.status_code == 200 and paged.status_code == 200


def test_a_persons_display_name_is_changed_by_patch_within_reach():
    leo, maya = PersonFactory(slug="leo", display_name="Leo"), PersonFactory(slug="maya", display_name="Maya")
    client = api_client(scope="person", persons=[leo])

    renamed = client.patch("/api/persons/leo/", {"display_name": "Leo Wang"}, format="json")
    other = client.patch("/api/persons/maya/", {"display_name": "M"}, format="json")
    slug = operator_client().patch("/api/persons/leo/", {"slug": "leo2"}, format="json")
    too_long = operator_client().patch("/api/persons/leo/", {"display_name": "x" * 201}, format="json")

    assert renamed.status_code == 200 and renamed.json()["display_name"] == "Leo Wang"
    assert other.status_code == 404
    assert slug.status_code == 400 and "slug" in slug.json()
    assert too_long.status_code == 400 and "display_name" in too_long.json()
    leo.refresh_from_db()
    maya.refresh_from_db()
    assert (leo.slug, leo.display_name, maya.display_name) == ("leo", "Leo Wang", "Maya")


def test_the_docs_look_ups_find_leo_on_the_demo_data(demo_sample):
    client = operator_client()

    conversation = client.get("/api/conversations/", {"external_id": "demo-conv-leo-tg-1128-am"}).json()["results"]
    person = client.get("/api/persons/", {"channel": "telegram", "external_id": "12345678"}).json()["results"]

    assert [(c["external_id"], c["person"]) for c in conversation] == [("demo-conv-leo-tg-1128-am", "leo")]
    assert [p["slug"] for p in person] == ["leo"]
