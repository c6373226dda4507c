"""Forgetting reaches everything derived: the cascade, the tombstone, the audited path past append-only rows."""

from __future__ import annotations

import datetime as dt
import json
import zoneinfo
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token

from anima.agent.tools import ToolError, tool_call
from anima.agent.turn import prepare_turn, system_prompt_ensure
from anima.api.testing import api_client, api_token, operator_client
from anima.core.models import AutoLlmRun, BlockTag, Entity, ForgetTombstone, MemoryStatus
from conversations.models import Conversation, HistoryEntry, Message, PeerBlock, Person, Role
from memory.embedding import embed_backfill_run
from memory.forgetting import memory_forget, memory_forget_plan
from memory.forgetting_person import person_forget, person_forget_plan
from memory.models import EmotionalTendency, SemanticMemory
from memory.selectors import memory_recall
from memory.services import MemoryPart, emotional_tendencies_refresh, memory_merge, memory_split
from sleep.services import sleep_cycle_run
from temporal.models import TemporalSummary, Window
from temporal.services import temporal_summary_upsert
from tests.factories import (
    ContentBlockFactory,
    ConversationFactory,
    EmotionalTendencyFactory,
    HistoryEntryFactory,
    IdentityFactory,
    LimbicAnchorFactory,
    MessageFactory,
    PeerBlockFactory,
    PersonFactory,
    SemanticMemoryFactory,
)

TZ = zoneinfo.ZoneInfo("Asia/Shanghai")
NIGHTS = (dt.date(2026, 11, 18), dt.date(2026, 11, 19))
SAID = (
    "I'm allergic to quinoa flakes and sesame seeds. I feel anxious about the dinner party.",
    "I'm allergic to quinoa flakes. I'm so happy the dinner went well!",
)


