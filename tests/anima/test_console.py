"""The Habitat home page: what is stored, last night's run, the week's mood and what needs attention."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from anima.core.models import BlockTag, MemoryStatus, MemoryType
from memory.models import SemanticMemory
from memory.services import memory_deprecate, memory_expire
from memory.subjects import PROFILE_KEY
from sleep.models import RunStatus, StepStatus
from tests.factories import (
    ContentBlockFactory,
    ConversationFactory,
    EmotionalTendencyFactory,
    MessageFactory,
    PersonFactory,
    PipelineRunFactory,
    PipelineStepRunFactory,
    SemanticMemoryFactory,
    TemporalSummaryFactory,
    UserFactory,
)

HOME = "/admin/"


def _night(*, day: dt.date, started: dt.datetime, minutes: int = 10, **fields):
    return PipelineRunFactory(
        day=day,
        status=RunStatus.SUCCEEDED,
        started_at=started,
        finished_at=started + dt.timedelta(minutes=minutes),
        options={"step": None, "force": False},
        **fields,
    )


@pytest.fixture
def superuser_client(client):
    client.force_login(UserFactory(username="root", is_staff=True, is_superuser=True))
    return client


def test_home_counts_what_is_stored(superuser_client):
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    talk = ConversationFactory(person=leo)
    ConversationFactory(person=maya)
    for _ in range(3):
        MessageFactory(conversation=talk)
    active = [SemanticMemoryFactory(person=leo) for _ in range(4)]
    memory_deprecate(memory=active[0])
    ContentBlockFactory(tag=BlockTag.LIMBIC, body={"valence": 0.2})
    ContentBlockFactory(tag=BlockTag.NARRATIVE)
    ContentBlockFactory(tag=BlockTag.NARRATIVE)
    TemporalSummaryFactory()

    home = superuser_client.get(HOME).context["home"]

    assert (home.persons, home.conversations, home.messages) == (2, 2, 3)
    counts = {count.kind: (count.total, count.detail) for count in home.memories}
    assert counts["semantic memories"] == (4, "1 retired")
    assert counts["limbic blocks"][0] == 1 and counts["narrative blocks"][0] == 2 and counts["dream blocks"][0] == 0
    assert counts["diary days"][0] == 3  # each block above hangs under a day of its own
    assert counts["time summaries"][0] == 1
    assert home.embeddings.pending is None and "keyword-only" in home.embeddings.reason  # tests run with it off


def test_home_shows_last_nights_run_with_the_latest_attempt_of_each_step(superuser_client):
    now = timezone.now()
    older = _night(day=timezone.localdate() - dt.timedelta(days=2), started=now - dt.timedelta(days=1, hours=2))
    PipelineStepRunFactory(run=older, step="light-sleep", status=StepStatus.SUCCEEDED)
    night = _night(day=timezone.localdate() - dt.timedelta(days=1), started=now - dt.timedelta(hours=2))
    PipelineStepRunFactory(run=night, step="conversation-cleanup", status=StepStatus.SUCCEEDED)
    PipelineStepRunFactory(run=night, step="light-sleep", status=StepStatus.FAILED, attempt=1, error="boom")
    PipelineStepRunFactory(run=night, step="deep-sleep", status=StepStatus.SKIPPED)
    PipelineStepRunFactory(run=night, step="light-sleep", status=StepStatus.SUCCEEDED, attempt=2)
    # A single step run from the Sleep page afterwards is not a night.
    PipelineRunFactory(status=RunStatus.SUCCEEDED, started_at=now - dt.timedelta(minutes=5), options={"step": "dream"})

    response = superuser_client.get(HOME)

    last = response.context["home"].last_night
    assert last.run == night
    assert [(s.step, s.status, s.attempt) for s in last.steps] == [
        ("conversation-cleanup", "succeeded", 1),
        ("deep-sleep", "skipped", 1),
        ("light-sleep", "succeeded", 2),
    ]
    page = response.content.decode()
    assert 'data-step="deep-sleep" data-status="skipped"' in page


def test_attention_lists_unresolved_failed_steps_and_facts_retired_last_night(superuser_client):
    now = timezone.now()
    yesterday = timezone.localdate() - dt.timedelta(days=1)
    night = _night(day=yesterday, started=now - dt.timedelta(hours=3), minutes=30)
    broken = PipelineStepRunFactory(run=night, step="dream", status=StepStatus.FAILED, error="LLM said no")
    retried = PipelineStepRunFactory(run=night, step="light-sleep", status=StepStatus.FAILED, error="timeout")
    retry = PipelineRunFactory(day=yesterday, status=RunStatus.SUCCEEDED, options={"step": "light-sleep"})
    PipelineStepRunFactory(run=retry, step="light-sleep", status=StepStatus.SUCCEEDED)
    ancient = _night(day=yesterday - dt.timedelta(days=20), started=now - dt.timedelta(days=20))
    PipelineStepRunFactory(run=ancient, step="deep-sleep", status=StepStatus.FAILED)

    leo = PersonFactory(slug="leo")
    old, new = SemanticMemoryFactory(person=leo, content="Leo 喜欢 Python"), SemanticMemoryFactory(person=leo)
    kept_earlier = SemanticMemoryFactory(person=leo)
    memory_deprecate(memory=kept_earlier)
    SemanticMemory.objects.filter(pk=kept_earlier.pk).update(updated_at=now - dt.timedelta(days=2))
    memory_expire(memory=old, reason="changed", superseded_by=new)
    # A subject's profile the night wrote anew (its facts changed): nothing to review.
    profile = SemanticMemoryFactory(person=leo, memory_type=MemoryType.OBSERVATION, body={PROFILE_KEY: {"lines": []}})
    memory_expire(memory=profile, reason="corrected to #0: its facts changed", superseded_by=new)
    # Retired while the night ran (its sleep step wrote it then).
    during = now - dt.timedelta(hours=2, minutes=50)
    SemanticMemory.objects.filter(pk__in=[old.pk, profile.pk]).update(updated_at=during)

    response = superuser_client.get(HOME)

    home = response.context["home"]
    assert [step.pk for step in home.failed_steps] == [broken.pk]
    assert retried.pk not in [step.pk for step in home.failed_steps]
    assert [(m.pk, m.status) for m in home.retired] == [(old.pk, MemoryStatus.EXPIRED)] and home.retired_total == 1
    page = response.content.decode()
    assert "LLM said no" in page and "Leo 喜欢 Python" in page and "changed" in page


def test_home_says_when_nothing_needs_attention(superuser_client):
    page = superuser_client.get(HOME).content.decode()
    assert "Nothing: no failed step in the last week" in page
    assert "No night has been slept yet" in page


@pytest.mark.parametrize(("app", "model"), [("memory", "Semantic memories"), ("temporal", "Temporal summar")])
def test_an_apps_page_lists_its_models_not_the_homes_figures(superuser_client, app, model):
    # The breadcrumb of every change list leads here ("Home › Memory").
    page = superuser_client.get(f"{HOME}{app}/").content.decode()

    assert model in page
    assert "No night has been slept yet" not in page
    assert "have permission to view or edit anything" not in page


def test_the_weeks_mood_is_each_persons_latest_tendency_with_everyone_first(superuser_client):
    today = timezone.localdate()
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    EmotionalTendencyFactory(person=leo, day=today - dt.timedelta(days=2), week_valence=0.1)
    EmotionalTendencyFactory(person=leo, day=today - dt.timedelta(days=1), mood="stressed", week_valence=-0.4)
    EmotionalTendencyFactory(person=maya, day=today - dt.timedelta(days=30), mood="low")  # not this week
    EmotionalTendencyFactory(person=None, day=today - dt.timedelta(days=1))

    response = superuser_client.get(HOME)

    moods = response.context["home"].moods
    assert [(m.person and m.person.slug, m.day) for m in moods] == [
        (None, today - dt.timedelta(days=1)),
        ("leo", today - dt.timedelta(days=1)),
    ]
    assert "More stressed than usual" in response.content.decode()


def test_framework_internals_are_for_superusers_only_in_a_collapsed_section(client, superuser_client):
    page = superuser_client.get(HOME).content.decode()
    system = page.split('id="system-apps"')[1]
    assert "<details" in system and "Periodic tasks" in system and "Groups" in system
    assert "Periodic tasks" not in page.split('id="system-apps"')[0]

    operator = UserFactory(username="operator", is_staff=True)
    operator.user_permissions.set(
        Permission.objects.filter(codename__in=["view_periodictask", "view_group", "view_semanticmemory"])
    )
    client.force_login(operator)
    page = client.get(HOME).content.decode()
    assert "Semantic memories" in page
    assert "Periodic tasks" not in page and "Groups" not in page and 'id="system-apps"' not in page
    assert client.get(reverse("admin:app_list", args=["django_celery_beat"])).status_code == 404


def test_view_site_opens_the_api_docs(superuser_client):
    page = superuser_client.get(HOME).content.decode()
    assert '<a href="/api/docs/">' in page
    assert superuser_client.get("/api/docs/").status_code == 200


def test_a_staff_user_sees_only_the_rows_they_may_view(client):
    night = _night(day=timezone.localdate() - dt.timedelta(days=1), started=timezone.now() - dt.timedelta(hours=1))
    PipelineStepRunFactory(run=night, step="dream", status=StepStatus.FAILED, error="boom")
    memory = SemanticMemoryFactory(content="Leo 的邮箱是 leo@example.com")
    memory_deprecate(memory=memory)
    EmotionalTendencyFactory(person=PersonFactory(slug="leo"), day=timezone.localdate(), mood="low")
    viewer = UserFactory(username="viewer", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename="view_conversation"))
    client.force_login(viewer)

    response = client.get(HOME)

    home = response.context["home"]
    assert (home.last_night, home.failed_steps, home.retired, home.moods) == (None, [], [], [])
    assert home.persons == 2  # counts are for every operator (the memory's person and Leo)
    page = response.content.decode()
    assert "leo@example.com" not in page and "boom" not in page
