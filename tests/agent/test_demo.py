from __future__ import annotations

import io
import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from anima.agent.demo import SAMPLE_DAYS
from anima.core.llm.testing import StubLlmServer
from anima.core.models import AutoLlmRun, Entity
from conversations.models import Conversation, Message, Person
from memory.models import LimbicBlock
from memory.search import KEYWORD_BRANCHES
from memory.selectors import SEMANTIC, memory_recall
from sleep.models import PipelineRun
from sleep.testing import offline_responder, sleep_purpose
from temporal.selectors import persons_named


def _demo() -> str:
    out = io.StringIO()
    call_command("demo", stdout=out)
    return out.getvalue()


def test_demo_imports_the_bilingual_sample_and_is_safe_to_re_run(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    first = _demo()
    counts = (Conversation.objects.count(), Message.objects.count(), Entity.objects.count())
    assert Conversation.objects.filter(platform="cron").count() == 1
    # The sample's empty conversation is days old, so the first night's cleanup removed it.
    assert "deleted=1" in first
    assert not Conversation.objects.filter(messages__isnull=True).exists()
    slept = Entity.objects.filter(primary_component="content_block")
    assert slept.filter(tag="dream").count() == 3
    assert slept.filter(tag="limbic", body__intensity__gte=0.3).count() >= 3
    assert Entity.objects.filter(primary_component="temporal_summary", body__window="day").count() == 3
    assert Entity.objects.filter(content__contains="属羊", status="expired").exists()
    assert Message.objects.filter(content__contains="邮箱").exists()
    assert Message.objects.filter(content__icontains="peanut").exists()
    assert get_user_model().objects.get(username=settings.ANIMA_ADMIN_USERNAME).is_staff
    assert "login: admin / " in first
    # Which mind ran, as the audit rows say.
    assert "LLM: offline provider" in first
    assert re.search(r"which mind ran: offline provider \(offline-extractive: .*\); \d+ calls", first)

    assert "conversations.jsonl: 12 lines read, stored 12 conversations, 103 messages\n" in first
    retired = _section(first, "retired facts")
    assert retired and all(re.match(r"  \[[a-z]+/(expired|deprecated)\] ", line) for line in retired)
    assert any("[world/expired] Leo 的女儿小雨属羊 — contradiction" in line for line in retired)

    second = _demo()
    assert (Conversation.objects.count(), Message.objects.count(), Entity.objects.count()) == counts
    assert first.split("login: ")[1].split()[2] == second.split("login: ")[1].split()[2]  # same password
    # A re-run says what it did: nothing new stored, nothing for the cleanup to delete.
    assert (
        "conversations.jsonl: 11 lines read, stored nothing new; left out 1 empty conversation the nightly cleanup"
        " deleted\n" in second
    )
    assert "memories.jsonl: 17 lines read, stored nothing new\n" in second
    assert "deleted=1" not in second and "deleted=0" in second
    assert _section(second, "retired facts") == retired


def test_the_samples_global_memories_name_nobody(demo_sample):
    # A global memory is in everyone's recall and prompts: what the sample says about Leo or Maya is theirs.
    persons = list(Person.objects.all())
    assert {person.slug for person in persons} >= {"leo", "maya"}
    shared = Entity.objects.filter(person__isnull=True).exclude(content="")
    assert shared.exists()
    assert {row.content: persons_named(row.content, persons=persons) for row in shared} == {
        row.content: [] for row in shared
    }


def _section(output: str, heading: str) -> list[str]:
    """The indented lines under ``heading`` in the demo's output."""
    lines = output.split(heading, 1)[1].splitlines()[1:] if heading in output else []
    section = []
    for line in lines:
        if not line.startswith("  "):
            break
        section.append(line)
    return section


@pytest.mark.local_embeddings
def test_demo_fills_vectors_recalls_by_meaning_and_puts_each_fact_before_the_lines_it_was_said_in(settings, tmp_path):
    settings.VAR_DIR = tmp_path

    output = _demo().split("7. Recall by meaning")[1]

    assert "embedded " in output
    assert re.search(r"1\. Maya works as a nurse in a hospital in Lisbon  \(score 0\.\d{3}: dense #1\)", output)
    # Maya's allergy was told by hand and then said in a chat; Leo's e-mail was learnt from a chat.
    for query, slug, fact in (
        ("peanut allergy", "maya", "Maya is allergic to peanuts"),
        ("Leo 的邮箱是什么", "leo", "Leo 的邮箱是 leo@example.com，之后有什么总结可以发给 Leo"),
    ):
        first = memory_recall(query=query, person=Person.objects.get(slug=slug))[0]
        assert (first["memory_type"], first["snippet"]) == (SEMANTIC, fact)
    # Leo's name is in most of his rows, the word asked about in one: by words that line comes first; with meaning
    # beside them it is among the first two (「Leo 是后端负责人」 is near 「老板」 in meaning, and a Chinese query
    # weighs meaning more than a shared word).
    leo = Person.objects.get(slug="leo")
    assert "老板" in memory_recall(query="Leo 的老板是谁", person=leo, branches=KEYWORD_BRANCHES)[0]["snippet"]
    assert any("老板" in hit["snippet"] for hit in memory_recall(query="Leo 的老板是谁", person=leo)[:2])


def test_demo_carries_on_past_a_failed_night_and_says_which_conversation_failed_and_why(settings, tmp_path, llm_stub):
    settings.VAR_DIR = tmp_path

    def respond(body: dict):
        payload = json.loads(body["messages"][1]["content"])
        if sleep_purpose(body) == "light-sleep.limbic" and payload["conversation"]["title"] == "Exam day nerves":
            return {"anchors": [{"kind": "content", "content": "valence"}]}  # a small real model's answer
        return offline_responder(body)

    llm_stub.responder = respond

    output = _demo()

    exam = Conversation.objects.get(title="Exam day nerves")
    # The night of 11-27 is partial; the next night retried that conversation (and failed again): both are named.
    assert "nights not fully slept: 2 of 3" in output
    for night in ("2026-11-27", "2026-11-28"):
        run = PipelineRun.objects.get(day=night)
        assert run.status == "partial"
        assert f"night {night} (run #{run.pk}, partial)" in output
    reason = f"light-sleep, conversation #{exam.pk} 'Exam day nerves' of 2026-11-27, stage limbic: LlmRepairFailed"
    assert output.count(reason) >= 2
    # Every night was slept, and the turn and the recall still ran.
    assert set(PipelineRun.objects.values_list("day", flat=True)) == set(SAMPLE_DAYS)
    passed = Conversation.objects.get(title="I passed!")
    assert LimbicBlock.objects.filter(source_conversation=passed).exists()
    assert "6. A prepared turn" in output and "7. Recall by meaning" in output
    assert "openai server, model stub-model" in output


@pytest.mark.parametrize("persona", ["vllm"])
def test_demo_against_a_model_server_says_which_model_and_dialect_ran(settings, tmp_path, persona):
    settings.VAR_DIR = tmp_path
    with StubLlmServer(persona=persona, responder=offline_responder) as server:
        settings.ANIMA_LLM_PROVIDER = "openai"
        settings.ANIMA_LLM_BASE_URL = server.base_url
        settings.ANIMA_LLM_MODEL = "qwen2.5-0.5b-instruct"
        settings.ANIMA_LLM_STRUCTURED = "auto"
        out = _demo()

    assert "offline" not in out.split("5. Sleep")[1].split("6. A prepared turn")[0]
    assert "LLM: openai server, model qwen2.5-0.5b-instruct, structured output auto" in out
    ran = re.search(
        r"which mind ran: openai server, model qwen2.5-0.5b-instruct, structured output json_schema; (\d+)", out
    )
    assert ran and int(ran.group(1)) > 0
    assert set(AutoLlmRun.objects.values_list("provider", "dialect")) == {("openai", "json_schema")}
