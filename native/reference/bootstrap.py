"""Plain-Python reference for :mod:`native.bootstrap`: the same streams, written for clarity."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MASK = 2**64 - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix(z: int) -> int:
    """SplitMix64's output function on Python ints, wrapped to 64 bits."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def resample_indices(n: int, seed: int, b: int) -> list[int]:
    """The ``n`` example indices of resample ``b``."""
    state = mix((seed + GOLDEN * (b + 1)) & MASK)
    indices = []
    for _ in range(n):
        state = (state + GOLDEN) & MASK
        indices.append(((mix(state) >> 32) * n) >> 32)
    return indices


def reference_bootstrap_means(values: Sequence[float], resamples: int, seed: int) -> list[float]:
    """Mean of each resample, summed left to right as the kernel sums."""
    means = []
    for b in range(resamples):
        total = 0.0
        for i in resample_indices(len(values), seed, b):
            total += values[i]
        means.append(total / len(values))
    return means


def reference_interval(means: Sequence[float], level: float) -> tuple[float, float]:
    """numpy's linear-interpolation percentiles at the two tails of ``level``."""
    tail = (1.0 - level) / 2.0
    lower, upper = np.quantile(np.asarray(means, dtype=np.float64), [tail, 1.0 - tail])
    return float(lower), float(upper)


def reference_paired(a: Sequence[float], b: Sequence[float], resamples: int, seed: int, level: float
                     ) -> tuple[float, float, float, float]:
    """Difference of means, interval bounds and the fraction of resampled differences below zero."""
    differences = [x - y for x, y in zip(a, b)]
    means = reference_bootstrap_means(differences, resamples, seed)
    lower, upper = reference_interval(means, level)
    return sum(differences) / len(differences), lower, upper, sum(m < 0 for m in means) / resamples
