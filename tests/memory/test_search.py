from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from anima.api.testing import api_client
from anima.core.models import TRIGRAM_PREFIX_CHARS, Component, MemoryStatus
from memory.passive import passive_recall
from memory.search import (
    QuerySyntaxError,
    _sql,
    _stats,
    entity_source,
    hybrid_search,
    message_source,
    search_query_build,
)
from memory.search._fusion import pool_size, score_fuse
from memory.search._stats import (
    COMMON_CANDIDATES,
    COMMON_TERM_ROWS,
    TermStats,
    branch_plan_build,
    term_stats_clear,
    term_stats_get,
)
from memory.selectors import memory_recall
from tests.factories import ConversationFactory, MessageFactory, SemanticMemoryFactory
from tests.locks import table_locked

SEMANTIC_WHERE = f"t.primary_component = '{Component.SEMANTIC_MEMORY}' AND t.status = '{MemoryStatus.ACTIVE}'"


def _semantic_ids(text: str, *, limit: int = 10) -> list[int]:
    source = entity_source(name="semantic", where_sql=SEMANTIC_WHERE, person_id=None, since=None, until=None)
    return [hit.id for hit in hybrid_search(query=search_query_build(text=text), sources=[source], limit=limit)]


def test_plain_words_are_or_joined():
    cat = SemanticMemoryFactory(content="The cat sleeps on the sofa")
    dog = SemanticMemoryFactory(content="A dog barks at night")
    assert set(_semantic_ids("cat dog")) == {cat.pk, dog.pk}


def test_english_words_are_stemmed_like_the_index():
    runner = SemanticMemoryFactory(content="Leo runs every morning")
    assert _semantic_ids("running") == [runner.pk]


def test_chinese_question_finds_its_content_word_through_bigrams():
    email = SemanticMemoryFactory(content="Leo 的邮箱是 leo@example.com")
    SemanticMemoryFactory(content="Leo 喜欢 Python")
    assert _semantic_ids("你的邮箱是啥？") == [email.pk]
    assert "'邮箱'" in search_query_build(text="你的邮箱是啥？").tsquery


def test_an_email_address_finds_the_text_that_holds_it():
    email = SemanticMemoryFactory(content="Leo 的邮箱是 leo@example.com")
    SemanticMemoryFactory(content="example of a leo")
    assert _semantic_ids("leo@example.com")[0] == email.pk


def test_explicit_and_not_are_honoured():
    both = SemanticMemoryFactory(content="coffee and tea every day")
    coffee = SemanticMemoryFactory(content="coffee only")
    tea = SemanticMemoryFactory(content="tea only")
    assert _semantic_ids("coffee AND tea") == [both.pk]
    assert _semantic_ids("coffee AND NOT tea") == [coffee.pk]
    # Lower-case "and" is a plain (stop) word, never an operator: the words stay OR-ed.
    assert set(_semantic_ids("coffee and tea")) == {both.pk, coffee.pk, tea.pk}


def test_quoted_phrase_keeps_adjacency():
    adjacent = SemanticMemoryFactory(content="she loves green tea")
    SemanticMemoryFactory(content="green shirt, black tea")
    assert _semantic_ids('"green tea"') == [adjacent.pk]


def test_fusion_dedupes_by_source_and_id_and_keeps_each_branchs_rank_and_score():
    hits = score_fuse(
        rows=[
            ("semantic", "fts", 7, 1, 2.0),
            ("semantic", "fts", 8, 2, 1.0),
            ("semantic", "trigram", 7, 1, 0.9),
            ("session", "fts", 7, 1, 5.0),
        ]
    )
    assert [(hit.source, hit.id) for hit in hits] == [("semantic", 7), ("session", 7), ("semantic", 8)]
    assert (hits[0].ranks, hits[0].scores) == ({"fts": 1, "trigram": 1}, {"fts": 2.0, "trigram": 0.9})
    assert all(0 <= hit.score <= 1 for hit in hits)


