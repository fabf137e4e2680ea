"""Statistics the batch-size controller and the reports read: moments, rates, quantiles.

* :func:`moments`: count, mean and M2 (sum of squared deviations) in one vectorised pass over
  memory. All arithmetic happens on values shifted by the first value, so a large common
  offset (1e9 with unit spread) costs no precision. Each block of :data:`BLOCK` values is
  summarised by sums of deviations from the block's own first value, and blocks are joined
  with the parallel merge of Chan, Golub and LeVeque. The one weak case is a block whose
  first value is an extreme outlier: the relative error of that block's M2 grows like
  ``1e-16 * (outlier distance / spread)**2``.
* :func:`beta_rates`: per-bullet helpful rate under a Beta(prior_a, prior_b) prior, posterior
  mean and an equal-tailed credible interval.
* :func:`group_moments`: count/mean/M2 per group id (e.g. reward variance per example).
* :func:`latency_quantiles`: P50/P95/P99 with numpy's default (linear) interpolation.
"""

from __future__ import annotations

import math

import msgspec
import numpy as np
from numba import prange

from ._jit import chunk_count, helper, kernel

BLOCK = 8192
"""Values per block in :func:`moments`."""

_BULLETS_PER_CHUNK = 32
"""Least bullets per thread in :func:`beta_rates` (each costs ~120 incomplete-beta evaluations)."""

_SUMS = {"reassoc", "nsz", "contract"}
"""Fast-math flags that let LLVM vectorise sums (reordering only: NaN and inf still propagate).
Numba compiles a called kernel with its caller's flags, so the caller carries them too."""


class Moments(msgspec.Struct, frozen=True):
    """Count, mean and M2 of a sample; ``Moments()`` (all zero) is the empty sample."""

    count: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def variance(self, ddof: int = 0) -> float:
        """``m2 / (count - ddof)``; NaN when ``count <= ddof``."""
        return self.m2 / (self.count - ddof) if self.count > ddof else math.nan


class BetaRates(msgspec.Struct, frozen=True):
    """Per-bullet posterior of the helpful rate: mean and the ``level`` credible interval."""

    mean: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    level: float


class GroupMoments(msgspec.Struct, frozen=True):
    """Per-group count (int64), mean and M2 (float64); empty groups have mean 0 and M2 0."""

    count: np.ndarray
    mean: np.ndarray
    m2: np.ndarray

    def variance(self, ddof: int = 0) -> np.ndarray:
        """Per-group ``m2 / (count - ddof)``; NaN where ``count <= ddof``."""
        denominator = self.count - ddof
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(denominator > 0, self.m2 / np.maximum(denominator, 1), np.nan)


class LatencyQuantiles(msgspec.Struct, frozen=True):
    """P50/P95/P99 of a latency sample (NaN when it is empty) and its size."""

    count: int
    p50: float
    p95: float
    p99: float


def moments(values: np.ndarray, *, block: int = BLOCK, chunks: int | None = None) -> Moments:
    """Count, mean and M2 of ``values`` (any shape, read as float64). NaN propagates."""
    array = _float_vector(values, "values")
    if block < 1:
        raise ValueError(f"moments: block must be >= 1, got {block}")
    n_chunks = chunk_count(len(array), chunks)
    if n_chunks == 1:
        count, mean, m2 = _moments_serial(array, block)
    else:
        count, mean, m2 = _moments_parallel(array, block, n_chunks)
    return Moments(int(count), float(mean), float(m2))


def merge_moments(a: Moments, b: Moments) -> Moments:
    """The moments of the union of two disjoint samples (Chan et al.)."""
    count, mean, m2 = _merge(a.count, a.mean, a.m2, b.count, b.mean, b.m2)
    return Moments(int(count), float(mean), float(m2))


def beta_rates(
    helpful: np.ndarray,
    harmful: np.ndarray,
    *,
    prior_a: float = 1.0,
    prior_b: float = 1.0,
    level: float = 0.9,
) -> BetaRates:
    """Posterior Beta(prior_a + helpful, prior_b + harmful) of each bullet's helpful rate.

    Returns the posterior mean and the equal-tailed ``level`` credible interval; a bullet is
    reliably helpful when ``lower`` is high, reliably harmful when ``upper`` is low.
    """
    h = _float_vector(helpful, "helpful")
    hm = _float_vector(harmful, "harmful")
    if len(h) != len(hm):
        raise ValueError(f"beta_rates: helpful has {len(h)} values, harmful has {len(hm)}")
    if len(h) and (h.min() < 0 or hm.min() < 0):
        raise ValueError("beta_rates: counts must be >= 0")
    if not (prior_a > 0 and prior_b > 0):
        raise ValueError(f"beta_rates: priors must be > 0, got a={prior_a}, b={prior_b}")
    if not 0 < level < 1:
        raise ValueError(f"beta_rates: level must be in (0, 1), got {level}")
    a, b, tail = h + prior_a, hm + prior_b, (1.0 - level) / 2.0
    n_chunks = chunk_count(len(a), min_items=_BULLETS_PER_CHUNK)
    if n_chunks == 1:
        mean, lower, upper = _beta_rates_serial(a, b, tail)
    else:
        mean, lower, upper = _beta_rates_parallel(a, b, tail, n_chunks)
    return BetaRates(mean, lower, upper, level)


