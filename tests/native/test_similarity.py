"""Similarity kernels against full-matrix references; embedder, de-duplication, retention."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from combee_fast.native import similarity
from combee_fast.native.similarity import Embedder, HashingEmbedder
from combee_fast.native.reference.similarity import (
    reference_embed,
    reference_pairs_above,
    reference_retention,
    reference_top_k,
)

# Small-integer vectors: every dot product is an exact integer in float32 whatever the
# summation order, so blocked and full products agree bit for bit, ties included.
integer_matrices = st.integers(0, 30).flatmap(
    lambda n: hnp.arrays(np.float32, (n, 4), elements=st.integers(-2, 2).map(float))
)
block_budgets = st.sampled_from([4, 16, 40, 1 << 20])  # 1 row per block ... all rows at once

texts = st.lists(st.text(alphabet="abcde XYZ\n\té✓", max_size=30), max_size=12)


@settings(max_examples=200, deadline=None)
@given(texts, st.integers(1, 4), st.integers(2, 8))
def test_hashing_embedder_matches_reference(batch: list[str], ngram: int, dims_log2: int) -> None:
    got = HashingEmbedder(ngram=ngram, dims_log2=dims_log2).embed(batch)
    assert got.dtype == np.float32 and got.shape == (len(batch), 1 << dims_log2)
    np.testing.assert_allclose(got, reference_embed(batch, ngram, dims_log2), atol=1e-6)


def test_embedding_ignores_case_and_spacing_and_is_stable_across_processes() -> None:
    vectors = HashingEmbedder().embed(["Divide  the gain\nby the COST", "divide the gain by the cost", ""])
    assert float(vectors[0] @ vectors[1]) == pytest.approx(1.0)
    assert not vectors[2].any()
    # Published FNV-1a test vector: "a" -> 0xe40c292c, so the dimension is fixed in every
    # process (unlike Python's salted hash()). " a " has unigrams " ", "a", " ": norm sqrt(5).
    unigrams = HashingEmbedder(ngram=1, dims_log2=24).embed(["a"])[0]
    assert unigrams[0xE40C292C % (1 << 24)] == pytest.approx(1 / np.sqrt(5))


@settings(max_examples=300, deadline=None)
@given(integer_matrices, st.integers(-4, 8), block_budgets)
def test_pairs_above_matches_full_matrix(vectors: np.ndarray, threshold: int, budget: int) -> None:
    pairs = similarity.pairs_above(vectors, float(threshold), max_block_bytes=budget)
    got = list(zip(pairs.left.tolist(), pairs.right.tolist(), pairs.similarity.tolist()))
    assert got == reference_pairs_above(vectors, float(threshold))


@settings(max_examples=300, deadline=None)
@given(integer_matrices, st.integers(1, 5), block_budgets, st.booleans(), st.data())
def test_top_k_matches_full_sort(queries: np.ndarray, k: int, budget: int, against_self: bool, data: st.DataObject) -> None:
    corpus = None if against_self else data.draw(integer_matrices)
    got = similarity.top_k(queries, k, corpus, max_block_bytes=budget)
    indices, sims = reference_top_k(queries, k, corpus)
    assert got.index.tolist() == indices
    assert got.similarity.tolist() == sims


sentences = st.lists(st.sampled_from([
    "always check units before dividing",
    "Always check the units before dividing.",
    "cache the api token between calls",
    "retry on http 429 with backoff",
    "sum the helpful counters per bullet",
    "",
]), max_size=8)


@settings(max_examples=100, deadline=None)
@given(sentences, sentences, st.sampled_from([0.3, 0.6, 0.9]))
def test_retention_matches_reference(insights: list[str], kept: list[str], threshold: float) -> None:
    embedder = HashingEmbedder()
    non_blank = [t for t in insights if t.strip()]
    expected = reference_retention(
        embedder.embed(non_blank).astype(np.float64) if non_blank else np.zeros((0, 1)),
        embedder.embed(kept).astype(np.float64),
        threshold,
    )
    assert similarity.retention(insights, kept, threshold) == pytest.approx(expected)


def test_retention_counts_distinct_insights_once() -> None:
    insights = [
        "always check units before dividing",
        "Always check the units before dividing!",  # a duplicate of the first
        "retry on http 429 with backoff",
    ]
    assert similarity.retention(insights, ["check units before dividing, always"], 0.6) == 0.5
    assert similarity.retention(insights, [], 0.6) == 0.0
    assert similarity.retention(["", "  "], ["anything"], 0.6) == 1.0


def test_near_duplicates_finds_the_paraphrase_only() -> None:
    bullets = ["Check units before dividing.", "check units before dividing", "Cache the API token."]
    found = similarity.near_duplicates(bullets, 0.9)
    assert [(i, j) for i, j, _ in found] == [(0, 1)]
    assert found[0][2] >= 0.9


def test_a_plugged_in_embedder_is_used_and_checked() -> None:
    class KeywordEmbedder:
        def embed(self, texts: list[str]) -> np.ndarray:
            return np.array([[1.0, 0.0] if "units" in t else [0.0, 1.0] for t in texts], np.float32)

    assert isinstance(KeywordEmbedder(), Embedder)
    assert similarity.retention(["units matter"], ["mind the units"], 0.99, embedder=KeywordEmbedder()) == 1.0

    class BrokenEmbedder:
        def embed(self, texts: list[str]) -> np.ndarray:
            return np.zeros((len(texts) + 1, 2), np.float32)

    with pytest.raises(ValueError, match=r"BrokenEmbedder.embed returned shape \(2, 2\) for 1 texts"):
        similarity.near_duplicates(["a"], embedder=BrokenEmbedder())


def test_bad_vectors_are_named() -> None:
    with pytest.raises(ValueError, match="vectors row 1 is not finite"):
        similarity.pairs_above(np.array([[1.0, 0.0], [np.nan, 0.0]]), 0.5)
    with pytest.raises(ValueError, match="must be two-dimensional"):
        similarity.top_k(np.zeros(3), 1)
    with pytest.raises(ValueError, match="queries have 2 dims, corpus has 3"):
        similarity.top_k(np.zeros((1, 2)), 1, np.zeros((1, 3)))