def test_dense_similarities_are_compared_across_sources_keyword_scores_within_each():
    # BM25 5.0 in one source and 0.5 in another say nothing about which is better; cosine 0.9 vs 0.6 does.
    hits = score_fuse(
        rows=[
            ("semantic", "dense", 1, 1, 0.9),
            ("autobiographical", "dense", 2, 1, 0.6),
            ("semantic", "dense", 3, 2, 0.5),
            ("autobiographical", "dense", 4, 2, 0.4),
            ("semantic", "fts", 1, 1, 0.5),
            ("autobiographical", "fts", 2, 1, 5.0),
            ("semantic", "fts", 3, 2, 0.1),
            ("autobiographical", "fts", 4, 2, 1.0),
        ]
    )
    assert [hit.id for hit in hits] == [1, 2, 3, 4]


def test_a_branch_that_found_a_single_candidate_ranks_it_above_the_hits_it_did_not_find():
    rows = [
        ("semantic", "dense", 1, 1, 0.9),
        ("semantic", "dense", 2, 2, 0.6),
        ("semantic", "dense", 3, 3, 0.5),
        ("semantic", "fts", 3, 1, 0.4),  # the one row a word of the query matched
    ]

    hits = score_fuse(rows=rows)

    # The word lifts its row above a row only the dense branch ranks higher; the best meaning stays first.
    assert [hit.id for hit in hits] == [1, 3, 2]


def test_a_row_the_dense_branch_could_not_see_is_ranked_on_the_branches_that_could():
    rows = [
        ("semantic", "dense", 1, 1, 0.9),
        ("semantic", "dense", 2, 2, 0.8),
        ("semantic", "dense", 3, 3, 0.6),
        ("semantic", "fts", 9, 1, 2.0),
        ("semantic", "fts", 3, 2, 1.0),
    ]

    # Row 9 has no vector yet: missing from the dense pool says nothing about its meaning.
    assert [hit.id for hit in score_fuse(rows=rows, unseen={("semantic", 9)})] == [9, 1, 2, 3]
    # Had it a vector, missing from the pool would count as the pool's worst meaning.
    assert [hit.id for hit in score_fuse(rows=rows)] == [1, 2, 9, 3]


def test_branch_pool_is_three_times_the_limit_at_least_a_hundred_and_clamped():
    assert pool_size(limit=1) == 100
    assert pool_size(limit=50) == 150
    assert pool_size(limit=10_000) == 300


def test_trigram_branch_finds_what_fts_cannot():
    typo = SemanticMemoryFactory(content="Maya adores her cat Miso")
    assert _semantic_ids("Misso") == [typo.pk]


@pytest.mark.parametrize(("query", "other"), [("pet", "the people I keep company with"), ("gym", "a gymnast")])
def test_a_short_word_finds_its_own_forms_not_every_word_that_begins_as_it_does(query, other):
    own = SemanticMemoryFactory(content=f"Maya talks about her {query}s")
    SemanticMemoryFactory(content=f"Maya talks about {other}")
    assert _semantic_ids(query) == [own.pk]


NASTY = st.one_of(
    st.text(),
    st.text(alphabet=st.sampled_from(list("\"'\\:*&|!()<>-ab 邮箱你的 AND OR NOT \x00\x01\n\t😀")), max_size=80),
    st.lists(st.sampled_from(["AND", "OR", "NOT", '"', "a:*", "&", "|", "!", "(", ")", "\\", "邮箱", "🙂", "x"])).map(
        " ".join
    ),
)


def _search_semantic_and_session(text: str) -> None:
    """Both kinds of source in one statement; a malformed query may only be refused by QuerySyntaxError."""
    sources = [
        entity_source(name="semantic", where_sql=SEMANTIC_WHERE, person_id=None, since=None, until=None),
        message_source(name="session", person_id=None, since=None, until=None, channel=None),
    ]
    try:
        query = search_query_build(text=text)
    except QuerySyntaxError:
        return
    hybrid_search(query=query, sources=sources, limit=5)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=NASTY)