def group_moments(values: np.ndarray, groups: np.ndarray, n_groups: int) -> GroupMoments:
    """Count, mean and M2 of ``values`` per group id in ``[0, n_groups)`` (two passes)."""
    array = _float_vector(values, "values")
    ids = np.ascontiguousarray(groups, dtype=np.int64)
    if ids.ndim != 1 or len(ids) != len(array):
        raise ValueError(f"group_moments: groups has shape {ids.shape}, values has {len(array)} values")
    if n_groups < 0:
        raise ValueError(f"group_moments: n_groups must be >= 0, got {n_groups}")
    if len(ids) and (ids.min() < 0 or ids.max() >= n_groups):
        bad = int(np.flatnonzero((ids < 0) | (ids >= n_groups))[0])
        raise ValueError(f"group_moments: row {bad}: group {ids[bad]} is outside [0, {n_groups})")
    return GroupMoments(*_group_moments_kernel(array, ids, n_groups))


def latency_quantiles(latencies: np.ndarray) -> LatencyQuantiles:
    """P50/P95/P99 of ``latencies`` (seconds, >= 0); NaN quantiles for an empty sample."""
    array = _float_vector(latencies, "latencies")
    if len(array) and not (array.min() >= 0):  # also catches NaN
        bad = int(np.flatnonzero(~(array >= 0))[0])
        raise ValueError(f"latency_quantiles: latency {array[bad]} at row {bad} is not a time >= 0")
    p50, p95, p99 = _quantiles_kernel(array, np.array([0.5, 0.95, 0.99]))
    return LatencyQuantiles(len(array), float(p50), float(p95), float(p99))


def warmup() -> None:
    """Compile (or load from cache) every kernel in this module for the dtypes the API uses."""
    values = np.arange(8, dtype=np.float64)
    moments(values, chunks=1)
    moments(values, chunks=2)
    merge_moments(Moments(1, 0.0, 0.0), Moments(1, 1.0, 0.0))
    beta_rates(np.array([1, 0]), np.array([0, 2]))
    beta_rates(np.ones(2 * _BULLETS_PER_CHUNK), np.ones(2 * _BULLETS_PER_CHUNK))
    group_moments(values, np.zeros(8, np.int64), 1)
    latency_quantiles(values)


