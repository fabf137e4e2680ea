"""Plain references for :mod:`.similarity`: dictionaries, full matrices, Python loops."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from combee_fast.native.similarity import normalise_text


def fnv1a(code_points: Sequence[int]) -> int:
    """32-bit FNV-1a over code points."""
    h = 2166136261
    for code in code_points:
        h = ((h ^ code) * 16777619) % 2**32
    return h


def reference_embed(texts: Sequence[str], ngram: int = 3, dims_log2: int = 10) -> np.ndarray:
    """Hashed n-gram counts per text, L2-normalised in float64."""
    out = np.zeros((len(texts), 1 << dims_log2))
    for row, text in enumerate(texts):
        padded = [ord(ch) for ch in normalise_text(text)]
        counts = Counter(fnv1a(padded[i : i + ngram]) % (1 << dims_log2) for i in range(len(padded) - ngram + 1))
        for dim, count in counts.items():
            out[row, dim] = count
        norm = np.linalg.norm(out[row])
        if norm:
            out[row] /= norm
    return out


def reference_pairs_above(vectors: np.ndarray, threshold: float) -> list[tuple[int, int, float]]:
    """All ``(i, j, sim)``, ``i < j``, from the full similarity matrix."""
    full = vectors @ vectors.T
    n = len(vectors)
    return [(i, j, float(full[i, j])) for i in range(n) for j in range(i + 1, n) if full[i, j] >= threshold]


def reference_top_k(queries: np.ndarray, k: int, corpus: np.ndarray | None = None) -> tuple[list[list[int]], list[list[float]]]:
    """Per query the ``k`` best corpus rows by (similarity desc, index asc), padded with -1/-inf."""
    others = queries if corpus is None else corpus
    full = queries @ others.T
    indices: list[list[int]] = []
    sims: list[list[float]] = []
    for q in range(len(queries)):
        candidates = [(-float(full[q, j]), j) for j in range(len(others)) if corpus is not None or j != q]
        best = sorted(candidates)[:k]
        padding = k - len(best)
        indices.append([j for _, j in best] + [-1] * padding)
        sims.append([-s for s, _ in best] + [-np.inf] * padding)
    return indices, sims


def reference_retention(insight_vectors: np.ndarray, kept_vectors: np.ndarray, threshold: float) -> float:
    """Greedy in-order de-duplication of insights, then the fraction matched in ``kept``."""
    if len(insight_vectors) == 0:
        return 1.0
    if len(kept_vectors) == 0:
        return 0.0
    leaders: list[int] = []
    for i, vector in enumerate(insight_vectors):
        if not any(float(insight_vectors[leader] @ vector) >= threshold for leader in leaders):
            leaders.append(i)
    matched = sum(1 for i in leaders if float(np.max(kept_vectors @ insight_vectors[i])) >= threshold)
    return matched / len(leaders)