def test_no_input_makes_the_database_raise(text):
    _search_semantic_and_session(text)


@pytest.mark.parametrize("text", ["邮" * 10_000, "a:* " * 2_500, '"' * 10_000, "\\" * 10_000, "词语 " * 3_000])
def test_ten_kilobyte_queries_run(text):
    SemanticMemoryFactory(content="邮箱 词语")
    _semantic_ids(text)


def test_fts_and_trigram_branches_use_the_gin_indexes():
    MessageFactory(content="hello world")
    query = search_query_build(text="hello")
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("EXPLAIN SELECT id FROM entities WHERE search_fts @@ to_tsquery('english', %s)", [query.tsquery])
        entity_fts = "\n".join(row[0] for row in cursor.fetchall())
        trigram = f"%s <%% left(fts_segmented, {TRIGRAM_PREFIX_CHARS})"  # the trigram branch's very predicate
        cursor.execute(f"EXPLAIN SELECT id FROM entities WHERE {trigram}", [query.trigram_text])
        entity_trgm = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(
            "EXPLAIN SELECT id FROM messages WHERE content_fts @@ to_tsquery('english', %s)", [query.tsquery]
        )
        message_fts = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute(f"EXPLAIN SELECT id FROM messages WHERE {trigram}", [query.trigram_text])
        message_trgm = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET enable_seqscan")
    assert "Bitmap Index Scan on entities_search_fts_gin" in entity_fts
    assert "Bitmap Index Scan on entities_fts_segmented_trgm" in entity_trgm
    assert "Bitmap Index Scan on messages_content_fts_gin" in message_fts
    assert "Bitmap Index Scan on messages_fts_segmented_trgm" in message_trgm


def test_the_trigram_indexes_keep_statistics_of_one_value():
    """The planner estimates ``<%`` by computing word similarity over the indexed expression's statistics: at the
    default target ~200 texts of up to 2,000 characters, 1-2.5 ms of planning each trigram branch of a search."""
    for number in range(60):
        MessageFactory(content=f"message {number} about the weekend hike and a coffee")
        SemanticMemoryFactory(content=f"fact {number} about a piano lesson")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE messages, entities")
        cursor.execute(
            "SELECT tablename, coalesce(array_length(most_common_vals::text::text[], 1), 0)"
            " + coalesce(array_length(histogram_bounds::text::text[], 1), 0)"
            " FROM pg_stats WHERE tablename IN ('messages_fts_segmented_trgm', 'entities_fts_segmented_trgm')"
        )
        kept = dict(cursor.fetchall())
        cursor.execute(
            "SELECT coalesce(array_length(histogram_bounds::text::text[], 1), 0) FROM pg_stats"
            " WHERE tablename = 'messages' AND attname = 'fts_segmented'"
        )
        (column_histogram,) = cursor.fetchone()

    assert set(kept) == {"messages_fts_segmented_trgm", "entities_fts_segmented_trgm"}
    assert max(kept.values()) <= 2
    assert column_histogram > 2  # the table's own statistics are not what changed


def test_the_trigram_branch_compares_a_long_rows_prefix_and_full_text_search_the_whole_row():
    filler = " ".join(f"filler{index}" for index in range(400))  # ~4,000 characters
    early = MessageFactory(content=f"Miso the cat {filler}")
    late = MessageFactory(content=f"{filler} Tofu the dog")
    sources = [message_source(name="session", person_id=None, since=None, until=None, channel=None)]

    def ranks(text: str) -> dict[int, dict[str, int]]:
        return {
            hit.id: hit.ranks for hit in hybrid_search(query=search_query_build(text=text), sources=sources, limit=5)
        }

    assert "trigram" in ranks("Misso")[early.pk]  # a typo inside the compared prefix
    assert late.pk not in ranks("Tofuu")  # a typo past it: the trigram branch never reads that far
    assert "fts" in ranks("Tofu")[late.pk]  # full-text search still sees every word


