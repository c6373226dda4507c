"""Dense recall: meaning finds what shares no word, fused with keywords, isolated per person."""

from __future__ import annotations

import json
import threading
import time

import factory
import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse

from anima.api.testing import operator_client
from anima.core import vectors
from anima.core.config import config_update
from anima.core.embeddings import EmbeddingModel
from anima.core.models import Component, MemoryStatus
from anima.core.vectors import vector_indexes_ensure, vector_literal, vectors_available_clear
from memory.embedding import embed_backfill_run
from memory.passive import passive_recall
from memory.search import entity_source, message_source
from memory.search._fusion import pool_size
from memory.search._sql import dense_fetch, dense_statement
from memory.selectors import RECALL_LIMIT, memory_recall, memory_semantic_search
from tests.embeddings_server import concept_vector
from tests.factories import (
    ContentBlockFactory,
    ConversationFactory,
    MessageFactory,
    PersonFactory,
    SemanticMemoryFactory,
)


def _ids(results) -> list[int]:
    return [result["id"] for result in results]


def test_meaning_finds_a_memory_sharing_no_word_with_the_query(concept_embeddings):
    surgery = SemanticMemoryFactory(content="Her mother was operated on in May")
    SemanticMemoryFactory(content="She adopted a terrier")
    embed_backfill_run()

    results = memory_semantic_search(query="hospital", person=surgery.person)

    assert _ids(results)[0] == surgery.pk
    assert results[0]["ranks"] == {"dense": 1}
    assert 0 < results[0]["scores"]["dense"] <= 1


def test_passive_recall_offers_only_what_a_word_of_the_message_found(concept_embeddings):
    person = PersonFactory()
    surgery = SemanticMemoryFactory(person=person, content="Her mother was operated on in May")
    SemanticMemoryFactory(person=person, content="She adopted a terrier")
    conversation = ConversationFactory(person=person)
    embed_backfill_run()

    def offered(message: str) -> list[int]:
        return _ids(passive_recall(conversation=conversation, user_message=message).hits)

    # The dense branch ranks every memory for any message: small talk has a nearest one too.
    assert memory_semantic_search(query="lol ok, thanks", person=person)
    assert offered("lol ok, thanks") == []
    asked = len(concept_embeddings.requests)
    assert offered("haha, fine by me") == []
    assert len(concept_embeddings.requests) == asked  # no word of it matched: the model was not asked
    assert offered("hospital again tomorrow") == []  # meaning alone: asked for, not offered unasked
    # What a word found may be offered; in two memories, how likely it is relevant is the gate's (test_recall_gate).
    config_update(section="memory.passive_recall", values={"min_score": 0.0})
    assert offered("hospital again tomorrow") == []
    assert offered("she was operated on, right?")[0] == surgery.pk


def test_a_pasted_transcript_is_recalled_by_what_its_lines_say_not_by_who_said_them(concept_embeddings):
    person = PersonFactory(display_name="Bart")
    surgery = SemanticMemoryFactory(person=person, content="Her mother was operated on in May")
    clinic = SemanticMemoryFactory(person=person, content="The assistant at the vet was rude")
    embed_backfill_run()
    lines = "my mom is in the hospital\nI am so sorry, how is she?"
    transcript = '<Bart>: "my mom is in the hospital"\n<Assistant>: "I am so sorry, how is she?"'

    results = memory_semantic_search(query=transcript, person=person)

    # The model is asked for the lines as said: the whole, then each line (a label on every line would weigh as
    # much as its words in a short line's vector).
    assert concept_embeddings.requests[-1]["input"] == [lines, *lines.split("\n")]
    assert _ids(results)[0] == surgery.pk
    # "Assistant" named who spoke, not the vet's assistant.
    assert not {"fts", "trigram"} & set(next(r["ranks"] for r in results if r["id"] == clinic.pk))
    assert results == memory_semantic_search(query=lines, person=person)


