"""The verdict's rules and role separation, on hand-made cells (pure functions, no model)."""

from __future__ import annotations

import pytest

from combee_fast.learners import LEARNERS
from combee_fast.verify.card import Claim
from combee_fast.verify.cells import CellRun
from combee_fast.verify.roles import role_separation
from combee_fast.verify.verdict import judge

CLAIM = Claim(speedup=10.0, margin=0.02, target_score="unknown")
SIM = {role: "sim @ sim:flat" for role in ("generator", "reflector", "curator", "reducer")}
ACE_POOLS = {role.key: role.pool for role in dict(LEARNERS.items())["ace"].roles}


def _cell(method: str, seconds: float, right: int, *, seed: int = 0, rows: int = 100) -> CellRun:
    return CellRun(method=method, batch_size=1, hardware="h200", seed=seed, sim_seconds=seconds, wall_seconds=1.0,
                   rollouts=10, tokens=100, calls=20, gpu_seconds=None, test_split="test", test_sha256="ab" * 32,
                   test_scores=tuple(1.0 if i < right else 0.0 for i in range(rows)), selection_accuracy=None,
                   models=SIM, pools=ACE_POOLS, use_ground_truth=True)


def test_pass_needs_the_speedup_in_every_cell_and_no_drop_significantly_beyond_the_margin() -> None:
    baseline = _cell("sequential", 1000.0, 90)
    assert judge([(_cell("combee", 50.0, 89), baseline)], CLAIM, resamples=2000).passed
    slow = judge([(_cell("combee", 50.0, 90), baseline), (_cell("combee", 200.0, 90, seed=1), baseline)], CLAIM,
                 resamples=2000)
    assert not slow.passed and slow.broken == ["h200/seed1: speedup 5.00x < claimed 10x"]
    worse = judge([(_cell("naive", 30.0, 70), baseline)], CLAIM, resamples=2000)
    assert not worse.passed and "entirely below -2" in worse.broken[0]
    assert worse.max_quality_drop == pytest.approx(20.0) and worse.min_speedup == pytest.approx(1000 / 30)


def test_cells_scored_on_different_test_splits_are_refused() -> None:
    with pytest.raises(ValueError, match="different test splits"):
        judge([(_cell("combee", 50.0, 80, rows=50), _cell("sequential", 1000.0, 90))], CLAIM)


def test_role_separation_warns_when_the_proposer_also_evaluates() -> None:
    lines, warnings = role_separation(SIM, ACE_POOLS, use_ground_truth=True, scorer="numeric equality")
    assert "| evaluates rollouts | the task's scorer (numeric equality), a program |" in lines and not warnings
    _, warnings = role_separation(SIM, ACE_POOLS, use_ground_truth=False, scorer="numeric equality")
    assert warnings and "one model proposes and evaluates" in warnings[0]


def test_role_separation_reads_every_learners_pools() -> None:
    """Each built-in learner's table names its own roles by pool, no row unknown; TextGrad's loss
    evaluates, and a loss served by a proposer's model is warned about."""
    for name, kind in LEARNERS.items():
        models = {role.key: f"m-{role.pool} @ http://h/v1" for role in kind.roles}
        pools = {role.key: role.pool for role in kind.roles}
        lines, warnings = role_separation(models, pools, use_ground_truth=True, scorer="exact match")
        assert not any("?" in line for line in lines), (name, lines)
        for role in kind.roles:
            part = {"serve": "serves the prompt", "propose": "proposes edits", "evaluate": "evaluates rollouts"}[role.pool]
            assert f"| {part}: {role.key} | m-{role.pool} @ http://h/v1 |" in lines, (name, role.key, lines)
        assert not warnings, (name, warnings)
    textgrad = dict(LEARNERS.items())["textgrad"].roles
    same = {role.key: "one @ http://h/v1" for role in textgrad}
    lines, warnings = role_separation(same, {role.key: role.pool for role in textgrad}, use_ground_truth=True,
                                      scorer="exact match")
    assert any(line.startswith("| evaluates rollouts: ") for line in lines)
    assert warnings and "one model proposes and evaluates" in warnings[0]