def traces(*needles: str) -> list[tuple[str, str, int]]:
    """(table, column, rows) holding any needle: every text, JSON, tsvector and array column of every table."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND data_type IN ('text', 'character varying', 'json', 'jsonb', 'tsvector', 'ARRAY')"
        )
        columns = cursor.fetchall()
        found = []
        for table, column in columns:
            cursor.execute(
                f'SELECT count(*) FROM "{table}" WHERE "{column}"::text ILIKE ANY(%s)', [[f"%{n}%" for n in needles]]
            )
            (rows,) = cursor.fetchone()
            if rows:
                found.append((table, column, rows))
    return found


def _two_nights(maya: Person) -> Conversation:
    conversation = ConversationFactory(person=maya, channel="cli", chat_id="maya")
    for day, text in zip(NIGHTS, SAID, strict=True):
        at = dt.datetime.combine(day, dt.time(12), tzinfo=TZ)
        MessageFactory(conversation=conversation, role=Role.USER, content=text, created_at=at)
        MessageFactory(
            conversation=conversation,
            role=Role.ASSISTANT,
            content="Noted, I will keep that in mind.",
            created_at=at + dt.timedelta(minutes=1),
        )
    for day in NIGHTS:
        assert sleep_cycle_run(day=day, mode="full").status == "succeeded"
    return conversation


def test_a_fact_consolidated_summarised_and_merged_over_two_nights_is_found_nowhere_once_forgotten(tmp_path):
    maya = PersonFactory(slug="maya", display_name="Maya")
    conversation = _two_nights(maya)
    merged = SemanticMemory.objects.get(status=MemoryStatus.ACTIVE, body__merged_from__isnull=False)
    assert "quinoa" in merged.content
    conversation.refresh_from_db()
    conversation.temporal_day = {"chunks": [{"summary": "Maya is allergic to quinoa flakes.", "topic": "diet"}]}
    conversation.save(update_fields=["temporal_day"])
    PeerBlockFactory(conversation=ConversationFactory(), content="Elsewhere: Maya is allergic to quinoa flakes.")
    HistoryEntryFactory(person=maya, content="Maya told me she is allergic to quinoa flakes and sesame seeds.")
    system_prompt_ensure(conversation=conversation, now=timezone.now())
    assert traces("quinoa")  # everywhere before: memories, diary, summaries, LLM audit, step outputs …

    tombstone = memory_forget(memory=merged, messages=True, requested_by="maya")

    assert traces("quinoa", "sesame") == []
    # No recall surface, no prompt, no export.
    assert memory_recall(query="quinoa OR sesame OR allergic") == []
    client = operator_client()
    for url in ("/api/memories/?status=expired", "/api/diary/", "/api/temporal-summaries/", "/api/history/?q=allergic"):
        response = client.get(url)
        assert response.status_code == 200 and "quinoa" not in response.content.decode(), url
    conversation.refresh_from_db()  # a turn reads its conversation afresh
    turn = prepare_turn(conversation=conversation, user_message="what can't I eat?", store=False)
    assert "quinoa" not in json.dumps(turn, ensure_ascii=False)
    call_command("export_workspace", str(tmp_path / "ws"), stdout=StringIO())
    exported = [path.read_text() for path in (tmp_path / "ws").rglob("*") if path.is_file()]
    assert exported and not any("quinoa" in text for text in exported)
    # What was not about the fact stays: the feeling of the day, the rest of the message.
    assert Entity.objects.filter(tag=BlockTag.LIMBIC).count() == 2
    assert conversation.messages.filter(content="I feel anxious about the dinner party.").exists()
    assert not Entity.objects.filter(pk=merged.pk).exists()
    assert (tombstone.kind, tombstone.target_id, tombstone.with_messages) == ("memory", merged.pk, True)
    assert merged.pk in tombstone.entity_ids and tombstone.finished_at is not None
    assert "quinoa" not in json.dumps(tombstone.counts)


def _fact_with_derivatives(person: Person, content: str) -> SemanticMemory:
    """A fact, quoted by a narrative and a history entry, cited by a limbic anchor, shown in a frozen peer block."""
    memory = SemanticMemoryFactory(person=person, content=content)
    ContentBlockFactory(
        tag=BlockTag.NARRATIVE,
        person=person,
        content=f"We talked about the garden. I noted: {content}.",
        body={"source_facts": [memory.pk]},
    )
    ContentBlockFactory(
        tag=BlockTag.LIMBIC, person=person, content="I feel calm.", body={"semantic_memory_ids": [memory.pk]}
    )
    HistoryEntryFactory(person=person, content=f"{content}. Then we planned the weekend.")
    PeerBlockFactory(content=f"- {content}")
    return memory


def test_forget_keeps_what_was_not_about_the_fact_and_records_a_tombstone_without_content():
    leo = PersonFactory(slug="leo", display_name="Leo")
    memory = _fact_with_derivatives(leo, "Leo keeps bees behind the greenhouse")
    other = SemanticMemoryFactory(person=leo, content="Leo likes green tea")

    tombstone = memory_forget(memory=memory, requested_by="test")

    assert not SemanticMemory.objects.filter(pk=memory.pk).exists()
    assert SemanticMemory.objects.filter(pk=other.pk).exists()
    narrative = Entity.objects.get(tag=BlockTag.NARRATIVE)
    assert narrative.content == "We talked about the garden." and narrative.body["source_facts"] == []
    limbic = Entity.objects.get(tag=BlockTag.LIMBIC)  # append-only, redacted through the audited path
    assert limbic.content == "I feel calm." and limbic.body["semantic_memory_ids"] == []
    assert HistoryEntry.objects.get().content == "Then we planned the weekend."
    assert not PeerBlock.objects.exists()  # a frozen block is never rewritten: it goes
    assert traces("bees", "greenhouse") == []
    assert tombstone.counts["entities"] == {"deleted": 1, "redacted": 2}
    assert tombstone.counts["conversation_peer_blocks"] == {"deleted": 1, "redacted": 0}
    assert ForgetTombstone.objects.get().entity_ids == [memory.pk]


@pytest.mark.parametrize(
    ("fact", "quote"),
    [("阿明的女兒對花生過敏", "阿明的女儿对花生过敏"), ("阿明的女儿对花生过敏", "阿明的女兒對花生過敏")],
)
def test_a_fact_is_forgotten_where_it_is_quoted_in_the_other_script(fact, quote):
    ming = PersonFactory(slug="ming", display_name="阿明")
    memory = SemanticMemoryFactory(person=ming, content=fact)
    ContentBlockFactory(tag=BlockTag.NARRATIVE, person=ming, content=f"今天聊了很多。{quote}。", body={})
    HistoryEntryFactory(person=ming, content=f"{quote}。然后我们约了周末。")

    memory_forget(memory=memory, requested_by="test")

    assert Entity.objects.get(tag=BlockTag.NARRATIVE).content == "今天聊了很多。"
    assert HistoryEntry.objects.get().content == "然后我们约了周末。"
    assert traces("花生") == []


def test_a_forget_costs_no_more_queries_for_many_quoting_rows_than_for_one(django_assert_max_num_queries):
    def forget_quoted(times: int, *, slug: str) -> SemanticMemory:
        person = PersonFactory(slug=slug, display_name=slug.title())
        memory = _fact_with_derivatives(person, f"{slug.title()} keeps bees behind the greenhouse")
        conversation = ConversationFactory(person=person)
        for day in range(times):  # rows redacted (history, narrative, message) and rows emptied (history)
            HistoryEntryFactory(person=person, content=f"{memory.content}. Day {day} was sunny.")
            HistoryEntryFactory(person=person, content=f"{memory.content}.")
            ContentBlockFactory(person=person, content=f"Day {day}. {memory.content}.")
            MessageFactory(conversation=conversation, content=f"Day {day}: {memory.content}. Lovely.")
        return memory

    once = forget_quoted(1, slug="leo")
    with CaptureQueriesContext(connection) as one_row_each:
        memory_forget(memory=once, messages=True)
    many = forget_quoted(12, slug="ada")

    with django_assert_max_num_queries(len(one_row_each)):
        memory_forget(memory=many, messages=True)

    assert traces("bees", "greenhouse") == []
    assert HistoryEntry.objects.filter(content__startswith="Day 11 was sunny").exists()
    assert HistoryEntry.objects.filter(fts_segmented__contains="sunny").count() == 13


def test_forgetting_with_messages_finds_the_sentences_recall_would_by_their_stems_and_only_those():
    ada = PersonFactory(slug="ada", display_name="Ada")
    memory = SemanticMemoryFactory(person=ada, content="Ada lives in Reykjavik")
    talk = ConversationFactory(person=ada)
    said = {
        "stated": "I live in Reykjavik, right by the harbour. The weather is wild.",
        "again": "We were living in Reykjavik when the volcano woke.",
        "other city": "My sister lives in Paris.",
        "one word": "Reykjavik has the best hot dogs.",
    }
    messages = {key: MessageFactory(conversation=talk, role=Role.USER, content=text) for key, text in said.items()}

    memory_forget(memory=memory, messages=True)

    left = {key: Message.objects.get(pk=message.pk).content for key, message in messages.items()}
    assert left["stated"] == "The weather is wild." and left["again"] == ""
    # Sharing one of the fact's words is not stating it.
    assert left["other city"] == said["other city"] and left["one word"] == said["one word"]


def _split_allergy(maya) -> list[SemanticMemory]:
    """Maya's allergy-and-swimming memory split in two: its parts (the whole is expired)."""
    whole = SemanticMemoryFactory(person=maya, content="Maya is allergic to hazelnuts. Maya swims on Sundays")
    return memory_split(
        memory=whole,
        parts=[
            MemoryPart("world", "Maya is allergic to hazelnuts", "p1"),
            MemoryPart("world", "Maya swims on Sundays", "p2"),
        ],
    )


