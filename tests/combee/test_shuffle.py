"""The augmented shuffle: every record p times, sqrt(n) groups, bounded groups."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from combee_fast.combee.shuffle import augmented_groups


@given(st.integers(1, 400), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_augmented_shuffle_covers_every_record_p_times_in_sqrt_n_groups(n: int, p: int, seed: int) -> None:
    groups = augmented_groups(n, p, np.random.default_rng(seed))
    assert len(groups) == int(np.floor(np.sqrt(n)))
    assert all(len(set(g)) == len(g) for g in groups)  # a copy twice in one group is kept once
    counts = np.zeros(n, dtype=int)
    for g in groups:
        counts[list(g)] += 1
    assert counts.min() >= 1 and counts.max() <= p
    sizes = [len(g) for g in groups]
    assert max(sizes) <= -(-n * p // len(groups))


@given(st.integers(1, 600), st.integers(1, 3), st.integers(2, 40))
def test_a_group_bound_adds_groups_and_keeps_every_record(n: int, p: int, max_group: int) -> None:
    groups = augmented_groups(n, p, np.random.default_rng(n), max_group=max_group)
    assert len(groups) >= int(np.floor(np.sqrt(n)))
    assert all(len(g) <= max_group for g in groups)
    assert set().union(*groups) == set(range(n))
