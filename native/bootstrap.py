"""Bootstrap intervals over per-example scores: one mean, and the paired difference of two methods.

* :func:`mean_interval`: the mean of one method's per-example scores with a percentile bootstrap
  interval.
* :func:`paired_bootstrap`: two methods scored on the same examples; each resample draws example
  indices with replacement and takes *the same* examples for both methods, so the interval of the
  difference of their mean scores keeps the per-example pairing (what makes a small difference
  measurable at all when both methods find the same examples hard).
* :func:`bootstrap_means`: the resampled means themselves.

Resample ``b`` draws its ``n`` indices from its own counter-based stream (SplitMix64 started at
``mix(seed + GOLDEN * (b + 1))``; index = high 32 bits of a draw times ``n``, shifted down 32),
so a resample never depends on how resamples are split across threads, and the plain-Python
reference in ``tests/native/reference/bootstrap.py`` reproduces every index and every mean
bit for bit. Intervals are percentiles of the resampled means with numpy's default (linear)
interpolation. ``n`` must be below 2**32.
"""

from __future__ import annotations

import msgspec
import numpy as np
from numba import prange

from ._jit import chunk_count, helper, kernel
from .stats import _quantiles_kernel

DEFAULT_LEVEL = 0.95
"""Two-sided confidence level of an interval."""
DEFAULT_RESAMPLES = 10_000
"""Bootstrap resamples per interval."""

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S27, _S30, _S31, _S32 = np.uint64(27), np.uint64(30), np.uint64(31), np.uint64(32)


class MeanInterval(msgspec.Struct, frozen=True):
    """The mean of ``count`` scores and its percentile bootstrap interval at ``level``."""

    mean: float
    lower: float
    upper: float
    level: float
    resamples: int
    count: int


class PairedDifference(msgspec.Struct, frozen=True):
    """Mean score of method a minus method b over the same ``count`` examples, with its paired
    bootstrap interval at ``level``; ``below_zero`` is the fraction of resampled differences < 0
    (near 1: a is reliably worse; near 0: reliably better)."""

    mean_a: float
    mean_b: float
    difference: float
    lower: float
    upper: float
    level: float
    resamples: int
    count: int
    below_zero: float


def bootstrap_means(values: np.ndarray, *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                    chunks: int | None = None) -> np.ndarray:
    """The means of ``resamples`` bootstrap resamples of ``values`` (float64, one per resample)."""
    array = _scores(values, "values")
    _check(resamples, seed)
    n_chunks = chunk_count(resamples * len(array), chunks)
    if n_chunks == 1:
        return _means_serial(array, np.uint64(seed), resamples)
    return _means_parallel(array, np.uint64(seed), resamples, min(n_chunks, resamples))


def mean_interval(scores: np.ndarray, *, level: float = DEFAULT_LEVEL, resamples: int = DEFAULT_RESAMPLES,
                  seed: int = 0, chunks: int | None = None) -> MeanInterval:
    """The mean of ``scores`` with its ``level`` percentile bootstrap interval."""
    array = _scores(scores, "scores")
    lower, upper = _interval(bootstrap_means(array, resamples=resamples, seed=seed, chunks=chunks), level)
    return MeanInterval(float(array.mean()), lower, upper, level, resamples, len(array))


def paired_bootstrap(a: np.ndarray, b: np.ndarray, *, level: float = DEFAULT_LEVEL,
                     resamples: int = DEFAULT_RESAMPLES, seed: int = 0, chunks: int | None = None) -> PairedDifference:
    """Mean of ``a`` minus mean of ``b`` (``a[i]`` and ``b[i]`` score the same example) with the
    ``level`` interval of the per-example paired bootstrap."""
    first, second = _scores(a, "a"), _scores(b, "b")
    if len(first) != len(second):
        raise ValueError(f"paired_bootstrap: a has {len(first)} scores, b has {len(second)}; pair them per example")
    means = bootstrap_means(first - second, resamples=resamples, seed=seed, chunks=chunks)
    lower, upper = _interval(means, level)
    return PairedDifference(
        mean_a=float(first.mean()), mean_b=float(second.mean()), difference=float((first - second).mean()),
        lower=lower, upper=upper, level=level, resamples=resamples, count=len(first),
        below_zero=float(np.count_nonzero(means < 0.0)) / resamples,
    )


def warmup() -> None:
    """Compile (or load from cache) every kernel in this module for the dtypes the API uses."""
    values = np.linspace(0.0, 1.0, 8)
    mean_interval(values, resamples=4, chunks=1)
    paired_bootstrap(values, values[::-1], resamples=4, chunks=2)


def _scores(values: np.ndarray, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric, got dtype {array.dtype}")
    array = np.ascontiguousarray(array, dtype=np.float64).reshape(-1)
    if len(array) == 0:
        raise ValueError(f"{name}: no scores to resample")
    if len(array) >= 2**32:
        raise ValueError(f"{name}: {len(array)} scores; at most 2**32 - 1")
    if not np.isfinite(array).all():
        bad = int(np.flatnonzero(~np.isfinite(array))[0])
        raise ValueError(f"{name}: score {array[bad]} at row {bad} is not finite")
    return array


def _check(resamples: int, seed: int) -> None:
    if resamples < 1:
        raise ValueError(f"bootstrap: resamples must be >= 1, got {resamples}")
    if not 0 <= seed < 2**64:
        raise ValueError(f"bootstrap: seed must be in [0, 2**64), got {seed}")


def _interval(means: np.ndarray, level: float) -> tuple[float, float]:
    if not 0 < level < 1:
        raise ValueError(f"bootstrap: level must be in (0, 1), got {level}")
    tail = (1.0 - level) / 2.0
    lower, upper = _quantiles_kernel(means, np.array([tail, 1.0 - tail]))
    return float(lower), float(upper)


# --- kernels --------------------------------------------------------------------------------


@helper()
def _mix(z):  # type: ignore[no-untyped-def]
    """SplitMix64's output function (uint64 in, uint64 out)."""
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return z ^ (z >> _S31)


@kernel()
def _means_range(values, seed, out, lo, hi):  # type: ignore[no-untyped-def]
    """``out[b]`` = mean of resample ``b`` for ``b`` in ``[lo, hi)``."""
    n = len(values)
    count = np.uint64(n)
    for b in range(lo, hi):
        state = _mix(seed + _GOLDEN * np.uint64(b + 1))
        total = 0.0
        for _ in range(n):
            state += _GOLDEN
            total += values[((_mix(state) >> _S32) * count) >> _S32]
        out[b] = total / n


@kernel()
def _means_serial(values, seed, resamples):  # type: ignore[no-untyped-def]
    out = np.empty(resamples)
    _means_range(values, seed, out, 0, resamples)
    return out


@kernel(parallel=True)
def _means_parallel(values, seed, resamples, n_chunks):  # type: ignore[no-untyped-def]
    out = np.empty(resamples)
    for c in prange(n_chunks):
        _means_range(values, seed, out, c * resamples // n_chunks, (c + 1) * resamples // n_chunks)
    return out