def test_forgetting_takes_every_version_and_restores_what_was_merged_with_it():
    maya = PersonFactory(slug="maya", display_name="Maya")
    parts = _split_allergy(maya)
    tea = SemanticMemoryFactory(person=maya, content="Maya drinks oolong")
    merged = memory_merge(
        sources=[parts[0], tea],
        content="Maya is allergic to hazelnuts and drinks oolong",
        memory_type="world",
        external_id="m1",
    )

    memory_forget(memory=parts[0])  # the split's source, its other part and the merge go; the tea comes back

    assert set(SemanticMemory.objects.values_list("content", "status")) == {("Maya drinks oolong", "active")}
    assert merged.pk not in SemanticMemory.objects.values_list("pk", flat=True)
    assert traces("hazelnut", "swims") == []


def test_forgetting_a_later_part_of_a_split_takes_the_whole_it_came_from():
    parts = _split_allergy(PersonFactory(slug="maya", display_name="Maya"))

    memory_forget(memory=parts[1])  # the whole (expired, it still says it) and the other part go with it

    assert not SemanticMemory.objects.exists()
    assert traces("hazelnut", "swims") == []


def test_person_forget_with_messages_is_erasure():
    maya, leo = PersonFactory(slug="maya", display_name="Maya"), PersonFactory(slug="leo", display_name="Leo")
    _fact_with_derivatives(maya, "Maya collects vintage typewriters")
    kept = SemanticMemoryFactory(person=leo, content="Leo collects stamps")
    mine = ConversationFactory(person=maya)
    MessageFactory(conversation=mine, content="I collect vintage typewriters")
    IdentityFactory(person=maya, channel="telegram", external_id="7")
    mapped = ConversationFactory(person=None, channel="telegram", chat_id="7")  # hers through her account
    MessageFactory(conversation=mapped, content="Another typewriter arrived today")
    ContentBlockFactory(tag=BlockTag.NARRATIVE, person=None, content="Maya visited today. Leo cooked.")

    response = operator_client().post("/api/persons/maya/forget/", {"messages": True}, format="json")

    assert response.status_code == 200 and response.json()["kind"] == "person"
    assert not Person.objects.filter(slug="maya").exists()
    assert not Conversation.objects.filter(pk__in=[mine.pk, mapped.pk]).exists()
    assert SemanticMemory.objects.get() == kept
    assert Entity.objects.get(tag=BlockTag.NARRATIVE).content == "Leo cooked."
    assert traces("typewriter", "maya") == []


