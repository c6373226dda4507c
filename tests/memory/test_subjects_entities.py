"""Entities as the API, MCP, console and export show them: one person's only, never a forgotten one."""

from __future__ import annotations

import pytest

from anima.api.testing import api_client, operator_client
from anima.core.models import MemoryStatus
from memory.forgetting import memory_forget
from memory.imprints import imprints_refresh
from memory.models import SemanticMemory, SubjectKind
from memory.subjects.entities import entities_markdown, entity_detail, entity_markdown, relationship_tree
from memory.workspace import workspace_export
from tests.factories import ConversationFactory, MessageFactory, PersonFactory
from tests.memory.imprints import DAY, anchor, days_before
from tests.memory.subjects import subject_built

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_families():
    leo, maya = PersonFactory(slug="leo", display_name="Leo"), PersonFactory(slug="maya", display_name="Maya")
    xiaoyu, xiaoyu_facts = subject_built(
        leo,
        relation="daughter",
        name="小雨",
        facts=["小雨在学钢琴", "小雨属虎"],
        aliases=("女儿",),
        intro="Leo 的女儿",
        stated=("activity", "zodiac"),
    )
    lily, lily_facts = subject_built(maya, relation="daughter", name="Lily", facts=["Lily plays the violin"])
    return leo, maya, xiaoyu, xiaoyu_facts, lily, lily_facts


def test_the_api_lists_a_persons_entities_and_one_by_key_or_alias(two_families):
    _leo, _, xiaoyu, facts, _, _ = two_families
    client = operator_client()

    listing = client.get("/api/persons/leo/entities/").json()
    one = client.get("/api/persons/leo/entities/女儿/").json()

    assert [(e["key"], e["name"], e["relation"], e["facts"]) for e in listing["entities"]] == [
        (xiaoyu.key, "小雨", "daughter", 2)
    ]
    assert listing["entities"][0]["profile"]["id"] == xiaoyu.profile_id
    assert one["entity"]["key"] == xiaoyu.key
    assert [(fact["id"], fact["states"]) for fact in one["entity"]["facts"]] == [
        (facts[0].pk, "activity"),
        (facts[1].pk, "zodiac"),
    ]
    assert client.get(f"/api/persons/leo/entities/{xiaoyu.key}/").json()["entity"]["name"] == "小雨"
    assert client.get("/api/persons/leo/entities/Lily/").status_code == 404
    assert client.get("/api/persons/nobody/entities/").status_code == 404


def test_a_scoped_token_reads_its_own_persons_entities_only(two_families):
    leo, _maya, *_ = two_families
    for client in (
        api_client(username="leo-agent", scope="agent", persons=[leo]),
        api_client(username="leo-app", scope="person", persons=[leo]),
    ):
        assert client.get("/api/persons/leo/entities/").status_code == 200
        refused = client.get("/api/persons/maya/entities/")
        assert refused.status_code == 403
        assert "Lily" not in refused.content.decode()
        assert client.get("/api/persons/maya/entities/Lily/").status_code == 403
    assert api_client(username="no-scope").get("/api/persons/leo/entities/").status_code == 403


def test_recall_over_the_api_asks_about_an_entity(two_families):
    leo, _, xiaoyu, _facts, _, _ = two_families
    client = api_client(username="leo-agent", scope="agent", persons=[leo])

    response = client.get("/api/recall/", {"entity": "闺女", "person": "leo"})
    unknown = client.get("/api/recall/", {"entity": "Lily", "person": "leo"})

    assert response.status_code == 200
    assert next(r["id"] for r in response.json()["results"]) == xiaoyu.profile_id
    assert unknown.status_code == 400 and "entity" in unknown.json()
    assert client.get("/api/recall/", {"person": "leo"}).status_code == 400  # neither q nor entity


def test_a_forgotten_subject_is_served_by_no_surface(two_families):
    leo, _, xiaoyu, facts, _, _ = two_families
    for fact in facts:
        memory_forget(memory=SemanticMemory.objects.get(pk=fact.pk), requested_by="test")

    assert operator_client().get("/api/persons/leo/entities/").json()["entities"] == []
    assert operator_client().get(f"/api/persons/leo/entities/{xiaoyu.key}/").status_code == 404
    assert "小雨" not in entities_markdown(person=leo)
    assert entity_markdown(person=leo, key="小雨") is None
    assert relationship_tree(person=leo) == []


