"""A PostgreSQL without pgvector (the machine's PostgreSQL 15): migrated, keyword-only, and saying so."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.db import connection

from anima.core import vectors
from anima.core.vectors import vectors_available, vectors_available_clear
from memory.embedding import embed_backfill_run
from memory.models import SemanticMemory
from memory.selectors import memory_semantic_search
from tests.factories import SemanticMemoryFactory


@pytest.fixture
def no_vectors_table(monkeypatch):
    """The guarded code path as a server without pgvector takes it: no vectors table to find."""
    monkeypatch.setattr(vectors, "TABLE", "vectors_absent_here")
    vectors_available_clear()
    yield
    vectors_available_clear()


def _keyword_only_behaviour(capsys) -> None:
    memory = SemanticMemoryFactory(content="Her mother was operated on in May")

    report = embed_backfill_run()
    results = memory_semantic_search(query="operated", person=memory.person)
    call_command("recall", "operated", "--explain", "--json")
    explained = json.loads(capsys.readouterr().out)

    assert not vectors_available()
    assert (report.available, report.embedded) == (False, 0)
    assert "pgvector" in report.reason
    assert [result["id"] for result in results] == [memory.pk]
    assert memory_semantic_search(query="hospital", person=memory.person) == []
    assert explained["dense"].startswith("unavailable: the database has no pgvector")
    # Editing and deleting rows never reach for a vectors table that is not there.
    assert SemanticMemory.objects.filter(pk=memory.pk).update(content="Her mother is well again") == 1
    memory.delete()
    assert not SemanticMemory.objects.filter(pk=memory.pk).exists()


def test_without_a_vectors_table_recall_and_backfill_run_keyword_only(concept_embeddings, no_vectors_table, capsys):
    _keyword_only_behaviour(capsys)


@pytest.mark.integration
def test_a_server_without_pgvector_migrates_and_recalls_keyword_only(concept_embeddings, capsys):
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        if cursor.fetchone() is not None:
            pytest.skip("this server has pgvector")
    vectors_available_clear()
    _keyword_only_behaviour(capsys)
    call_command("check", "--database", "default")
    assert "anima.W102" in capsys.readouterr().err
