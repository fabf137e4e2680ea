"""The staleness policies: how a child proposed against an older pool is screened."""

from __future__ import annotations

import pytest

from combee_fast.errors import ConfigError
from combee_fast.gepa.staleness import FullPolicy, GuardedPolicy, Screening, staleness_policy


def test_full_rescreens_a_stale_child_against_the_pools_current_best() -> None:
    full = staleness_policy("full", bound=0)
    assert isinstance(full, FullPolicy) and full.rescreens
    assert full.screening(proposed_at=3, version=3, parent=1, best=2) == Screening()  # fresh
    assert full.screening(proposed_at=3, version=5, parent=2, best=2) == Screening()  # its parent is still best
    assert full.screening(proposed_at=3, version=5, parent=1, best=4) == Screening(rival=4)


def test_guarded_drops_a_child_older_than_its_bound_and_screens_younger_ones_as_usual() -> None:
    guarded = staleness_policy("guarded", bound=2)
    assert isinstance(guarded, GuardedPolicy) and not guarded.rescreens
    assert guarded.screening(proposed_at=3, version=5, parent=1, best=4) == Screening()
    assert guarded.screening(proposed_at=3, version=6, parent=1, best=4) == Screening(drop=True)
    with pytest.raises(ConfigError, match="unknown policy 'lazy'"):
        staleness_policy("lazy", bound=1)
