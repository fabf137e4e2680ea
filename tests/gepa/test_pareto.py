"""The Pareto pool: dominance, fronts, and parent sampling in proportion to front membership."""

from __future__ import annotations

import numpy as np
import pytest

from combee_fast.gepa.pareto import ParetoPool, dominates


def _pool(*rows: tuple[float, ...]) -> ParetoPool[str]:
    pool: ParetoPool[str] = ParetoPool(len(rows[0]))
    for n, row in enumerate(rows):
        pool.add(f"c{n}", row)
    return pool


def test_dominance_needs_at_least_as_good_everywhere_and_better_somewhere() -> None:
    assert dominates((1, 1, 0), (1, 0, 0))
    assert not dominates((1, 0, 0), (1, 0, 0))  # equal: neither dominates
    assert not dominates((1, 0, 1), (0, 1, 1))  # incomparable
    assert not dominates((0, 1, 1), (1, 0, 1))
    with pytest.raises(ValueError):
        dominates((1,), (1, 0))


def test_fronts_hold_the_best_candidates_of_each_instance() -> None:
    pool = _pool((1, 0, 0), (0, 1, 0), (1, 1, 0))
    assert pool.fronts() == [frozenset({0, 2}), frozenset({1, 2}), frozenset({0, 1, 2})]
    assert pool.dominated() == frozenset({0, 1})
    assert pool.front_counts() == [0, 0, 3]
    assert pool.best() == 2


def test_a_dominated_candidate_is_never_drawn() -> None:
    pool = _pool((1, 0, 0, 0), (1, 1, 0, 0), (0, 0, 1, 0))
    rng = np.random.default_rng(0)
    drawn = {pool.sample_parent(rng) for _ in range(500)}
    assert 0 not in drawn and drawn == {1, 2}


def test_parents_are_drawn_in_proportion_to_front_membership() -> None:
    # c0 is best on instances 0,1,2; c1 on instance 3; c2 ties c1 on instance 3 and is best on 4.
    pool = _pool((1, 1, 1, 0, 0), (0, 0, 0, 1, 0), (0, 0, 0, 1, 1))
    assert pool.dominated() == frozenset({1})
    assert pool.front_counts() == [3, 0, 2]
    rng = np.random.default_rng(7)
    draws = np.array([pool.sample_parent(rng) for _ in range(6000)])
    assert abs((draws == 0).mean() - 3 / 5) < 0.03
    assert abs((draws == 2).mean() - 2 / 5) < 0.03


def test_equal_candidates_share_every_front_they_are_on() -> None:
    pool = _pool((1, 0), (1, 0), (0, 1))
    assert pool.dominated() == frozenset()
    assert pool.front_counts() == [1, 1, 1]


def test_sampling_is_deterministic_given_the_generator() -> None:
    pool = _pool((1, 0, 1), (0, 1, 1), (1, 1, 0))
    first = [pool.sample_parent(np.random.default_rng(3)) for _ in range(5)]
    again = [pool.sample_parent(np.random.default_rng(3)) for _ in range(5)]
    assert first == again


def test_scores_must_cover_every_validation_instance() -> None:
    pool: ParetoPool[str] = ParetoPool(3)
    with pytest.raises(ValueError):
        pool.add("c", (1.0, 0.0))
    with pytest.raises(ValueError):
        pool.sample_parent(np.random.default_rng(0))