def test_erasure_takes_the_persons_dialogue_out_of_the_llm_audit_rows():
    maya, leo = PersonFactory(slug="maya", display_name="Maya"), PersonFactory(slug="leo", display_name="Leo")
    day = NIGHTS[0]
    at = dt.datetime.combine(day, dt.time(12), tzinfo=TZ)
    hers, his = ConversationFactory(person=maya), ConversationFactory(person=leo)
    said = ["The lighthouse keeper taught me knots on Tuesday.", "My old locker code was under the blue kettle."]
    for minute, text in enumerate(said):
        MessageFactory(conversation=hers, role=Role.USER, content=text, created_at=at + dt.timedelta(minutes=minute))
    MessageFactory(conversation=hers, role=Role.ASSISTANT, content="What a lovely teacher!", created_at=at)
    MessageFactory(conversation=his, role=Role.USER, content="I repainted the garden shed green.", created_at=at)
    assert sleep_cycle_run(day=day, mode="full").status == "succeeded"
    assert traces("lighthouse", "kettle")  # her words are in the prompts of the night's LLM calls

    planned = {
        row.action for row in person_forget_plan(person=maya, messages=True).rows if row.table == "auto_llm_runs"
    }
    call_command("forget", "--person", "maya", "--messages", "--yes", stdout=StringIO())

    assert traces("lighthouse", "kettle", "lovely teacher") == []
    assert planned == {"delete", "redact"}
    # A call about her day alone went with it; a call about both days kept Leo's part.
    shared = [run for run in AutoLlmRun.objects.all() if "garden shed" in json.dumps(run.prompt)]
    assert shared and {run.purpose for run in shared} >= {"temporal.day"}


def test_forgetting_a_person_keeps_the_ids_and_accounts_that_name_them_and_takes_what_they_said():
    # Integrators name rows after people: external ids, chat ids, an agent's user. They key rows, they say nothing.
    leo = PersonFactory(slug="leo", display_name="Leo")
    SemanticMemoryFactory(person=leo, content="Leo plays the oboe")
    talks = [
        ConversationFactory(person=leo, external_id=f"web-leo-{n}", chat_id="leo-browser", title="Leo and the oboe")
        for n in range(2)
    ]
    MessageFactory(conversation=talks[0], content="Leo plays the oboe. The weather is fine.", external_id="leo-1")
    agent = get_user_model().objects.create_user(username="leo-bot", first_name="Leo")
    key = api_token(username="leo-bot", scope="agent", persons=[leo])

    person_forget(person=leo, messages=False)

    assert sorted(Conversation.objects.values_list("external_id", "chat_id")) == [
        ("web-leo-0", "leo-browser"),
        ("web-leo-1", "leo-browser"),
    ]
    assert set(Conversation.objects.values_list("title", flat=True)) == {""}  # a title naming him is a passage
    assert Message.objects.get(external_id="leo-1").content == "Leo plays the oboe. The weather is fine."
    agent.refresh_from_db()
    assert (agent.username, agent.first_name) == ("leo-bot", "Leo")
    assert Token.objects.filter(key=key).exists()
    assert not SemanticMemory.objects.exists()