@pytest.mark.django_db(transaction=True)
def test_a_recall_past_its_timeout_is_cancelled_a_503_for_the_api_and_no_passive_memories_for_a_turn(settings):
    settings.ANIMA_RECALL_TIMEOUT = 0.3
    conversation = ConversationFactory()
    SemanticMemoryFactory(content="Leo 的邮箱是 leo@example.com", person=None)
    question = "我的邮箱是啥？"
    assert passive_recall(conversation=conversation, user_message=question).hits  # found when nothing blocks
    with table_locked("entities"):
        response = api_client(staff=True).get("/api/recall/", {"q": "邮箱", "types": "semantic"})
        passive = passive_recall(conversation=conversation, user_message=question)

    assert response.status_code == 503
    assert response.json() == {"detail": "recall took longer than 0.3 s (ANIMA_RECALL_TIMEOUT) and was cancelled"}
    assert passive.hits == [] and passive.as_message() is None  # the turn goes on without passive memories
    # The session that was cancelled recalls normally again, under its usual settings.
    assert api_client(staff=True).get("/api/recall/", {"q": "邮箱"}).json()["results"]
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"


def test_a_recall_inside_a_callers_transaction_leaves_that_transactions_statement_timeout_as_it_was():
    SemanticMemoryFactory(content="Leo flies kites on the beach", person=None)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL statement_timeout = '42s'")
        assert memory_recall(query="kites")
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "42s"


def test_a_long_dialogue_is_searched_by_its_weighted_keywords():
    trip = SemanticMemoryFactory(content="Bart flew a kite at the beach and felt very happy")
    SemanticMemoryFactory(content="Bart ate ice cream and felt very happy")
    dialogue = "\n".join(
        [
            '<Bart>: "The wind is so strong today, I want to go outside!"',
            '<Assistant>: "Windy days are great for outdoor games. What do you have in mind?"',
            '<Bart>: "Maybe the beach? The sea looks wild when the wind blows."',
            '<Assistant>: "The beach sounds lovely. Remember the kite with the red tail?"',
            '<Bart>: "Yes! Could we bring a kite again and run along the sand?"',
        ]
    )
    query = search_query_build(text=dialogue)
    assert query.weighted_terms  # quotes in prose are not phrase syntax
    assert _semantic_ids(dialogue)[0] == trip.pk


def test_a_passages_document_frequencies_are_counted_once_not_again_for_every_row():
    for n in range(30):
        SemanticMemoryFactory(content=f"Bart flew a kite at the beach on day {n}")
    dialogue = "\n".join(
        [
            "The wind is so strong today, I want to go outside and play before dinner!",
            "Windy days are great for outdoor games. What do you have in mind for the afternoon?",
            "Maybe the beach? The sea looks wild when the wind blows across the harbour.",
            "The beach sounds lovely. Remember the kite with the red tail your uncle built?",
        ]
    )
    query = search_query_build(text=dialogue)
    assert query.weighted_terms  # a passage: its keywords are weighted by how rare they are
    source = entity_source(name="semantic", where_sql=SEMANTIC_WHERE, person_id=None, since=None, until=None)
    # Each keyword's count of the rows holding it is a CTE of its own, run once a search. Inlined into the score,
    # PostgreSQL ran it again for every matching row (a 9-line passage over 100,000 messages timed out).
    assert any(node.get("Subplan Name", "").startswith("CTE s0_kw") for node in _nodes(_plan(query, source)))


def _plan(query, source, *, analyze: bool = False) -> dict:
    """The search statement's plan for ``query`` over ``source`` (run, with ``analyze``)."""
    sql, params = _sql.search_statement(
        query=query, sources=[source], plans=_stats.branch_plans(query=query, sources=[source]), pool=100
    )
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN ({'ANALYZE, ' if analyze else ''}FORMAT JSON) " + sql, params)
        return cursor.fetchone()[0][0]["Plan"]


