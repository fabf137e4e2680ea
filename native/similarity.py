"""Text similarity without a model download: hashing embedder, blocked all-pairs and top-k.

* :class:`HashingEmbedder` maps each text to character n-gram counts hashed (FNV-1a) into
  ``2**dims_log2`` float32 dimensions, L2-normalised. Any object with the :class:`Embedder`
  shape (a real embedding model, say) can be used instead.
* :func:`pairs_above` and :func:`top_k` work on unit vectors in row blocks: a block of ``B``
  rows is compared with the other vectors by one BLAS product whose result holds at most
  ``max_block_bytes``, so working memory stays bounded whatever the number of vectors (plus
  the result itself).
* :func:`near_duplicates` de-duplicates bullets; :func:`retention` measures how many distinct
  insights of a batch survive into the kept text (the symptom of context overload).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import msgspec
import numpy as np
from numba import prange

from ._jit import chunk_count, kernel

DEFAULT_BLOCK_BYTES = 32 * 1024 * 1024
"""Default bound on the similarity block held at once (32 MiB)."""

_CODES_PER_CHUNK = 1 << 16
"""Least characters per thread when embedding."""
_SIMILARITIES_PER_CHUNK = 1 << 18
"""Least block entries per thread when scanning similarities."""

_FNV_OFFSET = 2166136261
_FNV_PRIME = 16777619


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into vectors, one row per text.

    Rows must be float32, L2-normalised (or all zero for a text with no content), so that a dot
    product is a cosine similarity.
    """

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for ``texts``: shape ``(len(texts), dims)``, float32."""
        ...


class HashingEmbedder(msgspec.Struct, frozen=True):
    """Character n-grams of the lower-cased, whitespace-collapsed text, hashed and normalised.

    The text is padded with one space on each side so word boundaries count. A text with
    fewer than ``ngram`` characters after padding embeds as the zero vector (similar to
    nothing). The hash is FNV-1a over code points, so vectors are stable across processes.
    """

    ngram: int = 3
    dims_log2: int = 10

    def __post_init__(self) -> None:
        if self.ngram < 1:
            raise ValueError(f"HashingEmbedder: ngram must be >= 1, got {self.ngram}")
        if not 1 <= self.dims_log2 <= 24:
            raise ValueError(f"HashingEmbedder: dims_log2 must be in [1, 24], got {self.dims_log2}")

    @property
    def dims(self) -> int:
        return 1 << self.dims_log2

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        padded = [normalise_text(t) for t in texts]
        lengths = np.fromiter((len(t) for t in padded), dtype=np.int64, count=len(padded))
        offsets = np.zeros(len(padded) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        codes = np.frombuffer("".join(padded).encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        out = np.zeros((len(padded), self.dims), np.float32)
        n_chunks = chunk_count(len(codes), min_items=_CODES_PER_CHUNK)
        if n_chunks == 1:
            _hash_range(codes, offsets, self.ngram, out, 0, len(padded))
        else:
            _hash_parallel(codes, offsets, self.ngram, out, min(n_chunks, len(padded)))
        return out


def normalise_text(text: str) -> str:
    """What :class:`HashingEmbedder` hashes: lower case, single spaces, one space of padding."""
    return f" {' '.join(text.lower().split())} "


class Pairs(msgspec.Struct, frozen=True):
    """Pairs ``(left[i], right[i])`` with ``left < right`` and their cosine similarity,
    ordered by ``left`` then ``right``."""

    left: np.ndarray  # int64
    right: np.ndarray  # int64
    similarity: np.ndarray  # float32

    def __len__(self) -> int:
        return len(self.left)


class Neighbours(msgspec.Struct, frozen=True):
    """Per query row, the ``k`` most similar corpus rows, best first (ties: lower index first).

    Rows with fewer than ``k`` candidates are padded with index ``-1`` and similarity ``-inf``.
    """

    index: np.ndarray  # int64 (n_queries, k)
    similarity: np.ndarray  # float32 (n_queries, k)


def pairs_above(vectors: np.ndarray, threshold: float, *, max_block_bytes: int = DEFAULT_BLOCK_BYTES) -> Pairs:
    """All pairs ``i < j`` of rows of ``vectors`` with ``vectors[i] @ vectors[j] >= threshold``.

    Row block ``r0:r1`` is compared with rows ``r0:`` only (the upper triangle), in blocks of at
    most ``max_block_bytes`` of float32 similarities.
    """
    matrix = _unit_rows(vectors, "vectors")
    n = len(matrix)
    lefts: list[np.ndarray] = []
    rights: list[np.ndarray] = []
    sims: list[np.ndarray] = []
    rows = _block_rows(n, max_block_bytes)
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        block = matrix[r0:r1] @ matrix[r0:].T
        n_chunks = min(r1 - r0, chunk_count(block.size, min_items=_SIMILARITIES_PER_CHUNK))
        if n_chunks == 1:
            left, right, sim = _extract_upper_serial(block, r0, np.float32(threshold))
        else:
            left, right, sim = _extract_upper_parallel(block, r0, np.float32(threshold), n_chunks)
        del block  # so the next block is not allocated while this one is alive
        lefts.append(left)
        rights.append(right)
        sims.append(sim)
    if not lefts:
        return Pairs(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32))
    return Pairs(np.concatenate(lefts), np.concatenate(rights), np.concatenate(sims))


def top_k(
    queries: np.ndarray,
    k: int,
    corpus: np.ndarray | None = None,
    *,
    max_block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> Neighbours:
    """The ``k`` nearest ``corpus`` rows of every query row (``corpus=None``: the queries
    themselves, each row excluding itself)."""
    if k < 1:
        raise ValueError(f"top_k: k must be >= 1, got {k}")
    query_matrix = _unit_rows(queries, "queries")
    exclude_self = corpus is None
    corpus_matrix = query_matrix if corpus is None else _unit_rows(corpus, "corpus")
    if corpus_matrix.shape[1] != query_matrix.shape[1] and len(corpus_matrix) and len(query_matrix):
        raise ValueError(
            f"top_k: queries have {query_matrix.shape[1]} dims, corpus has {corpus_matrix.shape[1]}"
        )
    n = len(query_matrix)
    index = np.empty((n, k), np.int64)
    similarity = np.empty((n, k), np.float32)
    rows = _block_rows(max(len(corpus_matrix), 1), max_block_bytes)
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        block = query_matrix[r0:r1] @ corpus_matrix.T
        n_chunks = min(r1 - r0, chunk_count(block.size, min_items=_SIMILARITIES_PER_CHUNK))
        if n_chunks == 1:
            _top_k_range(block, r0, exclude_self, index[r0:r1], similarity[r0:r1], 0, r1 - r0)
        else:
            _top_k_parallel(block, r0, exclude_self, index[r0:r1], similarity[r0:r1], n_chunks)
        del block  # so the next block is not allocated while this one is alive
    return Neighbours(index, similarity)


def near_duplicates(
    texts: Sequence[str], threshold: float = 0.9, embedder: Embedder | None = None
) -> list[tuple[int, int, float]]:
    """Pairs ``(i, j, similarity)``, ``i < j``, of texts at least ``threshold`` similar."""
    pairs = pairs_above(_embed(texts, embedder), threshold)
    return list(zip(pairs.left.tolist(), pairs.right.tolist(), pairs.similarity.tolist()))


def retention(
    insights: Sequence[str],
    kept: Sequence[str],
    threshold: float = 0.6,
    embedder: Embedder | None = None,
) -> float:
    """Fraction of the distinct insights that have a match ``>= threshold`` among ``kept``.

    Blank insights are ignored. Insights are first de-duplicated among themselves greedily in
    order: an insight is a duplicate when it is ``threshold``-similar to an earlier distinct
    one. With no insights there is nothing to lose and the result is 1.0; with insights but no
    kept text it is 0.0.
    """
    texts = [t for t in insights if t.strip()]
    if not texts:
        return 1.0
    if not kept:
        return 0.0
    vectors = _embed(texts, embedder)
    distinct = _leaders(len(texts), pairs_above(vectors, threshold))
    best = top_k(vectors[distinct], 1, _embed(kept, embedder)).similarity[:, 0]
    return float(np.count_nonzero(best >= threshold)) / len(distinct)


def warmup() -> None:
    """Compile (or load from cache) every kernel in this module for the dtypes the API uses."""
    texts = ["warm up", "warm up the kernels", ""]
    vectors = HashingEmbedder().embed(texts)
    pairs_above(vectors, 0.5)
    top_k(vectors, 2)
    retention(["warm up"], ["warm up the kernels"])
    # The parallel kernels, on inputs just big enough to be split.
    codes = np.zeros(2 * _CODES_PER_CHUNK, np.int64)
    _hash_parallel(codes, np.array([0, _CODES_PER_CHUNK, len(codes)]), 3, np.zeros((2, 8), np.float32), 2)
    block = np.zeros((2, 4), np.float32)
    _extract_upper_parallel(block, 0, np.float32(0.5), 2)
    _top_k_parallel(block, 0, True, np.zeros((2, 1), np.int64), np.zeros((2, 1), np.float32), 2)


def _embed(texts: Sequence[str], embedder: Embedder | None) -> np.ndarray:
    vectors = np.asarray((embedder or HashingEmbedder()).embed(texts))
    if vectors.ndim != 2 or len(vectors) != len(texts):
        raise ValueError(
            f"{type(embedder).__name__}.embed returned shape {vectors.shape} for {len(texts)} texts"
        )
    return vectors


def _unit_rows(vectors: np.ndarray, name: str) -> np.ndarray:
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError(f"{name} must be two-dimensional (rows are vectors), got shape {matrix.shape}")
    if matrix.size and not np.isfinite(matrix).all():
        row = int(np.flatnonzero(~np.isfinite(matrix).all(axis=1))[0])
        raise ValueError(f"{name} row {row} is not finite")
    return matrix


def _block_rows(n_columns: int, max_block_bytes: int) -> int:
    """Rows per block so that a float32 block of ``n_columns`` columns fits the budget."""
    if max_block_bytes < 4:
        raise ValueError(f"max_block_bytes must be >= 4, got {max_block_bytes}")
    return max(1, max_block_bytes // (4 * max(n_columns, 1)))


def _leaders(n: int, pairs: Pairs) -> np.ndarray:
    """Greedy de-duplication in order: indices of rows not similar to an earlier leader."""
    covered = np.zeros(n, dtype=bool)
    leaders: list[int] = []
    start = 0
    for i in range(n):
        end = start
        while end < len(pairs) and pairs.left[end] == i:
            end += 1
        if not covered[i]:
            leaders.append(i)
            covered[pairs.right[start:end]] = True
        start = end
    return np.array(leaders, dtype=np.int64)


# --- kernels --------------------------------------------------------------------------------


@kernel()
def _hash_range(codes, offsets, ngram, out, lo, hi):  # type: ignore[no-untyped-def]
    """Embed texts ``lo:hi`` into the rows of ``out``."""
    mask = out.shape[1] - 1
    for t in range(lo, hi):
        row = out[t]
        for start in range(offsets[t], offsets[t + 1] - ngram + 1):
            h = _FNV_OFFSET
            for c in range(start, start + ngram):
                h = ((h ^ codes[c]) * _FNV_PRIME) & 0xFFFFFFFF
            row[h & mask] += 1.0
        norm = 0.0
        for d in range(len(row)):
            norm += row[d] * row[d]
        if norm > 0.0:
            scale = 1.0 / np.sqrt(norm)
            for d in range(len(row)):
                row[d] *= scale


@kernel(parallel=True)
def _hash_parallel(codes, offsets, ngram, out, n_chunks):  # type: ignore[no-untyped-def]
    n = len(offsets) - 1
    for c in prange(n_chunks):
        _hash_range(codes, offsets, ngram, out, c * n // n_chunks, (c + 1) * n // n_chunks)


@kernel()
def _count_upper(block, threshold, counts, lo, hi):  # type: ignore[no-untyped-def]
    """``counts[r + 1]``: entries ``>= threshold`` right of the diagonal in block rows ``lo:hi``."""
    for r in range(lo, hi):
        values = block[r]
        found = 0
        for c in range(r + 1, len(values)):
            if values[c] >= threshold:
                found += 1
        counts[r + 1] = found


@kernel()
def _fill_upper(block, row0, threshold, starts, left, right, sim, lo, hi):  # type: ignore[no-untyped-def]
    """Write the entries counted by :func:`_count_upper` from their rows' start offsets."""
    for r in range(lo, hi):
        at = starts[r]
        values = block[r]
        for c in range(r + 1, len(values)):
            if values[c] >= threshold:
                left[at] = row0 + r
                right[at] = row0 + c
                sim[at] = values[c]
                at += 1


