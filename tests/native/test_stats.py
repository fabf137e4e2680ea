"""Statistics kernels against plain references, and their stability on offset data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from combee_fast.native import stats
from combee_fast.native.reference.stats import (
    binomial_beta_cdf,
    reference_beta_quantile,
    reference_group_moments,
    reference_moments,
    reference_quantiles,
)

finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(finite, max_size=200), st.sampled_from([0.0, 1e9, -3e7]), st.integers(1, 9), st.integers(1, 4))
def test_moments_match_reference(values: list[float], offset: float, block: int, chunks: int) -> None:
    shifted = [v + offset for v in values]
    got = stats.moments(np.array(shifted), block=block, chunks=chunks)
    count, mean, m2 = reference_moments(shifted)
    assert got.count == count
    scale = max([abs(v) for v in shifted], default=0.0)
    assert got.mean == pytest.approx(mean, rel=1e-12, abs=1e-12 * scale)
    # M2's error bound: a few ulps of (value magnitude)^2 per element, relative to spread.
    assert got.m2 == pytest.approx(m2, rel=1e-9, abs=1e-12 * len(values) * max(values, key=abs, default=0.0) ** 2 + 1e-9)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite, max_size=50), st.lists(finite, max_size=50))
def test_merge_is_the_moments_of_the_union(a: list[float], b: list[float]) -> None:
    merged = stats.merge_moments(stats.moments(np.array(a)), stats.moments(np.array(b)))
    count, mean, m2 = reference_moments(a + b)
    assert merged.count == count
    assert merged.mean == pytest.approx(mean, rel=1e-9, abs=1e-6)
    assert merged.m2 == pytest.approx(m2, rel=1e-9, abs=1e-3)


def test_variance_is_exact_for_large_offset_with_unit_spread() -> None:
    rng = np.random.default_rng(3)
    noise = rng.standard_normal(2_000_000)
    values = 1e9 + noise
    exact = np.var(values - 1e9)  # the subtraction is exact in float64 at this magnitude
    got = stats.moments(values).variance()
    assert abs(got - exact) / exact < 1e-12
    naive = np.mean(values**2) - np.mean(values) ** 2  # the textbook formula this replaces
    assert abs(naive - exact) / exact > 1e-3


def test_empty_and_single_value() -> None:
    assert stats.moments(np.array([])) == stats.Moments()
    assert math.isnan(stats.Moments().variance())
    assert stats.moments(np.array([5.0])) == stats.Moments(1, 5.0, 0.0)
    assert stats.moments(np.array([1.0, 2.0, 3.0, 4.0])).variance(ddof=1) == pytest.approx(5 / 3)


def test_nan_propagates_and_bad_input_is_named() -> None:
    assert math.isnan(stats.moments(np.array([1.0, math.nan, 2.0])).mean)
    with pytest.raises(ValueError, match="values must be numeric"):
        stats.moments(np.array(["a"]))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=12),
    st.floats(0.2, 5.0),
    st.floats(0.2, 5.0),
    st.floats(0.5, 0.99),
)
def test_beta_rates_match_reference(counts: list[tuple[int, int]], prior_a: float, prior_b: float, level: float) -> None:
    helpful = np.array([c[0] for c in counts], dtype=np.int64)
    harmful = np.array([c[1] for c in counts], dtype=np.int64)
    rates = stats.beta_rates(helpful, harmful, prior_a=prior_a, prior_b=prior_b, level=level)
    tail = (1 - level) / 2
    for i, (h, hm) in enumerate(counts):
        a, b = h + prior_a, hm + prior_b
        assert rates.mean[i] == pytest.approx(a / (a + b))
        assert rates.lower[i] == pytest.approx(reference_beta_quantile(a, b, tail), abs=1e-12)
        assert rates.upper[i] == pytest.approx(reference_beta_quantile(a, b, 1 - tail), abs=1e-12)
        assert rates.lower[i] < rates.upper[i]  # (a skewed posterior can have its mean outside)


@pytest.mark.parametrize(("helpful", "harmful"), [(0, 0), (3, 1), (40, 2), (1, 60), (700, 300)])
def test_beta_bounds_hit_their_tail_mass_by_the_binomial_identity(helpful: int, harmful: int) -> None:
    rates = stats.beta_rates(np.array([helpful]), np.array([harmful]), level=0.9)
    a, b = helpful + 1, harmful + 1
    assert binomial_beta_cdf(a, b, float(rates.lower[0])) == pytest.approx(0.05, abs=1e-9)
    assert binomial_beta_cdf(a, b, float(rates.upper[0])) == pytest.approx(0.95, abs=1e-9)


def test_beta_rates_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="counts must be >= 0"):
        stats.beta_rates(np.array([-1]), np.array([0]))
    with pytest.raises(ValueError, match="level must be in"):
        stats.beta_rates(np.array([1]), np.array([0]), level=1.0)
    empty = stats.beta_rates(np.array([], int), np.array([], int))
    assert len(empty.mean) == len(empty.lower) == 0


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5).flatmap(lambda g: st.tuples(st.just(g), st.lists(st.tuples(finite, st.integers(0, g - 1)), max_size=60))))
def test_group_moments_match_reference(case: tuple[int, list[tuple[float, int]]]) -> None:
    n_groups, rows = case
    values, groups = [r[0] for r in rows], [r[1] for r in rows]
    got = stats.group_moments(np.array(values), np.array(groups, dtype=np.int64), n_groups)
    count, mean, m2 = reference_group_moments(values, groups, n_groups)
    assert got.count.tolist() == count
    assert got.mean.tolist() == pytest.approx(mean, rel=1e-9, abs=1e-6)
    assert got.m2.tolist() == pytest.approx(m2, rel=1e-9, abs=1e-3)
    variance = got.variance()
    assert all(math.isnan(v) == (c == 0) for v, c in zip(variance, count))


def test_group_outside_range_is_named() -> None:
    with pytest.raises(ValueError, match=r"row 1: group 3 is outside \[0, 3\)"):
        stats.group_moments(np.array([1.0, 2.0]), np.array([0, 3]), 3)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0, 1e4, allow_nan=False), max_size=300))
def test_latency_quantiles_match_numpy(latencies: list[float]) -> None:
    got = stats.latency_quantiles(np.array(latencies))
    expected = reference_quantiles(latencies, [0.5, 0.95, 0.99])
    assert got.count == len(latencies)
    assert [got.p50, got.p95, got.p99] == pytest.approx(expected, rel=1e-12, abs=1e-12, nan_ok=True)


def test_negative_or_nan_latency_is_named() -> None:
    with pytest.raises(ValueError, match="latency -1.0 at row 2"):
        stats.latency_quantiles(np.array([0.1, 0.2, -1.0]))
    with pytest.raises(ValueError, match="latency nan at row 0"):
        stats.latency_quantiles(np.array([math.nan]))
