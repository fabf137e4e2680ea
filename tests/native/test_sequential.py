"""Confidence-sequence kernels against the plain reference, and the guarantee they state: checked
after every reward, a (1 - alpha) sequence misses the true mean at some time in at most alpha of
the runs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from combee_fast.native import sequential
from combee_fast.native.reference.sequential import reference_confidence_sequence, reference_first_crossing

reward = st.sampled_from([0.0, 0.25, 0.5, 1.0]) | st.floats(0.0, 1.0)
alphas = st.floats(0.01, 0.5)


@settings(max_examples=100, deadline=None)
@given(st.lists(reward, min_size=1, max_size=120), alphas)
def test_the_sequence_equals_the_reference(values: list[float], alpha: float) -> None:
    lower, upper = sequential.confidence_sequence(np.array(values), alpha=alpha)
    expected = reference_confidence_sequence(values, alpha)
    assert lower.tolist() == pytest.approx([lo for lo, _ in expected], abs=1e-12)
    assert upper.tolist() == pytest.approx([hi for _, hi in expected], abs=1e-12)
    assert (np.diff(lower) >= 0).all() and (np.diff(upper) <= 0).all()  # a running intersection
    assert (lower <= upper + 1e-12).all() and lower.min() >= 0.0 and upper.max() <= 1.0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 1]), reward), min_size=1, max_size=150), alphas,
       st.floats(-1.0, 0.0), st.floats(-1.0, 0.5))
def test_two_sample_crossings_equal_the_reference(pairs: list[tuple[int, float]], alpha: float,
                                                  rollback_below: float, widen_above: float) -> None:
    rows, values = [r for r, _ in pairs], [v for _, v in pairs]
    got = sequential.first_crossing(sequential.new_state(), np.array(rows), np.array(values), alpha,
                                    sequential.TWO_SAMPLE, rollback_below, widen_above)
    index, decision, lower, upper = reference_first_crossing(rows, values, alpha, False, rollback_below, widen_above)
    assert (got.index, got.decision) == (index, decision)
    assert (got.lower, got.upper) == pytest.approx((lower, upper), abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([-1.0, -0.5, 0.0, 0.5, 1.0]), min_size=1, max_size=150), alphas)
def test_paired_crossings_equal_the_reference_and_one_step_at_a_time_equals_all_at_once(
        differences: list[float], alpha: float) -> None:
    rows = [sequential.PAIRED] * len(differences)
    whole = sequential.first_crossing(sequential.new_state(), np.array(rows), np.array(differences), alpha,
                                      sequential.PAIRED_TEST, -0.3, 0.2)
    assert (whole.index, whole.decision) == reference_first_crossing(rows, differences, alpha, True, -0.3, 0.2)[:2]
    state = sequential.new_state()
    for index, value in enumerate(differences):
        lower, upper = sequential.step(state, sequential.PAIRED, value, alpha, sequential.PAIRED_TEST)
        if upper < -0.3 or lower > 0.2 or index == len(differences) - 1:
            break
    assert index == whole.index and (lower, upper) == pytest.approx((whole.lower, whole.upper), abs=1e-12)


def test_checked_after_every_reward_the_sequence_misses_the_mean_in_at_most_alpha_of_runs() -> None:
    """2,000 runs of 3,000 Bernoulli rewards per mean: a run counts as a miss if the interval
    ever excludes the true mean (what a continuously monitored fixed-sample interval would do
    in far more than alpha of the runs)."""
    rng = np.random.default_rng(7)
    alpha = 0.1
    for mean in (0.1, 0.5, 0.88):
        misses = 0
        for _ in range(2_000):
            lower, upper = sequential.confidence_sequence((rng.random(3_000) < mean).astype(float), alpha=alpha)
            misses += bool((lower > mean).any() or (upper < mean).any())
        assert misses / 2_000 <= alpha, (mean, misses)


def test_a_fixed_sample_interval_checked_continuously_would_break_that_guarantee() -> None:
    """The control for the test above: the normal 90% interval of the running mean, checked
    after every reward, excludes the true mean at some time in far more than 10% of the runs."""
    rng = np.random.default_rng(7)
    misses = 0
    for _ in range(500):
        draws = (rng.random(3_000) < 0.5).astype(float)
        t = np.arange(1, 3_001)
        running = np.cumsum(draws) / t
        half = 1.645 * np.sqrt(0.25 / t)
        misses += bool((np.abs(running - 0.5) > half)[30:].any())
    assert misses / 500 > 0.3


def test_the_interval_narrows_with_evidence_and_adapts_to_a_small_variance() -> None:
    rng = np.random.default_rng(1)
    lower, upper = sequential.confidence_sequence((rng.random(10_000) < 0.5).astype(float), alpha=0.05)
    assert lower[-1] < 0.5 < upper[-1] and upper[-1] - lower[-1] < 0.06
    assert upper[99] - lower[99] > upper[999] - lower[999] > upper[-1] - lower[-1]
    steady = sequential.confidence_sequence(np.full(1_000, 0.9), alpha=0.05)
    assert steady[1][-1] - steady[0][-1] < 0.5 * (upper[999] - lower[999])


def test_a_two_sample_test_rolls_back_a_worse_candidate_and_widens_an_equal_one() -> None:
    rng = np.random.default_rng(3)
    rows = np.tile([0, 1], 3_000)
    worse = np.where(rows == 0, rng.random(6_000) < 0.85, rng.random(6_000) < 0.6).astype(float)
    found = sequential.first_crossing(sequential.new_state(), rows, worse, 0.05, sequential.TWO_SAMPLE, 0.0, 0.5)
    assert found.decision == sequential.ROLLBACK and found.upper < 0.0 and found.index < 1_000
    equal = (rng.random(6_000) < 0.8).astype(float)
    found = sequential.first_crossing(sequential.new_state(), rows, equal, 0.05, sequential.TWO_SAMPLE, 0.0, -0.1)
    assert found.decision == sequential.WIDEN and found.lower > -0.1


def test_bad_rewards_are_refused_naming_the_value() -> None:
    with pytest.raises(ValueError, match=r"in \[0, 1\], got 1.5"):
        sequential.observe(sequential.new_state(), 0, 1.5, 0.05)
    with pytest.raises(ValueError, match="not in"):
        sequential.confidence_sequence(np.array([0.5, np.nan]), alpha=0.05)
    with pytest.raises(ValueError, match=r"paired difference must be in \[-1, 1\]"):
        sequential.step(sequential.new_state(), sequential.PAIRED, 2.0, 0.05, True)
    with pytest.raises(ValueError, match="alpha"):
        sequential.confidence_sequence(np.array([0.5]), alpha=1.0)
