"""Every model is browsable in the Habitat console: list, search, filters and change pages answer."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.db.models import JSONField
from django.urls import reverse
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anima.core.config import SCHEMA, config_defaults, config_get
from anima.core.models import AutoLlmRun, BlockTag, RuntimeConfig, RuntimeConfigChange
from tests.factories import (
    AutoLlmRunFactory,
    ContentBlockFactory,
    EmotionalTendencyFactory,
    HistoryEntryFactory,
    IdentityFactory,
    MemoryReferenceFactory,
    MessageFactory,
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
    EmotionalTendencyFactory(mood="low", shifts=[{"day": "2026-11-01", "valence": -0.5}])
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


ANIMA_APPS = {"anima", "conversations", "memory", "sleep", "temporal"}


@pytest.mark.usefixtures("one_of_everything")
def test_no_console_form_edits_stored_json_or_the_segmented_search_text(staff_client):
    """Bodies, payloads and the segmented text are written by code: shown rendered, never a form field."""
    MessageFactory(tool_payload={"name": "recall", "arguments": {"query": "杭州"}})
    checked = 0
    for model, _ in _registered():
        opts = model._meta
        obj = model._default_manager.first()
        if opts.app_label not in ANIMA_APPS or obj is None:
            continue
        response = staff_client.get(reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk]))
        forms = [response.context["adminform"].form] + [
            form for inline in response.context["inline_admin_formsets"] for form in inline.formset.forms
        ]
        for form in forms:
            editable = {name for name in form.fields if name not in form.Meta.model._meta.many_to_many}
            stored = {f.name for f in form.Meta.model._meta.fields if isinstance(f, JSONField)} | {"fts_segmented"}
            assert not editable & stored, (opts.label, sorted(editable & stored))
        checked += 1
    assert checked >= 10


def test_stored_json_reads_as_labelled_values(staff_client):
    memory = SemanticMemoryFactory(body={"observed_at": "2026-11-26T08:40:00+08:00", "tags": ["work", "tech"]})
    page = staff_client.get(reverse("admin:memory_semanticmemory_change", args=[memory.pk])).content.decode()
    assert "<dt>tags</dt><dd>work, tech</dd>" in page
    assert "<dt>search words</dt>" not in page  # a label of the row, not of the body
    assert "Search words:" in page


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


# --- Runtime config page (M11) ---

CONFIG_PAGE = reverse("admin:anima_runtimeconfig_changelist")


def _config_form(section: str, **overrides) -> dict:
    """What the page posts for ``section``: every effective value as text, checkboxes only when on."""
    data = {"section": section}
    for name, value in {**config_get(section=section), **overrides}.items():
        if value is True:
            data[name] = "on"
        elif value is not False:
            data[name] = str(value)
    return data


def test_config_page_shows_every_section_with_defaults(staff_client):
    page = staff_client.get(CONFIG_PAGE).content.decode()
    for section, fields in SCHEMA.items():
        assert f"<h2>{section}</h2>" in page
        for name, field in fields.items():
            assert f'name="{name}"' in page
            assert f"<code>{field.default}</code>" in page


def test_a_valid_edit_is_applied_and_recorded_with_who_and_what(staff_client):
    response = staff_client.post(
        CONFIG_PAGE, _config_form("memory.passive_recall", limit=7, exclude_resident=False), follow=True
    )
    assert config_get(section="memory.passive_recall")["limit"] == 7
    assert config_get(section="memory.passive_recall")["exclude_resident"] is False
    # Only what changed is stored: untouched settings keep following their code defaults.
    assert RuntimeConfig.objects.get(section="memory.passive_recall").values == {"limit": 7, "exclude_resident": False}
    change = RuntimeConfigChange.objects.get()
    assert (change.changed_by, change.before, change.after) == (
        "operator",
        {},
        {"limit": 7, "exclude_resident": False},
    )
    page = response.content.decode()
    assert "Saved memory.passive_recall: exclude_resident, limit." in page
    assert "operator" in page  # the section's change history


def test_a_bad_value_is_refused_naming_the_field_and_nothing_is_half_applied(staff_client):
    response = staff_client.post(CONFIG_PAGE, _config_form("memory.passive_recall", limit=99, min_score=0.5))
    assert response.status_code == 400
    page = response.content.decode()
    assert "limit: limit must be &lt;= 20" in page
    assert 'value="99"' in page  # the operator's input is shown back for correction
    assert config_get(section="memory.passive_recall") == config_defaults(section="memory.passive_recall")
    assert not RuntimeConfigChange.objects.exists()


@pytest.mark.parametrize("text", ["nan", "inf", "-Infinity", "0,5", ""])
def test_a_number_that_is_not_a_finite_number_is_refused(staff_client, text):
    response = staff_client.post(CONFIG_PAGE, {**_config_form("memory.passive_recall"), "min_score": text})
    assert response.status_code == 400 and "min_score" in response.content.decode()
    assert not RuntimeConfig.objects.exists()


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(text=st.text(max_size=40))
def test_free_text_in_a_number_field_is_applied_or_refused_never_an_error(staff_client, text):
    before = config_get(section="stm")
    response = staff_client.post(CONFIG_PAGE, {**_config_form("stm"), "max_summary_chars": text})
    after = config_get(section="stm")
    if response.status_code == 302:
        assert after["max_summary_chars"] == int(text.strip())
    else:
        assert response.status_code == 400 and "max_summary_chars" in response.content.decode()
        assert after == before


def test_raw_config_rows_cannot_be_edited_around_validation(staff_client):
    row = RuntimeConfigFactory(section="stm", values={"max_summary_chars": 1500})
    change = reverse("admin:anima_runtimeconfig_change", args=[row.pk])
    staff_client.post(change, {"section": "stm", "values": '{"max_summary_chars": -5}'})
    row.refresh_from_db()
    assert row.values == {"max_summary_chars": 1500}


def test_viewers_see_the_config_but_cannot_change_it(client):
    viewer = UserFactory(username="viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_runtimeconfig"))
    client.force_login(viewer)
    assert 'name="limit"' in client.get(CONFIG_PAGE).content.decode()
    assert client.post(CONFIG_PAGE, _config_form("memory.passive_recall", limit=7)).status_code == 403
    assert config_get(section="memory.passive_recall")["limit"] == 5


# --- LLM audit ---


def test_llm_audit_totals_tokens_per_day_and_per_purpose_following_filters(staff_client):
    day_one = timezone.make_aware(dt.datetime(2026, 7, 17, 23, 30))
    day_two = timezone.make_aware(dt.datetime(2026, 7, 18, 0, 30))
    for created_at, purpose, tokens, error in [
        (day_one, "light-sleep.semantic", 100, ""),
        (day_two, "light-sleep.semantic", 50, ""),
        (day_two, "deep-sleep.merge", 1000, "timeout"),
    ]:
        run = AutoLlmRunFactory(purpose=purpose, prompt_tokens=tokens - 10, completion_tokens=10, total_tokens=tokens)
        AutoLlmRun.objects.filter(pk=run.pk).update(created_at=created_at, error=error)
    url = reverse("admin:anima_autollmrun_changelist")
    totals = staff_client.get(url).context["token_totals"]
    assert [(row["day"], row["calls"], row["total_tokens"], row["errors"]) for row in totals["per_day"]] == [
        (dt.date(2026, 7, 18), 2, 1050, 1),
        (dt.date(2026, 7, 17), 1, 100, 0),
    ]
    assert [(row["purpose"], row["total_tokens"]) for row in totals["per_purpose"]] == [
        ("deep-sleep.merge", 1000),
        ("light-sleep.semantic", 150),
    ]
    filtered = staff_client.get(url, {"purpose": "light-sleep.semantic"}).context["token_totals"]
    assert [(row["purpose"], row["calls"], row["prompt_tokens"]) for row in filtered["per_purpose"]] == [
        ("light-sleep.semantic", 2, 130)
    ]
    page = staff_client.get(url).content.decode()
    assert 'id="tokens-per-day"' in page and 'id="tokens-per-purpose"' in page


def test_llm_audit_shows_prompt_and_response_readably(staff_client):
    payload = '{"day": "2026-11-26", "dialogue": "Leo: 我住在杭州\\nAnima: 好"}'
    run = AutoLlmRunFactory(
        prompt=[{"role": "system", "content": "# Self\n\n我是 Anima"}, {"role": "user", "content": payload}],
        response='{"facts": ["住在杭州"]}',
    )
    page = staff_client.get(reverse("admin:anima_autollmrun_change", args=[run.pk])).content.decode()
    # One block per message: text as written, a JSON payload pretty-printed (its line breaks real, not "\n").
    assert "<strong>system</strong><pre class='anima-json'># Self\n\n我是 Anima</pre>" in page
    assert "&quot;dialogue&quot;: &quot;Leo: 我住在杭州\\nAnima: 好&quot;" in page
    assert "<strong>user</strong><pre class='anima-json'>{\n  &quot;day&quot;: &quot;2026-11-26&quot;" in page
    assert "&quot;住在杭州&quot;" in page


def test_audit_rows_cannot_be_deleted_from_the_console(staff_client):
    run = AutoLlmRunFactory()
    response = staff_client.post(reverse("admin:anima_autollmrun_delete", args=[run.pk]), {"post": "yes"})
    assert response.status_code == 403
    assert type(run).objects.filter(pk=run.pk).exists()


def test_a_staff_user_without_permissions_cannot_touch_diary_blocks(client):
    client.force_login(UserFactory(username="viewer", is_staff=True))
    narrative = ContentBlockFactory(tag=BlockTag.NARRATIVE)
    assert client.get(reverse("admin:memory_contentblock_changelist")).status_code == 403
    client.post(reverse("admin:memory_contentblock_delete", args=[narrative.pk]), {"post": "yes"})
    assert type(narrative).objects.filter(pk=narrative.pk).exists()


def test_a_diary_day_cannot_be_deleted_from_the_console(staff_client):
    limbic = ContentBlockFactory(tag=BlockTag.LIMBIC)
    response = staff_client.post(reverse("admin:memory_diaryentry_delete", args=[limbic.parent_id]), {"post": "yes"})
    assert response.status_code == 403
    assert type(limbic).objects.filter(pk=limbic.pk).exists()


@pytest.mark.parametrize("term", ["²", "١٢", "#", "#12", "99999999999999999999999"])
def test_id_like_searches_answer_without_an_error(staff_client, term):
    response = staff_client.get(reverse("admin:memory_semanticmemory_changelist"), {"q": term})
    assert response.status_code == 200
