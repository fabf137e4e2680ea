"""Intervals for small samples (issue 52): exact coverage at any n, never zero width at 0% or 100%,
and the paired comparison's interval and exact test, checked by enumerating every outcome."""

from __future__ import annotations

import math

import pytest

from combee_fast.native.proportion import clopper_pearson, paired_comparison, score_interval, sign_test
from combee_fast.native.reference.stats import binomial_beta_cdf


def test_eight_of_eight_and_none_of_two_keep_an_open_interval() -> None:
    full, empty = score_interval([1.0] * 8), score_interval([0.0, 0.0])
    assert (full.mean, full.upper) == (1.0, 1.0) and full.lower == pytest.approx(0.025 ** (1 / 8))  # 63.1%
    assert (empty.mean, empty.lower) == (0.0, 0.0) and empty.upper == pytest.approx(1 - 0.025 ** (1 / 2))  # 84.2%


@pytest.mark.parametrize("k, n", [(1, 8), (3, 8), (7, 8), (12, 40), (1, 200)])
def test_the_ends_are_the_exact_binomial_tails(k: int, n: int) -> None:
    lower, upper = clopper_pearson(k, n, 0.95)
    # P(X >= k | lower) = 2.5% and P(X <= k | upper) = 2.5%, by the binomial sums
    assert binomial_beta_cdf(k, n - k + 1, lower) == pytest.approx(0.025, abs=1e-9)
    assert 1 - binomial_beta_cdf(k + 1, n - k, upper) == pytest.approx(0.025, abs=1e-9)


@pytest.mark.parametrize("n", [1, 2, 8, 30])
def test_coverage_is_at_least_the_level_at_every_rate(n: int) -> None:
    ends = [clopper_pearson(k, n, 0.95) for k in range(n + 1)]
    for p in [i / 400 for i in range(1, 400)]:
        covered = sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k, (lo, hi) in enumerate(ends) if lo <= p <= hi)
        assert covered >= 0.95 - 1e-12, (n, p, covered)


def _tables(n: int):
    for both in range(n + 1):
        for only_a in range(n + 1 - both):
            for only_b in range(n + 1 - both - only_a):
                yield both, only_a, only_b, n - both - only_a - only_b


def test_the_paired_interval_covers_the_true_difference_at_least_at_the_level_with_eight_rows() -> None:
    n, intervals = 8, {}
    for table in _tables(n):
        both, only_a, only_b, neither = table
        a = [1.0] * (both + only_a) + [0.0] * (only_b + neither)
        b = [1.0] * both + [0.0] * only_a + [1.0] * only_b + [0.0] * neither
        c = paired_comparison(a, b)
        intervals[table] = (c.lower, c.upper)
    grid = [i / 10 for i in range(11)]
    for p_both in grid:
        for p_a in grid:
            for p_b in grid:
                p_neither = 1 - p_both - p_a - p_b
                if p_neither < -1e-9:
                    continue
                covered = 0.0
                for table, (lo, hi) in intervals.items():
                    if lo - 1e-12 <= p_a - p_b <= hi + 1e-12:
                        counts = [table[0], table[1], table[2], table[3]]
                        ways = math.factorial(n) // math.prod(math.factorial(c) for c in counts)
                        covered += ways * math.prod(p ** c for p, c in zip((p_both, p_a, p_b, max(p_neither, 0)), counts))
                assert covered >= 0.95 - 1e-9, (p_both, p_a, p_b, covered)


def test_runs_that_agree_on_every_row_still_get_an_open_interval() -> None:
    same = paired_comparison([1.0] * 8, [1.0] * 8)
    assert same.difference == 0.0 and same.lower < -0.3 and same.upper > 0.3 and same.p_value == 1.0
    assert (same.a_better, same.b_better) == (0, 0)


def test_the_interval_and_the_exact_test_agree_on_a_small_split() -> None:
    c = paired_comparison([1, 1, 1, 0, 1, 0, 1, 1], [0, 1, 0, 0, 1, 0, 1, 0])
    assert (c.a_better, c.b_better, c.difference) == (3, 0, 0.375)
    assert c.p_value == 0.25 and c.lower < 0 < c.upper  # 3 of 3 could be chance: neither says otherwise
    clear = paired_comparison([1.0] * 8, [0.0] * 8)
    assert clear.p_value == 2 / 2**8 and clear.lower > 0


def test_the_sign_test_is_the_two_sided_binomial_tail() -> None:
    assert sign_test(0, 0) == 1.0 and sign_test(5, 5) == 1.0
    assert sign_test(1, 9) == pytest.approx(2 * (1 + 10) / 2**10) == sign_test(9, 1)


def test_fractional_scores_count_as_that_share_of_a_success() -> None:
    half = score_interval([0.5] * 10)
    assert half.mean == 0.5 and half.lower == pytest.approx(clopper_pearson(5, 10, 0.95)[0])
    c = paired_comparison([0.5, 1.0, 0.0], [0.5, 0.5, 0.5])
    assert c.difference == pytest.approx((0.5 - 0.5) / 3) and (c.a_better, c.b_better) == (1, 1)


def test_scores_outside_zero_one_are_refused_naming_the_row() -> None:
    with pytest.raises(ValueError, match="score 1.5 at row 2 is not in"):
        score_interval([1.0, 0.0, 1.5])
    with pytest.raises(ValueError, match="pair them per row"):
        paired_comparison([1.0], [1.0, 0.0])