def _nodes(node: dict):
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def test_a_ten_kilobyte_passage_of_distinct_words_runs():
    SemanticMemoryFactory(content="word42 appears here")
    passage = " ".join(f'word{n} "q{n}\\ 词{n}' for n in range(700))[:10_000]
    assert search_query_build(text=passage).weighted_terms
    _semantic_ids(passage)


# --- Document-frequency pruning (IDF stopwording) ---

MILLION = 1_000_000.0


def _session_ids(text: str, *, limit: int = 10) -> list[int]:
    source = message_source(name="session", person_id=None, since=None, until=None, channel=None)
    return [hit.id for hit in hybrid_search(query=search_query_build(text=text), sources=[source], limit=limit)]


@pytest.fixture
def fake_stats(monkeypatch):
    """Statistics that call ``common`` lexemes frequent (half the rows of a million) and nothing else."""
    common: set[str] = set()
    monkeypatch.setattr(
        _stats,
        "term_stats_get",
        lambda *, table, column: TermStats(rows=MILLION, frequencies=dict.fromkeys(common, 0.5)),
    )
    return common


def test_common_terms_are_pruned_when_rarer_ones_exist():
    query = search_query_build(text="morning Miso")
    stats = TermStats(rows=MILLION, frequencies={"morn": 0.3, "miso": 0.0001})
    plan = branch_plan_build(query=query, stats=stats, lexemes={"morning": ("morn",), "miso": ("miso",)})
    assert plan.rare_tsquery == "'miso'"
    assert plan.common_tsquery == "'morning'"
    # The newest rows expected to hold COMMON_CANDIDATES "morning"s; a typo search for "morning" is pointless.
    assert plan.common_window == round(COMMON_CANDIDATES / 0.3)
    assert plan.trigram_text == "miso"


def test_all_common_terms_leave_only_the_capped_fill_up():
    query = search_query_build(text="morning coffee")
    stats = TermStats(rows=MILLION, frequencies={"morn": 0.3, "coffe": 0.2})
    plan = branch_plan_build(query=query, stats=stats, lexemes={"morning": ("morn",), "coffee": ("coffe",)})
    assert plan.rare_tsquery == ""
    assert plan.common_tsquery == "( 'morning' | 'coffee' )"
    assert plan.trigram_text == ""


def test_without_statistics_or_common_terms_the_plan_is_the_query():
    query = search_query_build(text="morning Miso")
    lexemes = {"morning": ("morn",), "miso": ("miso",)}
    # A lexeme ANALYZE did not list, one under the threshold, a stopword: none is pruned.
    few = TermStats(rows=MILLION, frequencies={"morn": (COMMON_TERM_ROWS - 1) / MILLION})
    for stats in (None, few):
        plan = branch_plan_build(query=query, stats=stats, lexemes=lexemes)
        assert (plan.rare_tsquery, plan.common_tsquery, plan.trigram_text) == (query.tsquery, "", query.trigram_text)
    passage = search_query_build(text=" ".join(f"word{n}" for n in range(40)))
    plan = branch_plan_build(query=passage, stats=few, lexemes={})
    assert (plan.rare_tsquery, plan.common_tsquery) == (passage.tsquery, "")


def test_term_statistics_are_read_from_analyze_and_cached():
    for n in range(40):
        MessageFactory(content=f"good morning number{n}")
    term_stats_clear()
    try:
        assert term_stats_get(table="messages", column="content_fts") is None  # never analysed
        term_stats_clear()
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE messages")
        stats = term_stats_get(table="messages", column="content_fts")
        assert stats is not None and stats.rows == pytest.approx(40)
        assert stats.frequencies["morn"] == pytest.approx(1.0)
        assert stats.rows_estimate(lexemes=("morn",)) == pytest.approx(40)
        assert stats.rows_estimate(lexemes=("unlisted",)) == 0
    finally:
        # ANALYZE's figures roll back with the test; the cache must not outlive them.
        term_stats_clear()