@pytest.mark.django_db(transaction=True)
def test_a_slow_embeddings_server_never_holds_recall_idle_in_a_transaction(concept_embeddings):
    surgery = SemanticMemoryFactory(content="Her mother was operated on in May")
    mention = SemanticMemoryFactory(person=surgery.person, content="the hospital parking is expensive")
    embed_backfill_run()
    concept_embeddings.embed = lambda text: time.sleep(0.5) or concept_vector(text)
    with connection.cursor() as cursor:
        # What an operator sets in production: PostgreSQL ends a session idle in a transaction this long.
        cursor.execute("SET idle_in_transaction_session_timeout = '100ms'")

    results = memory_semantic_search(query="hospital", person=surgery.person)

    ranks = {result["id"]: result["ranks"] for result in results}
    assert ranks.keys() == {surgery.pk, mention.pk}
    assert "dense" in ranks[surgery.pk] and "fts" in ranks[mention.pk]


@pytest.mark.django_db(transaction=True)  # each thread reads on its own connection
def test_recalls_of_one_process_at_once_wait_for_a_slow_embeddings_server_together(concept_embeddings):
    surgery = SemanticMemoryFactory(content="Her mother was operated on in May")
    embed_backfill_run()
    concept_embeddings.embed = lambda text: time.sleep(0.3) or concept_vector(text)
    found: dict[int, list] = {}

    def recall(number: int) -> None:
        try:
            found[number] = memory_semantic_search(query=f"hospital visit {number}", person=surgery.person)
        finally:
            connection.close()

    threads = [threading.Thread(target=recall, args=(number,)) for number in range(4)]  # a gunicorn worker's 4
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert concept_embeddings.most_at_once == 4  # none queued behind another's wait
    assert sorted(found) == [0, 1, 2, 3]
    assert all(results[0]["id"] == surgery.pk for results in found.values())


def test_rows_not_yet_embedded_are_still_found_by_keywords(concept_embeddings):
    memory = SemanticMemoryFactory(content="allergic to peanuts")

    assert _ids(memory_semantic_search(query="peanuts", person=memory.person)) == [memory.pk]


def test_a_memory_remembered_since_the_last_backfill_is_found_first_by_its_name(concept_embeddings):
    person = PersonFactory()
    for content in (
        "Her mother was operated on in May",
        "She adopted a terrier",
        "She is allergic to peanuts",
        "Her flight home is on Friday",
    ):
        SemanticMemoryFactory(person=person, content=content)
    embed_backfill_run()
    cat = SemanticMemoryFactory(person=person, content="Her cat is called Pixel")  # no vector yet

    first = memory_semantic_search(query="Pixel", person=person, limit=2)[0]

    # The dense branch ranks every embedded memory for any query; the one the name matches, waiting for its
    # vector, is judged on its words instead of below all of them.
    assert (first["id"], first["ranks"]) == (cat.pk, {"fts": 1, "trigram": 1})
    embed_backfill_run()
    first = memory_semantic_search(query="Pixel", person=person, limit=2)[0]
    assert first["id"] == cat.pk and "dense" in first["ranks"]


def test_with_embeddings_off_recall_is_keyword_only(concept_embeddings, settings):
    memory = SemanticMemoryFactory(content="Her mother was operated on in May")
    embed_backfill_run()
    settings.ANIMA_EMBEDDINGS = "off"

    assert memory_semantic_search(query="hospital", person=memory.person) == []
    assert _ids(memory_semantic_search(query="operated", person=memory.person)) == [memory.pk]


def test_the_fact_ranks_above_a_diary_block_that_only_mentions_it(concept_embeddings):
    maya = PersonFactory(slug="maya")
    fact = SemanticMemoryFactory(person=maya, content="Maya has a peanut allergy")
    ContentBlockFactory(content="A long day: we cooked, walked, talked about school, and her peanut allergy came up")
    ContentBlockFactory(content="We planned the trip")
    SemanticMemoryFactory(person=maya, content="Maya likes the flight home")
    embed_backfill_run()

    results = memory_recall(query="peanut allergy", person=maya, memory_types=["semantic", "autobiographical"])

    assert results[0]["id"] == fact.pk


def test_a_dense_search_never_returns_another_persons_rows(concept_embeddings):
    maya, noah = PersonFactory(slug="maya"), PersonFactory(slug="noah")
    mine = SemanticMemoryFactory(person=maya, content="a dog")
    SemanticMemoryFactory.create_batch(5, person=noah, content="the puppy")
    noahs_chat = MessageFactory(conversation=ConversationFactory(person=noah), content="my terrier")
    global_memory = SemanticMemoryFactory(person=None, content="pets are welcome")
    embed_backfill_run()

    results = memory_recall(query="pet", person=maya, memory_types=["semantic", "session"])

    assert set(_ids(results)) == {mine.pk, global_memory.pk}
    assert noahs_chat.pk not in [r["id"] for r in results if r["memory_type"] == "session"]


