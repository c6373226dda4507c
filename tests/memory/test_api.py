"""Memories over the API: remember, list / filter / search, curate, physical delete; recall; diary."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from anima.api.testing import api_client, operator_client
from anima.core.embeddings import EmbeddingModel
from anima.core.models import BlockTag, MemoryStatus
from anima.core.vectors import ENTITY, VectorRow, vectors_store
from memory.embedding import embed_pending_count
from memory.models import SemanticMemory
from memory.selectors import memory_versions
from tests.factories import (
    ContentBlockFactory,
    ConversationFactory,
    DiaryEntryFactory,
    EmotionalTendencyFactory,
    MessageFactory,
    PersonFactory,
    SemanticMemoryFactory,
    belief_superseded,
)


def test_remember_creates_once_and_returns_the_existing_fact_after():
    PersonFactory(slug="leo")
    client = operator_client()

    first = client.post(
        "/api/memories/", {"content": "Leo 喜欢 Python", "memory_type": "preference", "person": "leo"}, format="json"
    )
    again = client.post(
        "/api/memories/",
        {"content": "  leo 喜欢  python ", "memory_type": "preference", "person": "leo"},
        format="json",
    )
    global_fact = client.post("/api/memories/", {"content": "Leo 喜欢 Python"}, format="json")

    assert (first.status_code, again.status_code, global_fact.status_code) == (201, 200, 201)
    assert first.json()["id"] == again.json()["id"] != global_fact.json()["id"]
    assert first.json()["citation"] == f"[[anima:{first.json()['id']}]]"
    assert SemanticMemory.objects.count() == 2


def test_list_filters_and_hybrid_search():
    leo = PersonFactory(slug="leo")
    SemanticMemoryFactory(person=leo, content="Leo 喜欢 Python", memory_type="preference", pinned=True)
    SemanticMemoryFactory(person=leo, content="Leo 住在杭州", memory_type="world")
    SemanticMemoryFactory(person=None, content="杭州的冬天很冷", memory_type="world", status=MemoryStatus.DEPRECATED)
    client = operator_client()

    by_type = client.get("/api/memories/", {"memory_type": "preference"}).json()
    by_status = client.get("/api/memories/", {"status": "deprecated"}).json()
    pinned = client.get("/api/memories/", {"pinned": "true", "person": "leo"}).json()
    searched = client.get("/api/memories/", {"q": "杭州"}).json()
    bad = client.get("/api/memories/", {"memory_type": "gossip"})

    assert [m["content"] for m in by_type["results"]] == ["Leo 喜欢 Python"]
    assert [m["content"] for m in by_status["results"]] == ["杭州的冬天很冷"]
    assert [m["content"] for m in pinned["results"]] == ["Leo 喜欢 Python"]
    assert [m["content"] for m in searched["results"]] == ["Leo 住在杭州"]  # search covers active memories
    assert bad.status_code == 400 and "memory_type" in bad.json()


def test_deprecate_restore_pin_unpin():
    memory = SemanticMemoryFactory()
    client = operator_client()
    base = f"/api/memories/{memory.pk}"

    deprecated = client.post(f"{base}/deprecate/", {"reason": "wrong"}, format="json").json()
    restored = client.post(f"{base}/restore/").json()
    pinned = client.post(f"{base}/pin/").json()
    unpinned = client.post(f"{base}/unpin/").json()

    assert deprecated["status"] == "deprecated" and deprecated["body"]["deprecated_reason"] == "wrong"
    assert restored["status"] == "active"
    assert pinned["pinned"] is True and unpinned["pinned"] is False
    # Restored by an operator: the retirement undone stays in the record, and the memory is theirs now.
    [undone] = restored["body"]["restored"]
    assert (undone["status"], undone["reason"]) == ("deprecated", "wrong") and undone["by"].startswith("api:")
    assert restored["body"]["edited_by"] == undone["by"]


def test_physical_delete_by_staff():
    memory = SemanticMemoryFactory()

    response = api_client(staff=True).delete(f"/api/memories/{memory.pk}/")

    assert response.status_code == 204
    assert not SemanticMemory.objects.filter(pk=memory.pk).exists()


def test_recall_ranks_across_sources_and_validates_parameters():
    SemanticMemoryFactory(person=None, content="用户的邮箱是 leo@example.com")
    client = operator_client()

    hits = client.get("/api/recall/", {"q": "你的邮箱是啥？", "types": "semantic,session", "limit": 5}).json()
    bad_type = client.get("/api/recall/", {"q": "x", "types": "semantic,gossip"})
    missing = client.get("/api/recall/")
    bad_limit = client.get("/api/recall/", {"q": "x", "limit": 1000})
    bad_query = client.get("/api/recall/", {"q": "python AND"})

    assert hits["results"][0]["memory_type"] == "semantic" and "semantic_memory_id" in hits["results"][0]
    assert bad_type.status_code == 400 and "types" in bad_type.json()
    assert missing.status_code == 400 and "q" in missing.json()
    assert bad_limit.status_code == 400 and "limit" in bad_limit.json()
    assert bad_query.status_code == 400 and "q" in bad_query.json()


def test_recall_person_scope():
    leo, mia = PersonFactory(slug="leo"), PersonFactory(slug="mia")
    SemanticMemoryFactory(person=leo, content="喜欢 咖啡")
    SemanticMemoryFactory(person=mia, content="也 喜欢 咖啡")

    hits = operator_client().get("/api/recall/", {"q": "咖啡", "person": "leo", "types": "semantic"}).json()["results"]

    assert [hit["snippet"] for hit in hits] == ["喜欢 咖啡"]


def test_diary_lists_days_with_blocks_in_reading_order():
    day = DiaryEntryFactory(source_day=dt.date(2026, 10, 1))
    ContentBlockFactory(parent=day, tag=BlockTag.DREAM, content="a dream")
    ContentBlockFactory(parent=day, tag=BlockTag.NARRATIVE, content="what happened")
    ContentBlockFactory(parent=day, tag=BlockTag.LIMBIC, content="I feel calm", body={"intensity": 0.4})
    DiaryEntryFactory(source_day=dt.date(2026, 9, 1))

    listed = operator_client().get("/api/diary/", {"since": "2026-09-15"}).json()

    assert [entry["source_day"] for entry in listed["results"]] == ["2026-10-01"]
    assert [block["tag"] for block in listed["results"][0]["blocks"]] == ["limbic", "narrative", "dream"]


def test_a_search_that_finds_nothing_is_an_empty_page():
    SemanticMemoryFactory(content="Leo 住在杭州")
    response = operator_client().get("/api/memories/", {"q": "zebrafish"})
    assert response.status_code == 200
    assert response.json()["results"] == []


def test_emotional_tendencies_are_listed_newest_first_and_filtered():
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    day = dt.date(2026, 11, 20)
    EmotionalTendencyFactory(person=leo, day=day, mood="stressed", week_valence=-0.5, mood_since=day)
    EmotionalTendencyFactory(person=leo, day=day - dt.timedelta(days=1))
    EmotionalTendencyFactory(person=maya, day=day)
    EmotionalTendencyFactory(person=None, day=day, mood="low")
    client = operator_client()

    everything = client.get("/api/emotional-tendencies/").json()["results"]
    leos = client.get("/api/emotional-tendencies/", {"person": "leo", "notable": "true"}).json()["results"]
    overall = client.get("/api/emotional-tendencies/", {"overall": "true"}).json()["results"]
    since = client.get("/api/emotional-tendencies/", {"since": "2026-11-20"}).json()["results"]

    assert [(row["person"], row["day"]) for row in everything] == [
        ("leo", "2026-11-20"),
        ("maya", "2026-11-20"),
        (None, "2026-11-20"),
        ("leo", "2026-11-19"),
    ]
    assert [(row["mood"], row["mood_since"], row["week_valence"]) for row in leos] == [("stressed", "2026-11-20", -0.5)]
    assert [(row["person"], row["mood"]) for row in overall] == [(None, "low")]
    assert len(since) == 3


def test_a_person_token_sees_its_own_tendencies_only():
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    day = dt.date(2026, 11, 20)
    for person in (leo, maya, None):
        EmotionalTendencyFactory(person=person, day=day, mood="low")
    client = api_client(username="leo-app", scope="person", persons=[leo])

    mine = client.get("/api/emotional-tendencies/")
    overall = client.get("/api/emotional-tendencies/", {"overall": "true"})
    hers = client.get("/api/emotional-tendencies/", {"person": "maya"})

    assert [row["person"] for row in mine.json()["results"]] == ["leo"]
    assert overall.json()["results"] == []  # the overall rows mix everyone's anchors
    assert hers.status_code == 403
    assert "maya" in hers.json()["detail"]


def test_recall_as_of_answers_from_belief_history_and_refuses_far_off_moments():
    leo = PersonFactory(slug="leo")
    old, new, _ = belief_superseded(person=leo)
    client = operator_client()

    def held(as_of):
        return client.get("/api/recall/", {"q": "zodiac", "person": "leo", "types": "semantic", "as_of": as_of})

    assert [r["id"] for r in held("2026-11-20").json()["results"]] == [old.pk]
    assert [r["id"] for r in held("2026-11-25T21:00+08:00").json()["results"]] == [new.pk]
    for far in ("1899-12-31", "2200-01-01", "2200-01-01T00:00", "last week"):
        response = held(far)
        assert response.status_code == 400 and "as_of" in response.json(), far
    listed = client.get(f"/api/memories/{old.pk}/").json()
    assert listed["valid_to"] and listed["expired_reason"] == "contradiction: corrected"


# --- PATCH: correcting a memory -------------------------------------------------------------------


def test_correcting_a_memory_keeps_the_old_text_as_a_version_and_the_new_one_awaits_its_vector():
    leo = PersonFactory(slug="leo")
    memory = SemanticMemoryFactory(person=leo, content="Leo lives in Hangzhou", pinned=True)
    model = EmbeddingModel(name="test-model", dim=2)
    vectors_store(kind=ENTITY, model=model, rows=[VectorRow(memory.pk, [1, 0], person_id=leo.pk)])
    client = api_client(scope="agent", persons=[leo])

    response = client.patch(
        f"/api/memories/{memory.pk}/", {"content": "Leo lives in Shanghai", "reason": "he moved"}, format="json"
    )

    assert response.status_code == 200, response.json()
    corrected = response.json()
    assert corrected["id"] != memory.pk
    assert (corrected["content"], corrected["person"], corrected["pinned"]) == ("Leo lives in Shanghai", "leo", True)
    old = client.get(f"/api/memories/{memory.pk}/").json()
    assert (old["content"], old["status"]) == ("Leo lives in Hangzhou", "expired")
    assert old["superseded_by"] == corrected["id"]
    assert "he moved" in old["expired_reason"]
    versions = memory_versions(memory=SemanticMemory.objects.get(pk=corrected["id"]))
    assert [v.content for v in versions] == ["Leo lives in Hangzhou", "Leo lives in Shanghai"]
    assert embed_pending_count(model=model) == 1  # the new text, embedded by the next backfill
    searched = client.get("/api/memories/", {"q": "Shanghai"}).json()["results"]
    assert [m["id"] for m in searched] == [corrected["id"]]


def test_a_new_memory_type_alone_changes_the_memory_in_place():
    memory = SemanticMemoryFactory(content="Leo likes tea", memory_type="world")

    response = operator_client().patch(f"/api/memories/{memory.pk}/", {"memory_type": "preference"}, format="json")

    assert response.status_code == 200
    assert (response.json()["id"], response.json()["memory_type"]) == (memory.pk, "preference")
    assert SemanticMemory.objects.count() == 1


def test_a_correction_names_the_field_at_fault():
    memory = SemanticMemoryFactory(content="Leo likes tea")
    retired = SemanticMemoryFactory(content="Leo likes coffee", status=MemoryStatus.DEPRECATED)
    client = operator_client()

    def patch(pk, body):
        return client.patch(f"/api/memories/{pk}/", body, format="json")

    cases = {
        "content": patch(memory.pk, {"content": "   "}),
        "memory_type": patch(memory.pk, {"memory_type": "gossip"}),
        "status": patch(retired.pk, {"content": "Leo likes water"}),
        "title": patch(memory.pk, {"title": "x", "content": "Leo likes water"}),
    }
    empty = patch(memory.pk, {})

    for field, response in cases.items():
        assert response.status_code == 400 and field in response.json(), (field, response.json())
    assert empty.status_code == 400 and "content" in empty.json()
    assert SemanticMemory.objects.get(pk=memory.pk).content == "Leo likes tea"


def test_a_scoped_token_corrects_only_its_own_persons_memories():
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    mayas = SemanticMemoryFactory(person=maya, content="Maya likes cats")
    shared = SemanticMemoryFactory(person=None, content="The office is on floor 3")
    client = api_client(scope="agent", persons=[leo])

    other = client.patch(f"/api/memories/{mayas.pk}/", {"content": "Maya likes dogs"}, format="json")
    global_one = client.patch(f"/api/memories/{shared.pk}/", {"content": "The office is on floor 4"}, format="json")

    assert other.status_code == 404  # another person's memory is not even seen
    assert global_one.status_code == 403 and "operator" in global_one.json()["detail"]
    assert SemanticMemory.objects.filter(content__in=["Maya likes dogs", "The office is on floor 4"]).count() == 0


@pytest.mark.parametrize("zone", ["Asia/Shanghai", "America/Los_Angeles"])
def test_every_timestamp_in_output_is_in_the_configured_time_zone_with_its_offset(settings, zone):
    """One rule for output: ISO 8601 in ANIMA_TIME_ZONE with its offset, in the API's rows and in recall's hits."""
    settings.TIME_ZONE = zone
    leo = PersonFactory(slug="leo")
    talk = ConversationFactory(person=leo)
    MessageFactory(conversation=talk, content="我下个月搬去杭州", created_at=timezone.now() - dt.timedelta(days=3))
    client = operator_client()
    created = client.post(
        "/api/memories/", {"content": "Leo 下个月搬去杭州", "memory_type": "world", "person": "leo"}, format="json"
    ).json()
    row = client.get(f"/api/memories/{created['id']}/").json()
    hits = client.get("/api/recall/", {"q": "杭州", "types": "semantic,session", "person": "leo"}).json()["results"]

    stamps = [row["created_at"], row["valid_from"], row["body"]["observed_at"]]
    stamps += [hit[key] for hit in hits for key in ("created_at", "valid_from") if hit.get(key)]
    assert {hit["memory_type"] for hit in hits} == {"semantic", "session"}
    for stamp in stamps:
        moment = dt.datetime.fromisoformat(stamp)
        assert moment.utcoffset() == ZoneInfo(zone).utcoffset(moment.replace(tzinfo=None)), stamp