def test_a_word_looked_up_once_is_not_asked_of_the_database_again(fake_stats, monkeypatch):
    _stats._lexeme_cache.clear()  # nothing looked up by earlier tests
    fake_stats.add("morn")
    MessageFactory(content="Miso slept late this morning")

    def lexeme_lookups(text: str) -> int:
        with CaptureQueriesContext(connection) as queries:
            assert memory_recall(query=text, memory_types=["session"])
        return sum("tsvector_to_array" in query["sql"] for query in queries.captured_queries)

    assert lexeme_lookups("morning Miso") == 1
    assert lexeme_lookups("Miso morning") == 0


def test_rows_with_a_rare_term_rank_before_rows_with_only_common_ones(fake_stats):
    fake_stats.add("morn")
    dense = MessageFactory(content="morning morning morning, a good morning")
    miso = MessageFactory(content="Miso slept late this morning")
    assert _session_ids("morning Miso") == [miso.pk, dense.pk]
    # Unpruned, BM25 puts it first too: a row holds a word or not, however often it says it.
    fake_stats.clear()
    assert _session_ids("morning Miso") == [miso.pk, dense.pk]


def test_a_query_of_common_terms_fills_the_pool_newest_first(fake_stats):
    fake_stats.add("morn")
    older, newer = MessageFactory(content="morning"), MessageFactory(content="morning")
    MessageFactory(content="evening")
    assert _session_ids("morning") == [newer.pk, older.pk]


def test_common_matches_outside_the_newest_rows_are_still_found(fake_stats, monkeypatch):
    fake_stats.add("morn")
    for module in (_stats, _sql):  # the window: the newest two rows of "the million"
        monkeypatch.setattr(module, "COMMON_CANDIDATES", 1)
    old = MessageFactory(content="morning walk")
    for _ in range(3):
        MessageFactory(content="evening walk")
    assert _session_ids("morning") == [old.pk]


def test_pruned_search_honours_the_sources_filters(fake_stats):
    fake_stats.add("morn")
    MessageFactory(content="morning tea", role="tool")
    user = MessageFactory(content="morning")
    assert _session_ids("morning") == [user.pk]  # common only: the fill-up tier
    assert _session_ids("tea morning") == [user.pk]  # the rare tier finds no user/assistant row


# A window of recent turns, as passive recall searches it: "morning" in every line, "Miso" in one.
WINDOW = "\n".join(
    [
        "Good morning! I slept badly and the whole morning went by in a blur of emails.",
        "Morning coffee helps. Did anything keep you awake, or was it the noise outside again?",
        "The neighbours were loud all night, so this morning I walked to the park early.",
        "A walk in the morning air is a good reset. Did you take Miso along to the park?",
    ]
)


def test_a_passages_common_words_are_pruned_like_a_questions():
    passage = search_query_build(text=WINDOW)
    assert passage.weighted_terms and "morning" in passage.terms
    stats = TermStats(rows=MILLION, frequencies={"morn": 0.3})
    lexemes = {word: (word,) for word in passage.terms} | {"morning": ("morn",)}
    plan = branch_plan_build(query=passage, stats=stats, lexemes=lexemes)
    assert plan.common_tsquery == "'morning'" and "'miso'" in plan.rare_tsquery and "morning" not in plan.rare_tsquery
    # The common word's document frequency comes from the statistics; every other word's is counted.
    assert dict(zip(passage.terms, plan.common_shares, strict=True)) == {
        term: 0.3 if term == "morning" else None for term in passage.terms
    }


