from __future__ import annotations

import json
import sys
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from anima.core.models import Entity
from conversations.models import Role
from tests.factories import (
    ConversationFactory,
    MessageFactory,
    PersonFactory,
    SemanticMemoryFactory,
    belief_superseded,
)


def _run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_recall_prints_ranked_hits_and_explains_branches():
    memory = SemanticMemoryFactory(content="Leo 的邮箱是 leo@example.com")
    output = _run("recall", "你的邮箱是啥？", "--explain")
    assert f"[semantic #{memory.pk}]" in output
    assert "fts #1" in output


def test_recall_json_scoped_to_a_person():
    maya = PersonFactory(slug="maya")
    mine = SemanticMemoryFactory(content="Maya is allergic to peanuts", person=maya)
    SemanticMemoryFactory(content="Leo is allergic to peanuts", person=PersonFactory(slug="leo"))
    results = json.loads(_run("recall", "peanut allergy", "--person", "maya", "--json"))["results"]
    assert [r["id"] for r in results] == [mine.pk]
    assert results[0]["external_id"] == mine.external_id


def test_recall_explains_that_the_persons_own_name_was_no_keyword():
    maya = PersonFactory(slug="maya", display_name="Maya")
    fact = SemanticMemoryFactory(content="Maya is allergic to peanuts", person=maya)

    output = _run("recall", "Is Maya allergic?", "--person", "maya", "--explain")
    payload = json.loads(_run("recall", "Is Maya allergic?", "--person", "maya", "--explain", "--json"))

    assert "keywords: without Maya, the person's own name" in output
    assert f"[semantic #{fact.pk}]" in output
    assert payload["keywords_without"] == ["Maya"]
    # Nothing left out where the query does not name them, or names someone else's scope.
    assert "keywords:" not in _run("recall", "peanuts", "--person", "maya", "--explain")
    assert "keywords:" not in _run("recall", "Is Maya allergic?", "--explain")


def test_recall_unknown_person_is_a_clear_error():
    with pytest.raises(CommandError, match="unknown person 'nobody'"):
        _run("recall", "tea", "--person", "nobody")


def test_recall_batch_reports_bad_lines_and_malformed_queries_and_goes_on(tmp_path):
    message = MessageFactory(content="orchids need light", role=Role.USER, conversation=ConversationFactory())
    batch = tmp_path / "queries.jsonl"
    batch.write_text(
        '{"id": "a", "query": "orchid", "types": ["session"]}\n'
        "{broken\n"
        '{"id": "b", "query": "orchid AND"}\n'
        '{"id": "c", "query": "orchid", "person": "ghost"}\n',
        encoding="utf-8",
    )
    out, err = StringIO(), StringIO()
    call_command("recall", "--batch", str(batch), "--explain", stdout=out, stderr=err)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [line["id"] for line in lines] == ["a", "b", "c"]
    hit = lines[0]["results"][0]
    assert hit["id"] == message.pk
    assert hit["message_external_id"] == message.external_id
    assert hit["conversation_external_id"] == message.conversation.external_id
    assert set(hit["ranks"]) <= {"fts", "trigram"}
    assert "operator" in lines[1]["error"]
    assert "ghost" in lines[2]["error"]
    assert "line 2" in err.getvalue()


def test_memory_ref_sync_command_prints_its_summary():
    memory = SemanticMemoryFactory(person=None)  # global: any conversation's citation counts
    MessageFactory(content=f"[[anima:{memory.pk}]]", role=Role.USER)
    MessageFactory(content=f"[[anima:{memory.pk}]]", role=Role.TOOL)
    summary = json.loads(_run("memory_ref_sync"))
    assert summary["references_added"] == 1  # the factory bypassed the write path; sync catches up
    assert Entity.objects.get(pk=memory.pk).reference_count == 2


def test_recall_as_of_a_day_and_a_far_off_one():
    old, new, _ = belief_superseded(person=PersonFactory(slug="leo"))
    before = json.loads(_run("recall", "zodiac", "--person", "leo", "--as-of", "2026-11-20", "--json"))
    after = json.loads(_run("recall", "zodiac", "--person", "leo", "--as-of", "2026-11-26", "--json"))
    assert [r["id"] for r in before["results"]] == [old.pk]
    assert [r["id"] for r in after["results"]] == [new.pk]
    with pytest.raises(CommandError, match="--as-of must be between 1900-01-01 and 2199-12-31"):
        _run("recall", "zodiac", "--as-of", "2200-01-01")


def test_bench_recall_without_rank_bm25_says_it_needs_the_development_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "rank_bm25", None)  # as in a production install, which leaves it out
    with pytest.raises(CommandError, match=r"rank-bm25.*pip install -r requirements\.txt"):
        call_command("bench_recall", "--data", str(tmp_path))


def test_bench_recall_needs_data_for_the_dev_sets_and_not_for_the_chats_written_here():
    with pytest.raises(CommandError, match="--data is needed for madial-zh, locomo"):
        call_command("bench_recall", "--sets", "madial-zh,locomo,chats")
