from __future__ import annotations

from django.db import connection

from anima.core.embeddings import EmbeddingModel
from anima.core.vectors import ENTITY, MESSAGE, VectorRow, vectors_available, vectors_delete, vectors_store

MODEL_A = EmbeddingModel(name="a", dim=2)
MODEL_B = EmbeddingModel(name="b", dim=3)


def _rows() -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT kind, row_id, model FROM vectors ORDER BY kind, row_id, model")
        return cursor.fetchall()


def test_the_embedded_postgresql_has_the_vectors_table():
    assert vectors_available()


def test_deleting_removes_every_models_vectors_of_those_rows_only():
    vectors_store(kind=ENTITY, model=MODEL_A, rows=[VectorRow(1, [1, 0]), VectorRow(2, [0, 1])])
    vectors_store(kind=ENTITY, model=MODEL_A, rows=[VectorRow(1, [0.6, 0.8])])
    vectors_store(kind=ENTITY, model=MODEL_B, rows=[VectorRow(1, [1, 0, 0])])
    vectors_store(kind=MESSAGE, model=MODEL_A, rows=[VectorRow(1, [1, 0])])

    deleted = vectors_delete(kind=ENTITY, row_ids=[1])

    assert deleted == 2
    assert _rows() == [("entity", 2, "a"), ("message", 1, "a")]


def test_storing_a_rows_vector_again_replaces_it():
    vectors_store(kind=ENTITY, model=MODEL_A, rows=[VectorRow(1, [1, 0], person_id=4)])
    vectors_store(kind=ENTITY, model=MODEL_A, rows=[VectorRow(1, [0.6, 0.8], person_id=5)])

    with connection.cursor() as cursor:
        cursor.execute("SELECT vec::text, person_id FROM vectors WHERE kind = 'entity' AND row_id = 1")
        ((vec, person_id),) = cursor.fetchall()
    assert [round(float(x), 2) for x in vec.strip("[]").split(",")] == [0.6, 0.8]
    assert person_id == 5