def test_a_window_with_common_words_ranks_the_rows_it_finds_as_it_would_unpruned(fake_stats):
    older = MessageFactory(content="a slow morning")
    miso = MessageFactory(content="Miso chased a pigeon")
    newer = MessageFactory(content="morning again")
    MessageFactory(content="evening tea")
    unpruned = _session_ids(WINDOW)
    # "morning" in half the rows, as the statistics say: its weight is the same, counted or read from them.
    fake_stats.add("morn")
    source = message_source(name="session", person_id=None, since=None, until=None, channel=None)
    assert _stats.branch_plans(query=search_query_build(text=WINDOW), sources=[source])[0].common_tsquery
    pruned = _session_ids(WINDOW)
    assert pruned == unpruned and set(pruned) == {older.pk, miso.pk, newer.pk}


def test_past_the_counted_rows_a_common_word_never_outweighs_a_rare_one(fake_stats, monkeypatch):
    # Past IDF_SAMPLE rows, a rare word's rows are counted in all the source (two here) but the source's in the
    # first IDF_SAMPLE only: a common word's share of those few (half of 3) would make it the rarer of the two.
    monkeypatch.setattr(_sql, "IDF_SAMPLE", 3)
    fake_stats.add("morn")
    miso = [MessageFactory(content="Miso naps") for _ in range(2)]
    for _ in range(3):
        MessageFactory(content="evening tea")
    morning = MessageFactory(content="morning naps")
    source = message_source(name="session", person_id=None, since=None, until=None, channel=None)
    hits = hybrid_search(query=search_query_build(text="morning Miso"), sources=[source], limit=10, branches=["fts"])
    assert [hit.id for hit in hits] == [miso[1].pk, miso[0].pk, morning.pk]


def test_a_common_words_rows_are_not_counted_for_its_weight(fake_stats):
    fake_stats.add("morn")
    for n in range(5):
        MessageFactory(content=f"morning walk number {n} with Miso")
    query = search_query_build(text="morning Miso")
    source = message_source(name="session", person_id=None, since=None, until=None, channel=None)
    (keywords,) = (
        node for node in _nodes(_plan(query, source, analyze=True)) if node.get("Subplan Name") == "CTE s0_kw"
    )
    # A word's rows are counted by a subquery of the keywords' CTE, run once for "miso" and not for "morning". (Its
    # scans may loop per conversation, as the planner joins them: the subquery's own runs are what count.)
    counts = [
        node
        for child in keywords["Plans"]
        for node in _nodes(child)
        if node.get("Parent Relationship") in {"SubPlan", "InitPlan"}
    ]
    assert sum(node["Actual Loops"] for node in counts) == 1, counts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=NASTY)
def test_no_input_makes_the_database_raise_when_terms_are_pruned(text, fake_stats):
    # Lexemes of an even length count as common: queries mix both tiers.
    fake_stats.clear()
    fake_stats.update(f"{c}{c}" for c in "abcdefghijklmnopqrstuvwxyz")
    fake_stats.update({"邮箱", "x", "ab", "and", "or", "not"})
    _search_semantic_and_session(text)


PASSAGE_WORDS = st.one_of(
    st.sampled_from(["aa", "bb", "ab", "x", "邮箱", "Miso", "it's", "\\", "'q'", "a:*", "😀", "leo@example.com"]),
    st.integers(min_value=0, max_value=300).map(lambda n: f"w{n}"),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.lists(PASSAGE_WORDS, min_size=6, max_size=10).map(" ".join), min_size=4, max_size=9))
def test_no_passage_makes_the_database_raise_when_its_words_are_pruned(lines, fake_stats):
    passage = "\n".join(lines)
    query = search_query_build(text=passage)
    assume(query.weighted_terms and not query.trigram_text)  # a passage, not a question
    fake_stats.clear()
    fake_stats.update({"aa", "bb", "ab", "邮箱", "x"})
    MessageFactory(content="aa bb Miso 邮箱 it's leo@example.com w1 w2")
    _search_semantic_and_session(passage)