def test_recall_explain_shows_each_branch_and_says_when_dense_is_off(concept_embeddings, settings, capsys):
    SemanticMemoryFactory(person=None, content="a flight to Lisbon")
    embed_backfill_run()

    call_command("recall", "trip", "--explain")
    on = capsys.readouterr().out
    settings.ANIMA_EMBEDDINGS = "off"
    call_command("recall", "trip", "--explain", "--json")
    off = json.loads(capsys.readouterr().out)

    assert "dense: on (concept-stub, 5 dimensions)" in on and "dense #1" in on
    assert off == {"results": [], "dense": "unavailable: ANIMA_EMBEDDINGS=off; keyword-only", "keywords_without": []}


@pytest.mark.local_embeddings
def test_the_local_model_finds_a_chinese_memory_for_an_english_question():
    memory = SemanticMemoryFactory(person=None, content="我妈妈上周在医院做了心脏手术")
    SemanticMemoryFactory(person=None, content="我们周末去海边钓鱼")
    embed_backfill_run()

    results = memory_semantic_search(query="How did my mum's heart operation go?")

    assert _ids(results)[0] == memory.pk


PERSONS = 20
VECTORS = 50_000
DIM = 16


def _random_vectors_fill(cursor, *, kind: str, table: str, owner: str, dim: int) -> None:
    """A random unit vector for every row of ``table``, made in SQL (fast); the index is built once after them."""
    cursor.execute(
        f"INSERT INTO vectors (kind, row_id, model, dim, {owner}, vec) SELECT %s, t.id, 'synthetic', %s, t.{owner},"
        " (SELECT l2_normalize(array_agg(random() - 0.5)::vector)::halfvec FROM generate_series(1, %s)"
        f" WHERE t.id > 0) FROM {table} t",
        [kind, dim, dim],
    )


def test_person_isolation_holds_on_the_hnsw_index_at_50k_vectors_over_20_persons(monkeypatch):
    """Each person owns 1/20 of the message vectors: a plain HNSW scan (ef_search candidates, then the filter)
    would return few of one person's rows; the iterative scan must fill the page with theirs only."""
    vectors_available_clear()
    monkeypatch.setattr(vectors, "HNSW_BUILD_OPTIONS", "m = 8, ef_construction = 16")  # 5x faster to build
    model = EmbeddingModel(name="synthetic", dim=DIM)
    conversations = [ConversationFactory(person=PersonFactory(slug=f"p{i}")) for i in range(PERSONS)]
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO messages (role, name, content, created_at, conversation_id)"
            " SELECT 'user', '', 'synthetic ' || g, now(), (%s::bigint[])[1 + g %% %s] FROM generate_series(1, %s) g",
            [[c.pk for c in conversations], PERSONS, VECTORS],
        )
        _random_vectors_fill(cursor, kind="message", table="messages", owner="conversation_id", dim=DIM)
        vector_indexes_ensure(model=model)
        cursor.execute("ANALYZE vectors, messages, conversations")
    person = conversations[3].person
    source = message_source(name="session", person_id=person.pk, since=None, until=None, channel=None)
    pool = pool_size(limit=30)
    sql, params = dense_statement(sources=[source], model=model, pool=pool)
    params["qvec"] = vector_literal([0.25] * DIM)
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        rows = dense_fetch(sql, params, pool=pool, using=connection.alias)
        cursor.execute("SELECT id FROM messages WHERE conversation_id = %s", [conversations[3].pk])
        owned = {row[0] for row in cursor.fetchall()}
        cursor.execute(
            "SELECT id FROM vectors v JOIN messages m ON m.id = v.row_id WHERE m.conversation_id = %s"
            " ORDER BY v.vec::halfvec(16) <=> %s::halfvec(16) LIMIT %s",
            [conversations[3].pk, params["qvec"], pool],
        )
        exact = {row[0] for row in cursor.fetchall()}

    assert "vectors_hnsw_message_" in plan
    assert len(rows) == pool
    assert {row[1] for row in rows} <= owned
    # HNSW is approximate; most of the exact nearest come back.
    assert len({row[1] for row in rows} & exact) >= 0.6 * pool


