"""Plain-Python references for :mod:`.stats`, written for clarity rather than speed."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def reference_moments(values: Sequence[float]) -> tuple[int, float, float]:
    """Count, mean and M2 by the exact-summation two-pass formula."""
    n = len(values)
    if n == 0:
        return 0, 0.0, 0.0
    mean = math.fsum(values) / n
    return n, mean, math.fsum((v - mean) ** 2 for v in values)


def reference_group_moments(
    values: Sequence[float], groups: Sequence[int], n_groups: int
) -> tuple[list[int], list[float], list[float]]:
    """Per-group :func:`reference_moments`."""
    members: list[list[float]] = [[] for _ in range(n_groups)]
    for value, group in zip(values, groups):
        members[group].append(value)
    summaries = [reference_moments(m) for m in members]
    return [s[0] for s in summaries], [s[1] for s in summaries], [s[2] for s in summaries]


def reference_quantiles(values: Sequence[float], qs: Sequence[float]) -> list[float]:
    """numpy's linear-interpolation quantiles; NaN for an empty sample."""
    if len(values) == 0:
        return [math.nan] * len(qs)
    return [float(v) for v in np.quantile(np.asarray(values, dtype=np.float64), qs)]


def reference_beta_cdf(a: float, b: float, x: float) -> float:
    """``I_x(a, b)`` by the continued fraction, evaluated term by term as written."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _continued_fraction(a, b, x) / a
    return 1.0 - front * _continued_fraction(b, a, 1.0 - x) / b


def _continued_fraction(a: float, b: float, x: float) -> float:
    tiny = 1e-300

    def guard(v: float) -> float:
        return v if abs(v) > tiny else tiny

    c, d = 1.0, 1.0 / guard(1.0 - (a + b) * x / (a + 1.0))
    h = d
    for m in range(1, 10_001):
        even = m * (b - m) * x / ((a - 1.0 + 2 * m) * (a + 2 * m))
        odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1.0 + 2 * m))
        for numerator in (even, odd):
            d = 1.0 / guard(1.0 + numerator * d)
            c = guard(1.0 + numerator / c)
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def reference_beta_quantile(a: float, b: float, p: float) -> float:
    """Bisection on :func:`reference_beta_cdf`."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if reference_beta_cdf(a, b, mid) < p else (lo, mid)
    return (lo + hi) / 2


def binomial_beta_cdf(a: int, b: int, x: float) -> float:
    """``I_x(a, b)`` for integer ``a, b`` by the binomial identity (independent of the above)."""
    n = a + b - 1
    return math.fsum(math.comb(n, j) * x**j * (1 - x) ** (n - j) for j in range(a, n + 1))