@kernel(parallel=True)
def _extract_upper_parallel(block, row0, threshold, n_chunks):  # type: ignore[no-untyped-def]
    n_rows = block.shape[0]
    counts = np.zeros(n_rows + 1, np.int64)
    for c in prange(n_chunks):
        _count_upper(block, threshold, counts, c * n_rows // n_chunks, (c + 1) * n_rows // n_chunks)
    starts = np.cumsum(counts)
    left = np.empty(starts[n_rows], np.int64)
    right = np.empty(starts[n_rows], np.int64)
    sim = np.empty(starts[n_rows], np.float32)
    for c in prange(n_chunks):
        _fill_upper(block, row0, threshold, starts, left, right, sim, c * n_rows // n_chunks, (c + 1) * n_rows // n_chunks)
    return left, right, sim


@kernel()
def _extract_upper_serial(block, row0, threshold):  # type: ignore[no-untyped-def]
    n_rows = block.shape[0]
    counts = np.zeros(n_rows + 1, np.int64)
    _count_upper(block, threshold, counts, 0, n_rows)
    starts = np.cumsum(counts)
    left = np.empty(starts[n_rows], np.int64)
    right = np.empty(starts[n_rows], np.int64)
    sim = np.empty(starts[n_rows], np.float32)
    _fill_upper(block, row0, threshold, starts, left, right, sim, 0, n_rows)
    return left, right, sim


@kernel()
def _top_k_range(block, row0, exclude_self, index, similarity, lo, hi):  # type: ignore[no-untyped-def]
    """Each block row's top ``k`` by insertion (stable: equal values keep the lower index)."""
    k = index.shape[1]
    for r in range(lo, hi):
        best_index = index[r]
        best = similarity[r]
        best_index[:] = -1
        best[:] = -np.inf
        values = block[r]
        for c in range(len(values)):
            if exclude_self and c == row0 + r:
                continue
            v = values[c]
            if v <= best[k - 1] and best_index[k - 1] >= 0:
                continue
            p = k - 1
            while p > 0 and (best_index[p - 1] < 0 or best[p - 1] < v):
                best[p] = best[p - 1]
                best_index[p] = best_index[p - 1]
                p -= 1
            best[p] = v
            best_index[p] = c


@kernel(parallel=True)
def _top_k_parallel(block, row0, exclude_self, index, similarity, n_chunks):  # type: ignore[no-untyped-def]
    n_rows = block.shape[0]
    for c in prange(n_chunks):
        _top_k_range(block, row0, exclude_self, index, similarity, c * n_rows // n_chunks, (c + 1) * n_rows // n_chunks)
