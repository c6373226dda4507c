"""Imprints: strong feelings about one matter recurring on three days, one person's, append-only, forgettable."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import ProgrammingError, transaction
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anima.core.models import BlockTag, Entity, MemoryType
from anima.core.segmentation import text_traditional
from memory.admin import IMPRINTS_SECTION
from memory.forgetting import memory_forget, memory_forget_plan
from memory.forgetting_person import person_forget, person_forget_plan
from memory.imprints import (
    MIN_DAYS,
    MIN_INTENSITY,
    Moment,
    imprint_groups,
    imprints_of_person,
    imprints_refresh,
    matter_words,
)
from memory.models import LimbicBlock
from memory.mood import limbic_anchors
from memory.selectors import LIMBIC, memory_recall
from tests.factories import PersonFactory, SemanticMemoryFactory
from tests.memory.imprints import DAY, anchor, days_before

EN_INTERVIEW = [
    "I'm so anxious about my job interview on Friday.",
    "I keep worrying about the interview, what if they ask about my gap year.",
    "The interview is tomorrow and I'm scared I'll freeze.",
]
ZH_INTERVIEW = ["下周的面试让我很焦虑。", "面试越来越近了，我还是很紧张。", "明天就面试了，我害怕得睡不着。"]
EN_OTHER_MATTERS = [
    "I'm so anxious about paying the rent this month.",
    "I'm anxious about my sister's wedding speech.",
    "I'm anxious, Mom's surgery is next week.",
]
ZH_OTHER_MATTERS = ["房租这个月又涨了，我很焦虑。", "妈妈下周手术，我很焦虑。", "论文答辩快到了，我很焦虑。"]


def imprints() -> list[LimbicBlock]:
    return list(LimbicBlock.imprints.order_by("id"))


@pytest.mark.parametrize(
    ("segments", "language_mark"), [(EN_INTERVIEW, "This feeling keeps coming back"), (ZH_INTERVIEW, "这份感受")]
)
def test_a_worry_told_on_three_days_becomes_one_imprint_with_its_anchors(segments, language_mark):
    leo = PersonFactory(slug="leo", display_name="Leo")
    worried = [anchor(leo, day, segment) for day, segment in zip(days_before(3), segments, strict=True)]
    strongest = anchor(leo, DAY - dt.timedelta(days=1), segments[0], intensity=0.9)
    anchor(leo, DAY - dt.timedelta(days=2), "We watched a film." if segments is EN_INTERVIEW else "我们看了电影。")

    output = imprints_refresh(day=DAY)

    [imprint] = imprints()
    assert output["created"] == [imprint.pk]
    assert (imprint.tag, imprint.memory_type, imprint.person) == (BlockTag.LIMBIC, MemoryType.IMPRINT, leo)
    body = imprint.body
    assert body["anchor_ids"] == sorted(a.pk for a in [*worried, strongest])
    assert (body["first_day"], body["last_day"]) == (days_before(3)[0].isoformat(), DAY.isoformat())
    assert len(body["days"]) == 4
    assert body["valence"] < 0 and body["peak_intensity"] == 0.9
    # First person, in the anchors' language, made of the strongest anchor's own words.
    assert imprint.content.startswith(language_mark)
    assert strongest.content in imprint.content
    # Where limbic anchors live: under the diary entry of its last day.
    assert (imprint.parent.source_day, imprint.source_day) == (DAY, DAY)


@pytest.mark.parametrize("segments", [EN_INTERVIEW, ZH_INTERVIEW])
def test_two_days_make_no_imprint(segments):
    leo = PersonFactory(slug="leo", display_name="Leo")
    for day, segment in zip(days_before(2), segments[:2], strict=True):
        anchor(leo, day, segment)
    # The same day twice is still one day.
    anchor(leo, DAY, segments[2])

    assert imprints_refresh(day=DAY)["created"] == []
    assert imprints() == []


@pytest.mark.parametrize("segments", [EN_OTHER_MATTERS, ZH_OTHER_MATTERS])
def test_the_same_feeling_about_different_matters_is_no_imprint(segments):
    leo = PersonFactory(slug="leo", display_name="Leo")
    for day, segment in zip(days_before(3), segments, strict=True):
        anchor(leo, day, segment)

    imprints_refresh(day=DAY)

    assert imprints() == []


def test_weak_moments_and_the_opposite_feeling_do_not_count_towards_the_three_days():
    leo = PersonFactory(slug="leo", display_name="Leo")
    first, second, third = days_before(3)
    anchor(leo, first, EN_INTERVIEW[0])
    anchor(leo, second, EN_INTERVIEW[1], intensity=MIN_INTENSITY - 0.1)
    anchor(leo, third, "The interview went great, they loved my portfolio!", valence=0.8)

    imprints_refresh(day=DAY)

    assert imprints() == []


def test_anchors_outside_the_thirty_days_do_not_count():
    leo = PersonFactory(slug="leo", display_name="Leo")
    for day, segment in zip(days_before(3, step=15), EN_INTERVIEW, strict=True):
        anchor(leo, day, segment)

    imprints_refresh(day=DAY)

    assert imprints() == []


def test_two_people_with_the_same_worry_get_two_imprints_never_one():
    leo, maya = PersonFactory(slug="leo", display_name="Leo"), PersonFactory(slug="maya", display_name="Maya")
    theirs = {
        person: [anchor(person, day, segment) for day, segment in zip(days_before(3), EN_INTERVIEW, strict=True)]
        for person in (leo, maya)
    }

    imprints_refresh(day=DAY)

    assert sorted(i.person_id for i in imprints()) == sorted([leo.pk, maya.pk])
    for person, anchors in theirs.items():
        [imprint] = imprints_of_person(person=person)
        assert imprint.body["anchor_ids"] == sorted(a.pk for a in anchors)


def test_two_people_each_telling_it_on_fewer_days_make_nothing_together():
    leo, maya = PersonFactory(slug="leo", display_name="Leo"), PersonFactory(slug="maya", display_name="Maya")
    first, second, third = days_before(3)
    anchor(leo, first, EN_INTERVIEW[0])
    anchor(leo, second, EN_INTERVIEW[1])
    anchor(maya, third, EN_INTERVIEW[2])

    imprints_refresh(day=DAY)

    assert imprints() == []


def test_person_less_anchors_never_make_an_imprint():
    for day, segment in zip(days_before(3), EN_INTERVIEW, strict=True):
        anchor(None, day, segment)

    imprints_refresh(day=DAY)

    assert imprints() == []


def test_a_rerun_writes_nothing_and_a_grown_group_supersedes_the_earlier_imprint():
    leo = PersonFactory(slug="leo", display_name="Leo")
    for day, segment in zip(days_before(3), EN_INTERVIEW, strict=True):
        anchor(leo, day, segment)
    imprints_refresh(day=DAY)
    [first] = imprints()

    assert imprints_refresh(day=DAY) == {"day": DAY.isoformat(), "persons": 1, "created": [], "unchanged": 1}
    assert imprints() == [first]

    later = DAY + dt.timedelta(days=2)
    fourth = anchor(leo, later, "The interview got moved to Monday, more waiting.")
    imprints_refresh(day=later)
    # A night slept again afterwards (its window holds only the first three) writes nothing either.
    imprints_refresh(day=DAY)
    imprints_refresh(day=later)

    assert len(imprints()) == 2
    [current] = imprints_of_person(person=leo)
    assert current.pk != first.pk
    assert current.body["supersedes"] == [first.pk]
    assert current.body["anchor_ids"] == sorted([*first.body["anchor_ids"], fourth.pk])
    assert current.body["last_day"] == later.isoformat()


def test_an_imprint_is_append_only():
    leo = PersonFactory(slug="leo", display_name="Leo")
    for day, segment in zip(days_before(3), EN_INTERVIEW, strict=True):
        anchor(leo, day, segment)
    imprints_refresh(day=DAY)
    [imprint] = imprints()

    with pytest.raises(ProgrammingError, match="Cannot update or delete"), transaction.atomic():
        Entity.objects.filter(pk=imprint.pk).update(content="rewritten")
    with pytest.raises(ProgrammingError, match="Cannot update or delete"), transaction.atomic():
        Entity.objects.filter(pk=imprint.pk).delete()

    imprint.refresh_from_db()
    assert imprint.content != "rewritten"


def test_tendencies_and_the_days_feelings_read_anchors_not_imprints():
    leo = PersonFactory(slug="leo", display_name="Leo")
    anchors = [anchor(leo, day, segment) for day, segment in zip(days_before(3), EN_INTERVIEW, strict=True)]
    imprints_refresh(day=DAY)

    read = limbic_anchors(since=DAY - dt.timedelta(days=29), until=DAY, person=leo)

    assert imprints()
    assert [a.id for a in read] == [a.pk for a in anchors]


def test_forgetting_the_person_takes_their_imprint_and_leaves_the_others():
    leo, maya = PersonFactory(slug="leo", display_name="Leo"), PersonFactory(slug="maya", display_name="Maya")
    for person in (leo, maya):
        for day, segment in zip(days_before(3), EN_INTERVIEW, strict=True):
            anchor(person, day, segment)
    imprints_refresh(day=DAY)
    [leos] = imprints_of_person(person=leo)

    planned = {row.pk for row in person_forget_plan(person=leo).rows if row.action == "delete"}
    person_forget(person=leo)

    assert leos.pk in planned
    assert [i.person_id for i in imprints()] == [maya.pk]


def test_forgetting_a_fact_whose_anchor_goes_takes_the_imprint_made_of_it():
    leo = PersonFactory(slug="leo", display_name="Leo")
    fact = SemanticMemoryFactory(person=leo, content="Leo has a job interview at Northwind on Friday")
    first, second, third = days_before(3)
    cited = anchor(leo, first, "I have a job interview at Northwind on Friday.", facts=[fact.pk])
    anchor(leo, second, EN_INTERVIEW[1])
    anchor(leo, third, EN_INTERVIEW[2])
    imprints_refresh(day=DAY)
    [imprint] = imprints()
    assert imprint.body["semantic_memory_ids"] == [fact.pk]
    # The anchor's only sentence quotes the fact: the forget deletes it, and with it the imprint.

    planned = {row.pk for row in memory_forget_plan(memory=fact).rows if row.action == "delete"}
    tombstone = memory_forget(memory=fact)

    assert not LimbicBlock.objects.filter(pk=cited.pk).exists()
    assert imprint.pk in planned
    assert imprints() == []
    assert tombstone.counts["entities"]["deleted"] == 3  # the fact, its anchor, the imprint
    # The next night makes none again: two days are left.
    imprints_refresh(day=DAY)
    assert imprints() == []


def _moments(draw_rows) -> list[Moment]:
    return [
        Moment(
            id=i + 1,
            day=DAY - dt.timedelta(days=day),
            person_id=person,
            valence=valence,
            arousal=0.5,
            intensity=intensity,
            content=text,
            matter=text,
        )
        for i, (person, day, valence, intensity, text) in enumerate(draw_rows)
    ]


_WORDS = ["interview", "rent", "exam", "surgery", "anxious", "面试", "房租", "手术", "焦虑", "the", "我"]
_ROWS = st.lists(
    st.tuples(
        st.sampled_from([1, 2]),
        st.integers(min_value=0, max_value=29),
        st.sampled_from([-0.7, 0.0, 0.6]),
        st.sampled_from([0.3, 0.5, 0.8]),
        st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4).map(" ".join),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_ROWS)
def test_every_group_is_one_persons_strong_moments_of_one_sign_on_three_days_sharing_a_word(rows):
    moments = _moments(rows)
    by_person: dict[int, list[Moment]] = {}
    for moment in moments:
        by_person.setdefault(moment.person_id, []).append(moment)

    for person, theirs in by_person.items():
        for group in imprint_groups(theirs):
            assert {m.person_id for m in group.moments} == {person}
            assert all(m.intensity >= MIN_INTENSITY for m in group.moments)
            assert len({(m.valence > 0) - (m.valence < 0) for m in group.moments}) == 1
            assert all(m.valence != 0 for m in group.moments)
            assert len(group.days) >= MIN_DAYS
            for word in group.words:
                assert len({m.day for m in group.moments if word in matter_words(m.matter)}) >= MIN_DAYS
            assert all(matter_words(m.matter) & set(group.words) for m in group.moments)
    if len(by_person) > 1:
        with pytest.raises(ValueError):
            imprint_groups(moments)


@pytest.mark.parametrize(
    ("text", "names", "expected"),
    [
        ("I'm so anxious about Leo's job interviews!", ["Leo"], {"job", "interview"}),
        ("下周的面试让我很焦虑", [], {"面试"}),
        # A compound holds its dictionary parts; a compound jieba only guessed (今天下午) stands for them alone.
        ("今天下午见面试官，我很紧张", [], {"面试官", "面试"}),
        ("乐乐说：房租这个月又涨了，压力好大", ["乐乐"], {"房租"}),
        # A word of another script is one word: "café", not "caf" and "é".
        ("I'm nervous about the café opening", [], {"café", "opening"}),
    ],
)
def test_matter_words_leave_out_feelings_names_and_function_words(text, names, expected):
    assert matter_words(text, names=names) == expected
    # Written in traditional characters, the same matter (in simplified ones, as it is compared across days).
    assert matter_words(text_traditional(text), names=[text_traditional(name) for name in names]) == expected


def test_the_diary_day_shows_its_imprints_after_its_feelings_and_never_as_a_form(admin_client):
    leo = PersonFactory(slug="leo", display_name="Leo")
    for day, segment in zip(days_before(3), EN_INTERVIEW, strict=True):
        anchor(leo, day, segment)
    imprints_refresh(day=DAY)
    [imprint] = imprints()

    page = admin_client.get(reverse("admin:memory_diaryentry_change", args=[imprint.parent_id])).content.decode()
    listing = admin_client.get(reverse("admin:memory_contentblock_changelist"), {"memory_type": "imprint"})

    order = [page.index(text) for text in ("Feelings (", f"{IMPRINTS_SECTION} (1)", f'id="block-{imprint.pk}"')]
    assert order == sorted(order)
    assert [block.pk for block in listing.context["cl"].result_list] == [imprint.pk]
    change = admin_client.get(reverse("admin:memory_contentblock_change", args=[imprint.pk]))
    assert not change.context["has_change_permission"]


def test_recall_finds_a_persons_imprint_for_them_and_never_for_someone_else():
    leo, maya = PersonFactory(slug="leo", display_name="Leo"), PersonFactory(slug="maya", display_name="Maya")
    for day, segment in zip(days_before(3), EN_INTERVIEW, strict=True):
        anchor(leo, day, segment)
    imprints_refresh(day=DAY)
    [imprint] = imprints()

    def found(person) -> set[int]:
        # An unknown human (no person) is a user-facing caller: global memories only.
        hits = memory_recall(query="interview", memory_types=[LIMBIC], person=person, global_only=person is None)
        return {hit["id"] for hit in hits}

    assert imprint.pk in found(leo)
    assert found(maya) == set()
    assert found(None) == set()


def test_a_feeling_that_keeps_coming_back_past_the_thirty_days_stays_one_imprint_from_its_first_day():
    leo = PersonFactory(slug="leo", display_name="Leo")
    days = [DAY - dt.timedelta(days=offset) for offset in (45, 28, 18)]
    for day, segment in zip(days, EN_INTERVIEW, strict=True):
        anchor(leo, day, segment)
    imprints_refresh(day=days[-1])
    [first] = imprints()

    later = anchor(leo, DAY - dt.timedelta(days=5), "Another interview round, I'm so anxious.")
    imprints_refresh(day=DAY)  # its 30 days hold the last two of the first three, and the new one

    [current] = imprints_of_person(person=leo)
    assert current.body["supersedes"] == [first.pk]
    assert current.body["anchor_ids"] == sorted([*first.body["anchor_ids"], later.pk])
    assert (current.body["first_day"], len(current.body["days"])) == (days[0].isoformat(), 4)
    imprints_refresh(day=DAY)
    assert len(imprints()) == 2
