from __future__ import annotations

from django.db import connection

from anima.core.embeddings import EmbeddingModel
from anima.core.vectors import (
    ENTITY,
    MESSAGE,
    VectorRow,
    vectors_available,
    vectors_statistics_refresh,
    vectors_store,
)
from memory.models import SemanticMemory
from memory.services import memory_update
from tests.factories import MessageFactory, PersonFactory, SemanticMemoryFactory

MODEL_A = EmbeddingModel(name="a", dim=2)
MODEL_B = EmbeddingModel(name="b", dim=3)


def _rows() -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT kind, row_id, model FROM vectors ORDER BY kind, row_id, model")
        return cursor.fetchall()


def test_the_embedded_postgresql_has_the_vectors_table():
    assert vectors_available()


def test_a_rows_vectors_go_when_the_row_goes_or_what_it_was_embedded_from_changes():
    person = PersonFactory()
    edited, moved, renamed, pinned, gone = SemanticMemoryFactory.create_batch(5, person=person)
    message = MessageFactory()
    for row in (edited, moved, renamed, pinned, gone):
        vectors_store(kind=ENTITY, model=MODEL_A, rows=[VectorRow(row.pk, [1, 0])])
    vectors_store(kind=ENTITY, model=MODEL_B, rows=[VectorRow(edited.pk, [1, 0, 0])])
    vectors_store(kind=MESSAGE, model=MODEL_A, rows=[VectorRow(message.pk, [1, 0])])
    vectors_store(kind=MESSAGE, model=MODEL_A, rows=[VectorRow(edited.pk, [0, 1])])

    memory_update(memory=edited, changes={"content": "Maya drinks coffee now"})  # a service
    SemanticMemory.objects.filter(pk=moved.pk).update(person=PersonFactory())  # a bulk UPDATE
    SemanticMemory.objects.filter(pk=renamed.pk).update(title="A new title")
    pinned.pinned, pinned.reference_count = True, 3
    pinned.save()  # a full-row UPDATE names the embedded columns too, unchanged: the vector stays
    gone.delete()

    # Every model's vector of a changed row goes; a message with the same id is another row.
    assert set(_rows()) == {("entity", pinned.pk, "a"), ("message", edited.pk, "a"), ("message", message.pk, "a")}


def test_storing_a_rows_vector_again_replaces_it():
    vectors_store(kind=ENTITY, model=MODEL_A, rows=[VectorRow(1, [1, 0], person_id=4)])
    vectors_store(kind=ENTITY, model=MODEL_A, rows=[VectorRow(1, [0.6, 0.8], person_id=5)])

    with connection.cursor() as cursor:
        cursor.execute("SELECT vec::text, person_id FROM vectors WHERE kind = 'entity' AND row_id = 1")
        ((vec, person_id),) = cursor.fetchall()
    assert [round(float(x), 2) for x in vec.strip("[]").split(",")] == [0.6, 0.8]
    assert person_id == 5


def _counted() -> float:
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = 'vectors'")
        return cursor.fetchone()[0]


def test_statistics_are_refreshed_only_once_new_rows_outgrow_them():
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE vectors")
    vectors_store(kind=MESSAGE, model=MODEL_A, rows=[VectorRow(i, [1, 0]) for i in range(1, 41)])
    assert not vectors_statistics_refresh(added=40)  # a few rows: autovacuum's business
    assert _counted() == 0
    vectors_store(kind=MESSAGE, model=MODEL_A, rows=[VectorRow(i, [0, 1]) for i in range(41, 301)])
    assert vectors_statistics_refresh(added=260)
    assert _counted() == 300
    vectors_store(kind=ENTITY, model=MODEL_A, rows=[VectorRow(i, [1, 1]) for i in range(1, 71)])
    assert not vectors_statistics_refresh(added=70)  # within 50 + 10 % of the 300 counted