def test_a_subject_whose_facts_expired_waits_for_the_night_unseen(two_families):
    _leo, _, xiaoyu, facts, _, _ = two_families
    SemanticMemory.objects.filter(pk__in=[f.pk for f in facts] + [xiaoyu.profile_id]).update(
        status=MemoryStatus.EXPIRED
    )
    assert operator_client().get("/api/persons/leo/entities/").json()["entities"] == []


def test_entity_pages_read_as_markdown_with_a_timeline(two_families):
    leo, *_ = two_families
    MessageFactory(conversation=ConversationFactory(person=leo), content="小雨今天钢琴考了满分")

    page = entity_markdown(person=leo, key="小雨")

    assert page.startswith("# 小雨 (daughter)\n")
    assert "Profile: " in page and "小雨在学钢琴" in page
    assert "(line) 小雨今天钢琴考了满分" in page
    assert "Lily" not in entities_markdown(person=leo)


def test_the_relationship_tree_nests_what_is_related_through_a_subject(two_families):
    leo, _, xiaoyu, *_ = two_families
    cat, _ = subject_built(leo, relation="cat", name="Mimi", kind=SubjectKind.PET, facts=["小雨的猫叫 Mimi"])
    cat.related_to = xiaoyu
    cat.save()
    _mum, _ = subject_built(leo, relation="mother", name="", facts=["Leo 的妈妈住在杭州"], profile=False)

    assert [(node.subject.label(), node.depth) for node in relationship_tree(person=leo)] == [
        ("小雨", 0),
        ("Mimi", 1),
        ("mother", 0),
    ]


def test_the_workspace_export_writes_each_persons_entities(two_families, tmp_path):
    _leo, _maya, xiaoyu, *_ = two_families

    workspace_export(root=tmp_path)

    leos = (tmp_path / "memory/persons/leo/entities.md").read_text(encoding="utf-8")
    assert "### 小雨 (daughter)" in leos and "小雨属虎" in leos and "Lily" not in leos
    assert "Lily plays the violin" in (tmp_path / "memory/persons/maya/entities.md").read_text(encoding="utf-8")
    # The profile is the entity's, not a fact of MEMORY.md (the night makes it again from the facts).
    assert f"{xiaoyu.profile.content}" not in (tmp_path / "memory/persons/leo/MEMORY.md").read_text(encoding="utf-8")


def test_the_console_shows_an_entity_page_and_a_persons_relationships(two_families, admin_client):
    leo, _, xiaoyu, facts, _lily, _ = two_families
    MessageFactory(conversation=ConversationFactory(person=leo), content="小雨今天钢琴考了满分")

    listing = admin_client.get("/admin/memory/subject/").content.decode()
    page = admin_client.get(f"/admin/memory/subject/{xiaoyu.pk}/change/").content.decode()
    tree = admin_client.get("/admin/memory/subject/relationships/leo/").content.decode()

    assert "小雨" in listing and "Lily" in listing
    assert 'id="entity-profile"' in page and xiaoyu.profile.content in page
    assert all(fact.content in page for fact in facts)
    assert '<span class="quiet">(zodiac)</span>' in page  # what the fact states of her
    assert "小雨今天钢琴考了满分" in page
    assert "Lily" not in page and "Lily" not in tree
    assert "小雨" in tree and "daughter" in tree


def test_an_entity_shows_the_imprints_about_it_and_no_other(two_families, admin_client):
    leo, maya, xiaoyu, *_ = two_families
    worries = ["小雨发烧了，我很担心。", "小雨还在咳嗽，我放心不下。", "小雨又不舒服了，我很焦虑。"]
    rent = ["房租这个月又涨了，我很焦虑。", "房租的事让我睡不着。", "又要交房租了，我很焦虑。"]
    for segments, person in ((worries, leo), (rent, leo), (["Lily was sick again, I'm so worried."] * 3, maya)):
        for day, segment in zip(days_before(3), segments, strict=True):
            anchor(person, day, segment)
    imprints_refresh(day=DAY)

    about_her = entity_detail(person=leo, key="小雨")["imprints"]

    assert len(about_her) == 1 and "小雨" in about_her[0]["content"]
    assert about_her[0]["first_day"] == days_before(3)[0].isoformat()
    assert all("Lily" not in imprint["content"] for imprint in about_her)
    page = admin_client.get(f"/admin/memory/subject/{xiaoyu.pk}/change/").content.decode()
    assert about_her[0]["content"][:20] in page and "房租" not in page
