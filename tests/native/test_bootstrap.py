"""Bootstrap kernels against the plain reference: the same resamples bit for bit, any thread split."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from combee_fast.native import bootstrap
from combee_fast.native.reference.bootstrap import (
    reference_bootstrap_means,
    reference_interval,
    reference_paired,
    resample_indices,
)

score = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)
seeds = st.integers(0, 2**64 - 1)


@settings(max_examples=150, deadline=None)
@given(st.lists(score, min_size=1, max_size=60), st.integers(1, 40), seeds, st.integers(1, 4))
def test_resampled_means_equal_the_reference_exactly(values: list[float], resamples: int, seed: int, chunks: int) -> None:
    got = bootstrap.bootstrap_means(np.array(values), resamples=resamples, seed=seed, chunks=chunks)
    assert got.tolist() == reference_bootstrap_means(values, resamples, seed)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.25, 0.5, 1.0]), st.sampled_from([0.0, 0.5, 1.0])),
                min_size=1, max_size=80), st.integers(1, 60), seeds, st.floats(0.5, 0.99))
def test_paired_bootstrap_matches_the_reference(pairs: list[tuple[float, float]], resamples: int, seed: int,
                                                level: float) -> None:
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    got = bootstrap.paired_bootstrap(np.array(a), np.array(b), resamples=resamples, seed=seed, level=level)
    difference, lower, upper, below = reference_paired(a, b, resamples, seed, level)
    assert got.difference == pytest.approx(difference, abs=1e-12)
    assert (got.lower, got.upper) == pytest.approx((lower, upper), abs=1e-12)
    assert got.below_zero == below and got.count == len(a) and got.resamples == resamples
    assert got.mean_a == pytest.approx(sum(a) / len(a)) and got.mean_b == pytest.approx(sum(b) / len(b))


@settings(max_examples=100, deadline=None)
@given(st.lists(score, min_size=1, max_size=60), st.integers(1, 60), seeds, st.floats(0.5, 0.99))
def test_mean_interval_matches_the_reference(values: list[float], resamples: int, seed: int, level: float) -> None:
    got = bootstrap.mean_interval(np.array(values), resamples=resamples, seed=seed, level=level)
    lower, upper = reference_interval(reference_bootstrap_means(values, resamples, seed), level)
    assert (got.lower, got.upper) == pytest.approx((lower, upper), abs=1e-9)
    assert got.mean == pytest.approx(float(np.mean(values)), abs=1e-9)


def test_indices_are_uniform_and_each_resample_has_its_own_stream() -> None:
    counts = np.bincount(np.concatenate([resample_indices(10, 7, b) for b in range(2_000)]), minlength=10)
    assert counts.sum() == 20_000 and counts.min() > 1_850 and counts.max() < 2_150
    assert resample_indices(10, 7, 0) != resample_indices(10, 7, 1) != resample_indices(10, 8, 1)


def test_large_runs_agree_across_thread_splits_and_seeds_differ() -> None:
    values = np.random.default_rng(0).random(300)
    one = bootstrap.bootstrap_means(values, resamples=3_000, seed=5, chunks=1)
    assert np.array_equal(one, bootstrap.bootstrap_means(values, resamples=3_000, seed=5, chunks=3))
    assert np.array_equal(one, bootstrap.bootstrap_means(values, resamples=3_000, seed=5))
    assert not np.array_equal(one, bootstrap.bootstrap_means(values, resamples=3_000, seed=6))


def test_intervals_have_the_width_theory_gives() -> None:
    rng = np.random.default_rng(1)
    right = (rng.random(300) < 0.8).astype(float)  # accuracy 0.8 on 300 examples
    interval = bootstrap.mean_interval(right, resamples=10_000, seed=2)
    half_width = 1.959964 * np.sqrt(right.mean() * (1 - right.mean()) / 300)
    assert interval.lower < right.mean() < interval.upper
    assert (interval.upper - interval.lower) / 2 == pytest.approx(half_width, rel=0.1)


def test_pairing_detects_a_small_consistent_difference_an_unpaired_view_cannot() -> None:
    rng = np.random.default_rng(3)
    hard = rng.random(300)
    baseline = (hard < 0.7).astype(float)
    better = baseline.copy()
    better[np.flatnonzero(baseline == 0)[:12]] = 1.0  # 12 more right answers, nothing lost: +4 points
    paired = bootstrap.paired_bootstrap(better, baseline, seed=4)
    assert paired.difference == pytest.approx(0.04) and paired.lower > 0 and paired.below_zero == 0.0
    a, b = bootstrap.mean_interval(better, seed=4), bootstrap.mean_interval(baseline, seed=5)
    assert a.lower < b.upper  # the two unpaired intervals overlap
    same = bootstrap.paired_bootstrap(baseline, baseline)
    assert (same.difference, same.lower, same.upper, same.below_zero) == (0.0, 0.0, 0.0, 0.0)


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="a has 3 scores, b has 2"):
        bootstrap.paired_bootstrap(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="scores: no scores to resample"):
        bootstrap.mean_interval(np.array([]))
    with pytest.raises(ValueError, match="score nan at row 1 is not finite"):
        bootstrap.mean_interval(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="level must be in"):
        bootstrap.mean_interval(np.ones(3), level=1.0)
    with pytest.raises(ValueError, match="resamples must be >= 1"):
        bootstrap.mean_interval(np.ones(3), resamples=0)
    with pytest.raises(ValueError, match="seed must be in"):
        bootstrap.mean_interval(np.ones(3), seed=-1)