def _float_vector(values: np.ndarray, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric, got dtype {array.dtype}")
    return np.ascontiguousarray(array, dtype=np.float64).reshape(-1)


# --- kernels --------------------------------------------------------------------------------


@helper()
def _merge(n_a, mean_a, m2_a, n_b, mean_b, m2_b):  # type: ignore[no-untyped-def]
    """Chan et al.: moments of the union of two samples."""
    if n_a == 0:
        return n_b, mean_b, m2_b
    if n_b == 0:
        return n_a, mean_a, m2_a
    n = n_a + n_b
    delta = mean_b - mean_a
    return n, mean_a + delta * (n_b / n), m2_a + m2_b + delta * delta * (n_a * (n_b / n))


@kernel(fastmath=_SUMS)
def _block_moments(block, shift):  # type: ignore[no-untyped-def]
    """Mean and M2 of ``block - shift`` from deviations from the block's first value."""
    first = block[0]
    s1 = 0.0
    s2 = 0.0
    for i in range(len(block)):
        d = block[i] - first
        s1 += d
        s2 += d * d
    n = len(block)
    return (first - shift) + s1 / n, s2 - s1 * (s1 / n)


@kernel(fastmath=_SUMS)
def _moments_range(x, block, shift, first_block, end_block):  # type: ignore[no-untyped-def]
    """Merged moments of ``x - shift`` over blocks ``first_block:end_block``."""
    n = len(x)
    count, mean, m2 = 0, 0.0, 0.0
    for b in range(first_block, end_block):
        lo = b * block
        hi = min(n, lo + block)
        block_mean, block_m2 = _block_moments(x[lo:hi], shift)
        count, mean, m2 = _merge(count, mean, m2, hi - lo, block_mean, block_m2)
    return count, mean, m2


@kernel(fastmath=_SUMS)
def _moments_serial(x, block):  # type: ignore[no-untyped-def]
    if len(x) == 0:
        return 0, 0.0, 0.0
    count, mean, m2 = _moments_range(x, block, x[0], 0, (len(x) + block - 1) // block)
    return count, x[0] + mean, m2


@kernel(parallel=True, fastmath=_SUMS)
def _moments_parallel(x, block, n_chunks):  # type: ignore[no-untyped-def]
    n = len(x)
    if n == 0:
        return 0, 0.0, 0.0
    shift = x[0]
    n_blocks = (n + block - 1) // block
    counts = np.zeros(n_chunks, np.int64)
    means = np.zeros(n_chunks)
    m2s = np.zeros(n_chunks)
    for c in prange(n_chunks):
        counts[c], means[c], m2s[c] = _moments_range(
            x, block, shift, c * n_blocks // n_chunks, (c + 1) * n_blocks // n_chunks
        )
    count, mean, m2 = 0, 0.0, 0.0
    for c in range(n_chunks):
        count, mean, m2 = _merge(count, mean, m2, counts[c], means[c], m2s[c])
    return count, shift + mean, m2


@kernel()
def _group_moments_kernel(x, groups, n_groups):  # type: ignore[no-untyped-def]
    counts = np.zeros(n_groups, np.int64)
    sums = np.zeros(n_groups)
    for i in range(len(x)):
        counts[groups[i]] += 1
        sums[groups[i]] += x[i]
    means = np.zeros(n_groups)
    for g in range(n_groups):
        if counts[g] > 0:
            means[g] = sums[g] / counts[g]
    deviations = np.zeros(n_groups)
    m2 = np.zeros(n_groups)
    for i in range(len(x)):
        d = x[i] - means[groups[i]]
        deviations[groups[i]] += d
        m2[groups[i]] += d * d
    for g in range(n_groups):
        if counts[g] > 0:
            means[g] += deviations[g] / counts[g]
            m2[g] -= deviations[g] * deviations[g] / counts[g]
    return counts, means, m2


@kernel()
def _quantiles_kernel(x, qs):  # type: ignore[no-untyped-def]
    out = np.full(len(qs), np.nan)
    n = len(x)
    if n == 0:
        return out
    ordered = np.sort(x)
    for j in range(len(qs)):
        position = (n - 1) * qs[j]
        lo = int(math.floor(position))
        hi = min(lo + 1, n - 1)
        fraction = position - lo
        a, b = ordered[lo], ordered[hi]
        # numpy's lerp: exact at both ends, symmetric around fraction 0.5
        out[j] = a + (b - a) * fraction if fraction < 0.5 else b - (b - a) * (1.0 - fraction)
    return out


_CF_EPSILON = 1e-15
_CF_TINY = 1e-300
_CF_MAX_TERMS = 10_000


@helper()
def _beta_continued_fraction(a, b, x):  # type: ignore[no-untyped-def]
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > _CF_TINY else _CF_TINY)
    h = d
    for m in range(1, _CF_MAX_TERMS + 1):
        m2 = 2 * m
        for numerator in (
            m * (b - m) * x / ((a - 1.0 + m2) * (a + m2)),
            -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1.0 + m2)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _CF_TINY else _CF_TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _CF_TINY else _CF_TINY
            h *= d * c
        if abs(d * c - 1.0) < _CF_EPSILON:
            break
    return h


@helper()
def _beta_cdf(a, b, x):  # type: ignore[no-untyped-def]
    """Regularised incomplete beta ``I_x(a, b)``: the Beta(a, b) CDF at ``x``."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_continued_fraction(a, b, x) / a
    return 1.0 - front * _beta_continued_fraction(b, a, 1.0 - x) / b


@helper()
def _beta_quantile(a, b, p):  # type: ignore[no-untyped-def]
    """The ``p`` quantile of Beta(a, b) by bisection on the CDF (to ~1e-15 in x)."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if _beta_cdf(a, b, mid) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@kernel()
def _beta_rates_range(a, b, tail, mean, lower, upper, lo, hi):  # type: ignore[no-untyped-def]
    for i in range(lo, hi):
        mean[i] = a[i] / (a[i] + b[i])
        lower[i] = _beta_quantile(a[i], b[i], tail)
        upper[i] = _beta_quantile(a[i], b[i], 1.0 - tail)


@kernel()
def _beta_rates_serial(a, b, tail):  # type: ignore[no-untyped-def]
    n = len(a)
    mean, lower, upper = np.empty(n), np.empty(n), np.empty(n)
    _beta_rates_range(a, b, tail, mean, lower, upper, 0, n)
    return mean, lower, upper


@kernel(parallel=True)
def _beta_rates_parallel(a, b, tail, n_chunks):  # type: ignore[no-untyped-def]
    n = len(a)
    mean, lower, upper = np.empty(n), np.empty(n), np.empty(n)
    for c in prange(n_chunks):
        _beta_rates_range(a, b, tail, mean, lower, upper, c * n // n_chunks, (c + 1) * n // n_chunks)
    return mean, lower, upper