def test_forgetting_a_person_takes_every_dream_made_partly_of_their_day():
    maya, leo = PersonFactory(slug="maya"), PersonFactory(slug="leo")
    # The echo of a line Maya said is no fact of hers, so no redaction could find it in the shared dream.
    ContentBlockFactory(
        tag=BlockTag.DREAM,
        person=None,
        content="An old cat recited “the kiln is finally warm” while Leo's train went by.",
        body={"person_ids": [leo.pk, maya.pk]},
    )
    leos = ContentBlockFactory(
        tag=BlockTag.DREAM, person=leo, content="A train of bells.", body={"person_ids": [leo.pk]}
    )

    planned = {(row.table, row.action) for row in person_forget_plan(person=maya).rows}
    person_forget(person=maya)

    assert ("entities", "delete") in planned
    assert list(Entity.objects.filter(tag=BlockTag.DREAM)) == [leos]
    assert traces("kiln") == []


def _section(person: Person, who: str, text: str) -> dict:
    return {"conversation_id": None, "person_id": person.pk, "who": who, "topic": "", "text": text}


# Her name heads her sections (the name sweep finds them too), or one she went by then (only her id does).
@pytest.mark.parametrize("her", ["Maya", "Mei"])
def test_forgetting_a_person_takes_their_sections_of_the_time_summaries_as_planned(her):
    leo, maya = PersonFactory(slug="leo", display_name="Leo"), PersonFactory(slug="maya", display_name="Maya")
    shared = temporal_summary_upsert(
        window=Window.DAY,
        period_start=dt.date(2026, 11, 20),
        sections=[_section(leo, "Leo", "Took the night train to Porto."), _section(maya, her, "Fired a kiln.")],
    )
    hers = temporal_summary_upsert(
        window=Window.MONTH, period_start=dt.date(2026, 11, 1), sections=[_section(maya, her, "Glazed celadon.")]
    )
    untouched = temporal_summary_upsert(
        window=Window.DAY, period_start=dt.date(2026, 11, 21), sections=[_section(leo, "Leo", "Slept on the train.")]
    )

    planned = [(row.pk, row.action) for row in person_forget_plan(person=maya).rows if row.table == "entities"]
    person_forget(person=maya)

    # The confirmation page says what happens to each summary, once: Leo's part stays, hers alone goes.
    assert sorted(planned) == sorted([(shared.pk, "redact"), (hers.pk, "delete")])
    assert [s["person_id"] for s in TemporalSummary.objects.get(pk=shared.pk).body["sections"]] == [leo.pk]
    assert "Porto" in TemporalSummary.objects.get(pk=shared.pk).content
    assert not TemporalSummary.objects.filter(pk=hers.pk).exists()
    assert TemporalSummary.objects.get(pk=untouched.pk).body == untouched.body
    assert traces("kiln", "celadon") == []


def test_forgetting_a_person_takes_their_tendencies_with_them():
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    day = dt.date(2026, 11, 20)
    for person in (leo, maya, None):
        EmotionalTendencyFactory(person=person, day=day, mood="low")

    planned = {(row.table, row.action) for row in person_forget_plan(person=leo).rows}
    person_forget(person=leo)  # not erasure: Leo stays, what was read off his anchors goes

    assert planned == {("emotional_tendencies", "delete")}

    assert Person.objects.filter(pk=leo.pk).exists()
    assert sorted(EmotionalTendency.objects.values_list("person", flat=True), key=str) == [maya.pk, None]


