"""The emotional-imprint step: light sleep's anchors of a worry told on three days become one imprint, nightly."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from anima.core.llm.testing import scripted
from conversations.models import Platform, Role
from memory.imprints import imprints_of_person
from memory.models import LimbicBlock
from sleep.context import StepContext
from sleep.services import sleep_cycle_run
from sleep.steps import emotional_imprint, light_sleep
from tests.factories import ConversationFactory, MessageFactory

DAY = dt.date(2026, 11, 20)
WORRY_DAYS = [DAY - dt.timedelta(days=9), DAY - dt.timedelta(days=4), DAY]
EN = [
    "I'm so anxious about the job interview at the museum.",
    "Honestly I'm really worried the interview panel will ask about my gap year.",
    "The interview is this afternoon and I'm so anxious.",
]
ZH = [
    "下周的面试让我很焦虑，怕自己发挥不好。",
    "我真的很担心面试官会问我空档期的事。",
    "今天下午就面试了，我非常焦虑。",
]
QUIET_DAY = {"en": "We made pancakes and watched the rain.", "zh": "今天做了煎饼，看了一下午的雨。"}


def _ctx(day: dt.date) -> StepContext:
    return StepContext(run_id=0, day=day, mode="full", force=False, run_key="test", token_budget=None)


def _tell(person, day: dt.date, text: str) -> None:
    conversation = ConversationFactory(person=person, platform=Platform.WEB)
    noon = timezone.make_aware(dt.datetime.combine(day, dt.time(12)))
    MessageFactory(conversation=conversation, role=Role.USER, content=text, created_at=noon)
    MessageFactory(
        conversation=conversation, role=Role.ASSISTANT, content="I'm here.", created_at=noon + dt.timedelta(minutes=1)
    )


def _sleep_days(person, said: list[str], *, language: str) -> None:
    """Light sleep (offline) of each day: the worry on its three days, a quiet day between them."""
    quiet = DAY - dt.timedelta(days=6)
    _tell(person, quiet, QUIET_DAY[language])
    for day, text in zip(WORRY_DAYS, said, strict=True):
        _tell(person, day, text)
    for day in sorted([*WORRY_DAYS, quiet]):
        light_sleep(_ctx(day))


@pytest.mark.parametrize(("said", "language"), [(EN, "en"), (ZH, "zh")])
def test_a_worry_told_on_three_days_becomes_one_imprint_of_light_sleeps_anchors(leo, said, language):
    _sleep_days(leo, said, language=language)
    anchors = list(LimbicBlock.anchors.filter(person=leo).order_by("id"))
    worried = [a.pk for a in anchors if a.source_day in WORRY_DAYS]
    assert len(worried) == 3

    # Numbers and words only: a model configured or not is never asked.
    with scripted({}) as provider:
        output = emotional_imprint(_ctx(DAY))

    assert provider.calls == []
    [imprint] = imprints_of_person(person=leo)
    assert output["created"] == [imprint.pk]
    assert imprint.body["anchor_ids"] == worried
    assert imprint.body["days"] == [day.isoformat() for day in WORRY_DAYS]
    assert ("面试" in imprint.body["words"]) if language == "zh" else ("interview" in imprint.body["words"])
    strongest = LimbicBlock.objects.get(pk=imprint.body["strongest_anchor_id"])
    assert strongest.content in imprint.content


def test_the_same_worry_of_two_people_makes_two_imprints(leo, maya):
    _sleep_days(leo, EN, language="en")
    _sleep_days(maya, EN, language="en")

    emotional_imprint(_ctx(DAY))

    for person in (leo, maya):
        [imprint] = imprints_of_person(person=person)
        anchors = LimbicBlock.anchors.filter(pk__in=imprint.body["anchor_ids"])
        assert set(anchors.values_list("person", flat=True)) == {person.pk}
    assert LimbicBlock.imprints.count() == 2


def test_the_nightly_cycle_writes_the_imprint_after_light_sleep_and_a_rerun_adds_none(leo):
    quiet = DAY - dt.timedelta(days=6)
    _tell(leo, quiet, QUIET_DAY["en"])
    for day, text in zip(WORRY_DAYS, EN, strict=True):
        _tell(leo, day, text)
    for day in sorted([*WORRY_DAYS, quiet]):
        run = sleep_cycle_run(day=day)
        step = run.steps.get(step="emotional-imprint")
        assert step.status == "succeeded", step.error

    assert step.output["created"] == [imprint.pk for imprint in imprints_of_person(person=leo)]
    assert len(step.output["created"]) == 1

    again = sleep_cycle_run(day=DAY, force=True).steps.get(step="emotional-imprint")

    assert (again.status, again.output["created"], again.output["unchanged"]) == ("succeeded", [], 1)
    assert LimbicBlock.imprints.count() == 1
