"""The memories and diary pages of the Habitat console."""

from __future__ import annotations

import datetime as dt
from xml.etree import ElementTree

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anima.core.models import BlockTag, MemoryStatus, MemoryType
from conversations.models import Role
from memory.embedding import embed_backfill_run
from memory.models import DreamBlock, NarrativeBlock, SelfBlock, SemanticMemory
from memory.mood_chart import SPAN_MIN_DAYS, mood_chart_span
from memory.services import emotional_tendencies_refresh
from tests.factories import (
    ContentBlockFactory,
    ConversationFactory,
    DiaryEntryFactory,
    EmotionalTendencyFactory,
    LimbicAnchorFactory,
    MemoryReferenceFactory,
    MessageFactory,
    PersonFactory,
    SelfLayerBlockFactory,
    SemanticMemoryFactory,
)

CHANGELIST = reverse("admin:memory_semanticmemory_changelist")


def _listed_ids(response) -> list[int]:
    return [obj.pk for obj in response.context["cl"].result_list]


def _messages(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def test_search_box_uses_hybrid_retrieval_with_bigrams_and_ranking(admin_client):
    email = SemanticMemoryFactory(content="Leo 的邮箱是 leo@example.com")
    both = SemanticMemoryFactory(content="邮箱 密码 都存在 1Password 里，邮箱 是工作用的")
    SemanticMemoryFactory(content="Maya lives in Lisbon")
    # A question, not the stored wording: its bigrams find 「邮箱」 (icontains would find nothing).
    response = admin_client.get(CHANGELIST, {"q": "你的邮箱是啥？"})
    ids = _listed_ids(response)
    assert set(ids) == {email.pk, both.pk}


def test_search_keeps_ranking_order_unless_a_column_is_sorted(admin_client):
    # The better match is the older row: the default order (newest first) would list it second.
    strong = SemanticMemoryFactory(content="Leo 喜欢 Python 和 TypeScript 编程")
    weak = SemanticMemoryFactory(content="Python 是一门语言")
    ranked = _listed_ids(admin_client.get(CHANGELIST, {"q": "Leo 编程 Python"}))
    assert ranked == [strong.pk, weak.pk]
    by_id = _listed_ids(admin_client.get(CHANGELIST, {"q": "Leo 编程 Python", "o": "1"}))
    assert by_id == sorted([strong.pk, weak.pk])


def test_search_finds_retired_memories_too(admin_client):
    old = SemanticMemoryFactory(content="女儿属虎", status=MemoryStatus.EXPIRED, expired_reason="contradiction")
    assert _listed_ids(admin_client.get(CHANGELIST, {"q": "属虎"})) == [old.pk]


@pytest.mark.parametrize("embeddings", [False, pytest.param(True, marks=pytest.mark.local_embeddings)])
def test_search_lists_the_memories_held_now_before_the_versions_they_replaced(admin_client, embeddings):
    # The replaced version says it in more of the query's words: ranked alone it would come first.
    replaced = SemanticMemoryFactory(
        content="Maya: peanut allergy (a bad peanut allergy)", status=MemoryStatus.EXPIRED, expired_reason="superseded"
    )
    held = SemanticMemoryFactory(content="Maya has a peanut allergy")
    # A memory the query hardly matches stays below both, active or not.
    weak = SemanticMemoryFactory(content="A peanut butter sandwich, a bagel, a muffin, some juice and a long walk")
    embed_backfill_run()

    assert _listed_ids(admin_client.get(CHANGELIST, {"q": "peanut allergy"})) == [held.pk, replaced.pk, weak.pk]


def test_search_by_cited_id(admin_client):
    memory = SemanticMemoryFactory(content="nothing matches this text")
    assert memory.pk in _listed_ids(admin_client.get(CHANGELIST, {"q": f"#{memory.pk}"}))


def test_malformed_query_is_a_message_not_a_server_error(admin_client):
    SemanticMemoryFactory(content="Leo 住在杭州")
    response = admin_client.get(CHANGELIST, {"q": "杭州 AND"})
    assert response.status_code == 200
    assert _listed_ids(response) == []
    assert any("operator" in text for text in _messages(response))


def test_search_combines_with_filters(admin_client):
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    mine = SemanticMemoryFactory(content="喜欢杭州的西湖", person=leo, memory_type=MemoryType.PREFERENCE, pinned=True)
    SemanticMemoryFactory(content="喜欢杭州的龙井", person=maya, memory_type=MemoryType.PREFERENCE)
    SemanticMemoryFactory(content="杭州在浙江", person=leo, memory_type=MemoryType.WORLD)
    response = admin_client.get(
        CHANGELIST, {"q": "杭州", "person__id__exact": leo.pk, "memory_type__exact": "preference", "pinned__exact": "1"}
    )
    assert _listed_ids(response) == [mine.pk]


def test_filters_by_status_and_source_day(admin_client):
    day = dt.date(2026, 7, 18)
    kept = SemanticMemoryFactory(source_day=day, status=MemoryStatus.DEPRECATED)
    SemanticMemoryFactory(source_day=day)
    SemanticMemoryFactory(source_day=day + dt.timedelta(days=1), status=MemoryStatus.DEPRECATED)
    response = admin_client.get(
        CHANGELIST,
        {
            "status__exact": "deprecated",
            "source_day__gte": day.isoformat(),
            "source_day__lt": (day + dt.timedelta(days=1)).isoformat(),
        },
    )
    assert _listed_ids(response) == [kept.pk]


@pytest.mark.parametrize(
    ("action", "start", "expected", "verb"),
    [
        ("memory_pin", {"pinned": False}, {"pinned": True}, "Pinned 2 memories"),
        ("memory_unpin", {"pinned": True}, {"pinned": False}, "Unpinned 2 memories"),
        ("memory_deprecate", {}, {"status": MemoryStatus.DEPRECATED}, "Deprecated 2 memories"),
        (
            "memory_restore",
            {"status": MemoryStatus.EXPIRED, "expired_reason": "changed"},
            {"status": MemoryStatus.ACTIVE, "expired_reason": ""},
            "Restored 2 memories",
        ),
    ],
)
def test_actions_change_the_selected_memories_and_say_so(admin_client, action, start, expected, verb):
    chosen = SemanticMemoryFactory.create_batch(2, **start)
    untouched = SemanticMemoryFactory(**start)
    response = admin_client.post(
        CHANGELIST, {"action": action, "_selected_action": [m.pk for m in chosen]}, follow=True
    )
    assert any(verb in text for text in _messages(response))
    for memory in chosen:
        memory.refresh_from_db()
        assert {key: getattr(memory, key) for key in expected} == expected
    untouched.refresh_from_db()
    assert {key: getattr(untouched, key) for key in start} == start


def _change_form(memory: SemanticMemory, **changes) -> dict:
    data = {
        "content": memory.content,
        "memory_type": memory.memory_type,
        "status": memory.status,
        "person": memory.person_id or "",
        "expired_reason": memory.expired_reason,
        "superseded_by": memory.superseded_by_id or "",
        "source_conversation": memory.source_conversation_id or "",
        "source_channel": memory.source_channel,
        "source_day": memory.source_day.isoformat() if memory.source_day else "",
        "external_id": memory.external_id or "",
        "body": "{}",
    }
    if memory.pinned:
        data["pinned"] = "on"
    return {**data, **changes}


def test_editing_a_memory_re_segments_it_so_search_finds_the_new_text(admin_client):
    memory = SemanticMemoryFactory(content="Leo 住在上海")
    change = reverse("admin:memory_semanticmemory_change", args=[memory.pk])
    response = admin_client.post(change, _change_form(memory, content="Leo 搬到了杭州西湖边"))
    assert response.status_code == 302, response.content.decode()[:2000]
    memory.refresh_from_db()
    assert "杭州" in memory.fts_segmented.split()
    assert _listed_ids(admin_client.get(CHANGELIST, {"q": "杭州"})) == [memory.pk]
    assert _listed_ids(admin_client.get(CHANGELIST, {"q": "上海"})) == []


def test_change_page_shows_the_belief_timeline_and_the_citing_messages(admin_client):
    newest = SemanticMemoryFactory(content="现在更喜欢 TypeScript")
    middle = SemanticMemoryFactory(
        content="喜欢 Go", status=MemoryStatus.EXPIRED, superseded_by=newest, expired_reason="preference changed"
    )
    oldest = SemanticMemoryFactory(content="喜欢 Python", status=MemoryStatus.EXPIRED, superseded_by=middle)
    citing = MessageFactory(role=Role.ASSISTANT, content=f"你现在用 Go 吗？[[anima:{middle.pk}]]")
    MemoryReferenceFactory(entity=middle, message=citing)
    page = admin_client.get(reverse("admin:memory_semanticmemory_change", args=[middle.pk])).content.decode()
    assert f"#{oldest.pk}</a> [expired] 喜欢 Python" in page
    assert f"#{newest.pk}</a> [active] 现在更喜欢 TypeScript" in page
    assert reverse("admin:conversations_message_change", args=[citing.pk]) in page
    assert "你现在用 Go 吗？" in page
    # The chain is followed transitively from either end.
    newest_page = admin_client.get(reverse("admin:memory_semanticmemory_change", args=[newest.pk])).content.decode()
    assert f"#{middle.pk}</a> [expired] 喜欢 Go — preference changed" in newest_page
    assert f"#{oldest.pk}</a> [expired] 喜欢 Python" in newest_page
    assert "not cited yet" in newest_page


def test_the_timeline_names_why_a_version_ended_once_and_where_it_was_said(admin_client):
    talk = ConversationFactory(title="SDK 选型")
    newest = SemanticMemoryFactory(content="Leo 现在更喜欢 TypeScript", source_conversation=talk)
    old = SemanticMemoryFactory(
        content="Leo 喜欢 Python", status=MemoryStatus.EXPIRED, superseded_by=newest, expired_reason="changed"
    )
    page = admin_client.get(reverse("admin:memory_semanticmemory_change", args=[old.pk])).content.decode()
    url = reverse("admin:conversations_conversation_change", args=[talk.pk])
    assert f"Leo 喜欢 Python — changed, in <a href='{url}'>SDK 选型</a>" in page
    assert "changed · changed in" not in page


def test_a_fact_page_links_every_other_conversation_it_was_said_in(admin_client):
    told, restated, later = (
        ConversationFactory(title="饮食"),
        ConversationFactory(title="午饭"),
        ConversationFactory(title="晚饭"),
    )
    fact = SemanticMemoryFactory(
        content="Maya 对花生过敏",
        source_conversation=told,
        body={"source_conversations": [told.pk, restated.pk, later.pk]},
    )
    page = admin_client.get(reverse("admin:memory_semanticmemory_change", args=[fact.pk])).content.decode()
    links = [f"<a href='{reverse('admin:conversations_conversation_change', args=[c.pk])}'>" for c in (restated, later)]
    assert f"{links[0]}午饭</a>, {links[1]}晚饭</a>" in page
    said_once = SemanticMemoryFactory(content="Maya 住在里斯本", source_conversation=told)
    page = admin_client.get(reverse("admin:memory_semanticmemory_change", args=[said_once.pk])).content.decode()
    assert "午饭" not in page and "晚饭" not in page


def test_diary_day_shows_its_blocks_with_limbic_read_only(admin_client):
    day = DiaryEntryFactory(source_day=dt.date(2026, 7, 18))
    ContentBlockFactory(parent=day, tag=BlockTag.LIMBIC, content="我感到安心", body={"valence": 0.6})
    narrative = ContentBlockFactory(parent=day, tag=BlockTag.NARRATIVE, content="今天和 Leo 聊到了杭州")
    ContentBlockFactory(parent=day, tag=BlockTag.DREAM, content="我梦见一片湖")
    listed = admin_client.get(reverse("admin:memory_diaryentry_changelist")).context["cl"].result_list
    assert [(d.limbic_blocks, d.narrative_blocks, d.dream_blocks) for d in listed] == [(1, 1, 1)]
    change = reverse("admin:memory_diaryentry_change", args=[day.pk])
    response = admin_client.get(change)
    page = response.content.decode()
    for text in ("我感到安心", "今天和 Leo 聊到了杭州", "我梦见一片湖", "valence +0.60"):
        assert text in page
    # Read as sections, in the diary's order, not as JSON.
    order = [page.index(text) for text in ('id="diary-day"', "Feelings (", "Narratives (1)", "Dream (1)")]
    assert order == sorted(order)
    assert "&quot;valence&quot;" not in page
    formsets = {inline.formset.model: inline.formset for inline in response.context["inline_admin_formsets"]}
    assert set(formsets) == {NarrativeBlock, DreamBlock}  # limbic blocks are never a form
    assert "content" in formsets[NarrativeBlock].forms[0].fields
    assert "body" not in formsets[NarrativeBlock].forms[0].fields
    # Editing the narrative in place saves it; the limbic block is left untouched by the same save.
    data = {"source_day": "2026-07-18", "title": day.title}
    for formset in formsets.values():
        prefix = formset.prefix
        data.update(
            {
                f"{prefix}-TOTAL_FORMS": str(formset.total_form_count()),
                f"{prefix}-INITIAL_FORMS": str(formset.initial_form_count()),
            }
        )
        for index, form in enumerate(formset.forms):
            data[f"{prefix}-{index}-id"] = form.instance.pk
            data[f"{prefix}-{index}-parent"] = day.pk
            if "content" in form.fields:
                data[f"{prefix}-{index}-title"] = form.instance.title
                data[f"{prefix}-{index}-content"] = form.instance.content
    data[f"{formsets[NarrativeBlock].prefix}-0-content"] = "今天和 Leo 聊到了西湖"
    response = admin_client.post(change, data)
    assert response.status_code == 302, response.content.decode()[:3000]
    narrative.refresh_from_db()
    assert narrative.content == "今天和 Leo 聊到了西湖"


def test_a_locked_self_layer_block_is_edited_only_after_an_explicit_unlock(admin_client):
    anchor = SelfLayerBlockFactory(key=SelfBlock.EXISTENCE_ANCHOR, content="我是 Anima", locked=True)
    change = reverse("admin:memory_selflayerblock_change", args=[anchor.pk])
    assert 'name="content"' not in admin_client.get(change).content.decode()
    admin_client.post(change, {"content": "我是别的东西", "locked": "on"})
    anchor.refresh_from_db()
    assert anchor.content == "我是 Anima"
    admin_client.post(change, {})  # unlock
    anchor.refresh_from_db()
    assert not anchor.locked
    admin_client.post(change, {"content": "我是 Anima，一个会记得的同伴"})
    anchor.refresh_from_db()
    assert anchor.content == "我是 Anima，一个会记得的同伴"


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(text=st.one_of(st.text(max_size=60), st.from_regex(r"#?[0-9]{1,30}", fullmatch=True)))
def test_any_search_text_answers_without_a_server_error(admin_client, text):
    assert admin_client.get(CHANGELIST, {"q": text}).status_code == 200


SVG = "{http://www.w3.org/2000/svg}"


def test_the_mood_chart_draws_a_persons_days_with_their_anchors_one_click_away(admin_client):
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    today = timezone.localdate()
    for back in range(1, 11):
        LimbicAnchorFactory(person=leo, day=today - dt.timedelta(days=back), valence=0.5, content=f"I feel calm {back}")
    LimbicAnchorFactory(person=leo, day=today - dt.timedelta(days=1), valence=-0.9, content="I feel Leo's dread")
    LimbicAnchorFactory(person=maya, day=today - dt.timedelta(days=2), valence=-0.5, content="I feel maya's worry")
    emotional_tendencies_refresh(day=today - dt.timedelta(days=1))
    EmotionalTendencyFactory(person=leo, day=today - dt.timedelta(days=3), mood="stressed")

    page = admin_client.get(reverse("admin:memory_emotionaltendency_chart"), {"person": "leo"})

    assert page.status_code == 200
    svg = ElementTree.fromstring(str(page.context["chart"]))  # well-formed SVG
    dots = {(a.get("data-day"), a.get("data-dimension")): a.get("href") for a in svg.iter(f"{SVG}a")}
    assert len(dots) == 20  # ten days, valence and arousal
    (notable,) = svg.iter(f"{SVG}rect")
    assert notable.find(f"{SVG}title").text.endswith("was more stressed than usual")
    titles = {(a.get("data-day"), a.get("data-dimension")): a.find(f"{SVG}title").text for a in svg.iter(f"{SVG}a")}
    # Maya's worried day is not Leo's: his dot of that day stays where his own anchor put it.
    two_days_ago = (today - dt.timedelta(days=2)).isoformat()
    assert titles[(two_days_ago, "valence")] == f"{two_days_ago}: valence +0.50, 1 anchor"
    both = admin_client.get(dots[((today - dt.timedelta(days=1)).isoformat(), "valence")])
    one = admin_client.get(dots[((today - dt.timedelta(days=5)).isoformat(), "arousal")])
    assert both.status_code == one.status_code == 200
    assert b"I feel Leo&#x27;s dread" in both.content and b"I feel calm 1" in both.content
    assert b"I feel calm 2" not in both.content
    assert b"I feel calm 5" in one.content
    # The stored 7-day means are drawn too, and the overall chart includes Maya's day.
    assert page.context["latest"].person == leo
    everyone = admin_client.get(reverse("admin:memory_emotionaltendency_chart"))
    assert len(list(ElementTree.fromstring(str(everyone.context["chart"])).iter(f"{SVG}a"))) == 20


def test_the_mood_chart_refuses_unknown_persons_and_clamps_the_span(admin_client):
    url = reverse("admin:memory_emotionaltendency_chart")

    assert admin_client.get(url, {"person": "nobody"}).status_code == 404
    assert admin_client.get(url, {"days": "100000"}).context["days"] == 60
    assert admin_client.get(url, {"days": "1"}).context["days"] == 7
    assert admin_client.get(url, {"days": "400"}).context["days"] == 366


def test_a_few_days_of_data_in_a_long_window_are_drawn_across_the_chart_not_against_its_edge(admin_client):
    leo = PersonFactory(slug="leo")
    today = timezone.localdate()
    for back in (8, 7, 6):  # three days, a week ago, in a 90-day window
        LimbicAnchorFactory(person=leo, day=today - dt.timedelta(days=back), valence=0.3 * (back - 7))

    page = admin_client.get(reverse("admin:memory_emotionaltendency_chart"), {"person": "leo", "days": "90"})

    svg = ElementTree.fromstring(str(page.context["chart"]))
    xs = sorted({float(a.find(f"{SVG}circle").get("cx")) for a in svg.iter(f"{SVG}a")})
    width = float(svg.get("width"))
    assert len(xs) == 3
    assert xs[-1] - xs[0] > width / 4  # spread out: before, all three sat within 2% of the width
    # A day of margin each side, then widened to a week, both ways.
    assert (page.context["shown_since"], page.context["shown_until"]) == (
        today - dt.timedelta(days=10),
        today - dt.timedelta(days=4),
    )
    assert "nothing after" in page.content.decode()


@pytest.mark.parametrize("offsets", [[], [0], [5, 3], [89], list(range(0, 90, 7))])
def test_the_chart_span_holds_the_data_and_stays_within_the_window(offsets):
    until = dt.date(2026, 12, 4)
    since = until - dt.timedelta(days=89)
    days = [until - dt.timedelta(days=offset) for offset in offsets]
    start, end = mood_chart_span(since=since, until=until, days=days)
    assert since <= start <= end <= until
    assert all(start <= day <= end for day in days)
    assert (end - start).days >= min(SPAN_MIN_DAYS, 89)