def test_forgetting_a_person_computes_the_overall_tendencies_that_counted_them_again():
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    day = dt.date(2026, 11, 20)
    LimbicAnchorFactory(person=leo, day=day - dt.timedelta(days=3), valence=-0.9, intensity=0.9)
    LimbicAnchorFactory(person=maya, day=day - dt.timedelta(days=5), valence=0.4, intensity=0.5)
    # Days whose 30 days hold Leo's anchor (the last of them too), the day before it and the first day past.
    counted = [day, day - dt.timedelta(days=3) + dt.timedelta(days=29)]
    untouched = [day - dt.timedelta(days=4), day - dt.timedelta(days=3) + dt.timedelta(days=30)]
    for each in counted + untouched:
        emotional_tendencies_refresh(day=each)
    before = {row.day: row for row in EmotionalTendency.objects.filter(person=None)}
    mayas = EmotionalTendency.objects.get(person=maya, day=day)
    assert before[day].month_anchors == 2 and before[day].month_valence < 0

    planned = [row for row in person_forget_plan(person=leo).rows if row.table == "emotional_tendencies"]
    tombstone = person_forget(person=leo)

    overall = {row.day: row for row in EmotionalTendency.objects.filter(person=None)}
    recomputed = {row.pk for row in planned if row.action == "recompute"}
    assert recomputed == {before[each].pk for each in counted}  # not the days whose 30 never held Leo's anchor
    # Only Maya's anchor is left: the overall day reads exactly as hers, which forgetting Leo left alone.
    figures = [f.name for f in EmotionalTendency._meta.fields if f.name not in ("id", "person", "day")]
    assert [getattr(overall[day], f) for f in figures] == [getattr(mayas, f) for f in figures]
    assert [getattr(EmotionalTendency.objects.get(pk=mayas.pk), f) for f in figures] == [
        getattr(mayas, f) for f in figures
    ]
    assert overall[day].month_anchors == 1 and overall[counted[1]].month_anchors == 0
    assert tombstone.counts["emotional_tendencies"]["redacted"] == len(counted)


def test_forget_api_surfaces_and_their_access():
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    mine = SemanticMemoryFactory(person=leo, content="Leo plays the oboe")
    theirs = SemanticMemoryFactory(person=maya, content="Maya plays the cello")
    deleted = SemanticMemoryFactory(person=leo, content="Leo once lived in Lyon")
    leo_token = api_client(scope="person", persons=[leo])

    refused = leo_token.post(f"/api/memories/{theirs.pk}/forget/", {}, format="json")
    forgotten = leo_token.post(f"/api/memories/{mine.pk}/forget/", {"reason": "user_request"}, format="json")
    not_mayas = leo_token.post("/api/persons/maya/forget/", {}, format="json")
    bad_reason = operator_client().post(f"/api/memories/{theirs.pk}/forget/", {"reason": "gossip"}, format="json")
    removed = operator_client().delete(f"/api/memories/{deleted.pk}/")

    assert refused.status_code in (403, 404) and SemanticMemory.objects.filter(pk=theirs.pk).exists()
    assert forgotten.status_code == 200 and forgotten.json()["entity_ids"] == [mine.pk]
    assert not_mayas.status_code == 403
    assert bad_reason.status_code == 400 and "reason" in bad_reason.json()
    assert removed.status_code == 204
    assert ForgetTombstone.objects.filter(target_id=deleted.pk, reason="operator").exists()
    assert traces("oboe", "Lyon") == []


def test_the_memory_tool_forgets_only_the_callers_own_memory_from_their_own_conversation():
    leo, maya = PersonFactory(slug="leo"), PersonFactory(slug="maya")
    IdentityFactory(person=leo, channel="telegram", external_id="42")
    mine = SemanticMemoryFactory(person=leo, content="Leo's locker code is 1234")
    theirs = SemanticMemoryFactory(person=maya, content="Maya's locker code is 9876")
    from_leo = {"action": "forget", "channel": "telegram", "chat_id": "42"}

    with pytest.raises(ToolError) as other:
        tool_call(name="memory", arguments={**from_leo, "memory_id": theirs.pk})
    with pytest.raises(ToolError) as no_conversation:
        tool_call(name="memory", arguments={"action": "forget", "person": "leo", "memory_id": mine.pk})
    done = tool_call(name="memory", arguments={**from_leo, "memory_id": mine.pk})

    assert other.value.field == "memory_id" and no_conversation.value.field == "channel"
    assert done["forgotten"] == [mine.pk]
    assert SemanticMemory.objects.filter(pk=theirs.pk).exists()


