"""Every model is browsable in the Habitat console: list, search, filters and change pages answer."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.urls import reverse

from anima.models import BlockTag
from tests.factories import (
    AutoLlmRunFactory,
    ContentBlockFactory,
    HistoryEntryFactory,
    IdentityFactory,
    MemoryReferenceFactory,
    PipelineStepRunFactory,
    RuntimeConfigFactory,
    SelfLayerBlockFactory,
    SemanticMemoryFactory,
    TemporalSummaryFactory,
    UserFactory,
)


@pytest.fixture
def staff_client(client):
    client.force_login(UserFactory(username="operator", is_staff=True, is_superuser=True))
    return client


@pytest.fixture
def one_of_everything():
    SemanticMemoryFactory(content="Leo 住在杭州")
    ContentBlockFactory(tag=BlockTag.LIMBIC, content="我感到安心")
    TemporalSummaryFactory()
    HistoryEntryFactory()
    IdentityFactory()
    MemoryReferenceFactory()
    SelfLayerBlockFactory()
    AutoLlmRunFactory()
    PipelineStepRunFactory()
    RuntimeConfigFactory()


def _registered():
    return [(model, model_admin) for model, model_admin in admin.site._registry.items()]


@pytest.mark.usefixtures("one_of_everything")
def test_every_changelist_and_change_page_answers(staff_client):
    for model, _ in _registered():
        opts = model._meta
        changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        assert staff_client.get(changelist).status_code == 200, changelist
        assert staff_client.get(changelist, {"q": "杭州"}).status_code == 200, changelist
        obj = model._default_manager.first()
        if obj is not None:
            change = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
            assert staff_client.get(change).status_code == 200, change


def test_search_finds_a_chinese_memory(staff_client):
    SemanticMemoryFactory(content="Leo 住在杭州")
    SemanticMemoryFactory(content="Maya lives in Lisbon")
    response = staff_client.get(reverse("admin:memory_semanticmemory_changelist"), {"q": "杭州"})
    assert "Leo 住在杭州" in response.content.decode()
    assert "Lisbon" not in response.content.decode()


def test_limbic_blocks_cannot_be_edited_or_deleted_from_the_console(staff_client):
    limbic = ContentBlockFactory(tag=BlockTag.LIMBIC, content="我感到安心")
    change = reverse("admin:memory_contentblock_change", args=[limbic.pk])
    page = staff_client.get(change).content.decode()
    assert 'name="content"' not in page
    assert (
        staff_client.post(reverse("admin:memory_contentblock_delete", args=[limbic.pk]), {"post": "yes"}).status_code
        == 403
    )


def test_anonymous_users_are_sent_to_login(client):
    response = client.get(reverse("admin:memory_semanticmemory_changelist"))
    assert response.status_code == 302 and "/login/" in response["Location"]