def test_a_search_over_everyones_memories_walks_the_hnsw_index():
    """Without a person the filters keep nearly every row: the index gives the nearest ones. Joining every vector
    to its memory, by hash or by merge (each vector sorted by row id), and sorting them all by distance is what the
    planner took at 1,500 memories among twice as many message vectors; it took two to seven times as long."""
    vectors_available_clear()
    # The local model's dimension and the index's real build options: at 16 dimensions, or with a smaller graph,
    # the planner took the index anyway.
    dim = 384
    model = EmbeddingModel(name="synthetic", dim=dim)
    persons = PersonFactory.create_batch(30)
    SemanticMemoryFactory.create_batch(1500, person=factory.Iterator(persons))
    MessageFactory.create_batch(3000, conversation=factory.Iterator([ConversationFactory(person=p) for p in persons]))
    with connection.cursor() as cursor:
        _random_vectors_fill(cursor, kind="entity", table="entities", owner="person_id", dim=dim)
        _random_vectors_fill(cursor, kind="message", table="messages", owner="conversation_id", dim=dim)
        vector_indexes_ensure(model=model)
        cursor.execute("ANALYZE vectors, entities, messages")
    where = f"t.primary_component = '{Component.SEMANTIC_MEMORY}' AND t.status = '{MemoryStatus.ACTIVE}'"
    source = entity_source(name="semantic", where_sql=where, person_id=None, since=None, until=None)
    pool = pool_size(limit=5)
    sql, params = dense_statement(sources=[source], model=model, pool=pool)
    params["qvec"] = vector_literal([0.05] * dim)

    # EXPLAIN under the settings the search itself runs with.
    plan = "\n".join(row[0] for row in dense_fetch("EXPLAIN " + sql, params, pool=pool, using=connection.alias))
    rows = dense_fetch(sql, params, pool=pool, using=connection.alias)

    assert "vectors_hnsw_entity_" in plan
    assert "Seq Scan on vectors" not in plan
    assert len(rows) == pool


def test_the_query_vector_travels_once_however_many_sources_search():
    """Each source's branch reads the vector from one CTE: spelled at each use, a four-source statement carried eight
    copies of its ~4 KB of text, each parsed by the server."""
    model = EmbeddingModel(name="synthetic", dim=384)
    sources = [
        message_source(name="session", person_id=None, since=None, until=None, channel=None),
        *(
            entity_source(name=name, where_sql="true", person_id=None, since=None, until=None)
            for name in ("semantic", "limbic", "autobiographical")
        ),
    ]
    sql, params = dense_statement(sources=sources, model=model, pool=pool_size(limit=5))
    params["qvec"] = vector_literal([0.05] * model.dim)
    with connection.cursor() as cursor:
        sent = cursor.cursor.mogrify(sql, params)

    assert sent.count(params["qvec"]) == 1
    assert sql.count("UNION ALL") == len(sources) - 1


def test_a_search_used_as_a_filter_lists_what_its_words_found_and_only_the_nearest_of_what_meaning_alone_found(
    concept_embeddings, admin_client
):
    person = PersonFactory(slug="leo")
    walks = {SemanticMemoryFactory(person=person, content=f"Walked the terrier along canal {n}").pk for n in range(12)}
    bread = {SemanticMemoryFactory(person=person, content=f"Bought rye bread at stall {n}").pk for n in range(15)}
    embed_backfill_run()

    def console(text: str) -> list[int]:
        response = admin_client.get(reverse("admin:memory_semanticmemory_changelist"), {"q": text})
        return [memory.pk for memory in response.context["cl"].result_list]

    def api(text: str) -> list[int]:
        return [memory["id"] for memory in operator_client().get("/api/memories/", {"q": text}).json()["results"]]

    for search in (console, api):
        # No memory holds "puppy": meaning ranks all 27; the filter lists what recall would return, the walks first.
        assert len(search("puppy")) == RECALL_LIMIT
        assert set(search("puppy")) <= walks
        # Twelve memories hold "terrier": every one is listed, past the first ten, and no bread.
        assert set(search("terrier")) == walks
        assert set(search("rye")) == bread