def test_the_command_lists_what_goes_and_asks_first(monkeypatch):
    memory = _fact_with_derivatives(PersonFactory(slug="leo"), "Leo hides the spare key under the frog")
    out = StringIO()
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    with pytest.raises(CommandError, match="nothing forgotten"):
        call_command("forget", "--memory", str(memory.pk), stdout=out)
    assert "delete   entities" in out.getvalue() and "redact   entities" in out.getvalue()
    assert SemanticMemory.objects.filter(pk=memory.pk).exists()

    out = StringIO()
    call_command("forget", "--memory", str(memory.pk), "--yes", "--json", stdout=out)
    assert json.loads(out.getvalue())["entity_ids"] == [memory.pk]
    assert traces("spare key", "frog") == []
    with pytest.raises(CommandError, match="unknown person"):
        call_command("forget", "--person", "nobody", "--yes")


def test_the_console_confirms_with_the_list_then_forgets(admin_client):
    memory = _fact_with_derivatives(PersonFactory(slug="leo"), "Leo's bike lock combination is 4711")
    changelist = reverse("admin:memory_semanticmemory_changelist")
    selected = {"action": "forget_memories", "_selected_action": [memory.pk]}

    page = admin_client.post(changelist, selected).content.decode()
    assert "Yes, forget" in page and "narrative" in page.lower() and "history" in page.lower()
    assert SemanticMemory.objects.filter(pk=memory.pk).exists()

    admin_client.post(changelist, {**selected, "confirm": "yes"})
    assert traces("bike lock", "4711") == []

    person_page = admin_client.get(reverse("admin:memory_forget_person", args=["leo"])).content.decode()
    assert "Forget leo" in person_page
    admin_client.post(reverse("admin:memory_forget_person", args=["leo"]), {"confirm": "yes", "messages": "1"})
    assert not Person.objects.filter(slug="leo").exists()


@pytest.mark.local_embeddings
def test_what_may_say_the_fact_in_other_words_is_listed_for_review_and_left_to_the_operator(admin_client):
    ada = PersonFactory(slug="ada", display_name="Ada")
    memory = SemanticMemoryFactory(person=ada, content="Ada lives in Reykjavik")
    talk = ConversationFactory(person=ada)
    said = {
        "paraphrase": "My home is Reykjavik, by the old harbour.",
        "unrelated": "I bought new running shoes today, they are bright green.",
    }
    messages = {key: MessageFactory(conversation=talk, role=Role.USER, content=text) for key, text in said.items()}
    bo = PersonFactory(slug="bo", display_name="Bo")
    elsewhere = MessageFactory(conversation=ConversationFactory(person=bo), role=Role.USER, content=said["paraphrase"])
    assert embed_backfill_run().embedded >= 3

    plan = memory_forget_plan(memory=memory, messages=True)

    reviewed = {(row.table, row.pk) for row in plan.review}
    assert ("messages", messages["paraphrase"].pk) in reviewed
    assert ("messages", messages["unrelated"].pk) not in reviewed
    assert ("messages", elsewhere.pk) not in reviewed  # somebody else's words are not hers to review
    selected = {"action": "forget_memories", "_selected_action": [memory.pk], "messages": "1"}
    page = admin_client.post(reverse("admin:memory_semanticmemory_changelist"), selected).content.decode()
    assert "May say it in other words" in page and said["paraphrase"] in page
    # The word matcher does not take it: the forget leaves it, and says so.
    out = StringIO()
    call_command("forget", "--memory", str(memory.pk), "--messages", "--yes", stdout=out)
    assert "may say it in other words" in out.getvalue() and f"messages #{messages['paraphrase'].pk}" in out.getvalue()
    assert Message.objects.get(pk=messages["paraphrase"].pk).content == said["paraphrase"]
    assert not SemanticMemory.objects.filter(pk=memory.pk).exists()
