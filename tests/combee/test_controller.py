"""The batch-size controller on synthetic delay curves."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from combee_fast.errors import ConfigError
from combee_fast.combee.controller import (
    BatchSizeController,
    ControllerConfig,
    IterationMeasurement,
    fit_power_law,
    optimal_batch_size,
    steepest_slope,
)

N = 1000  # samples per epoch


class DelayCurve:
    """Iteration seconds of a synthetic endpoint: epoch time ``A * bs**-alpha``, with noise."""

    def __init__(self, A: float, alpha: float, noise: float = 0.0, seed: int = 0) -> None:
        self.A, self.alpha, self.noise = A, alpha, noise
        self.rng = np.random.default_rng(seed)

    def seconds(self, batch_size: int) -> float:
        epoch = self.A * batch_size**-self.alpha * math.exp(self.noise * self.rng.standard_normal())
        return epoch * batch_size / N


def run(controller: BatchSizeController, curve: DelayCurve, iterations: int, **quality: float) -> list[int]:
    sizes = []
    for _ in range(iterations):
        bs = controller.next_batch_size().batch_size
        sizes.append(bs)
        controller.record(IterationMeasurement(bs, curve.seconds(bs), N, **quality))
    return sizes


@pytest.mark.parametrize("alpha", [0.4, 0.8, 1.0, 1.3])
def test_fit_recovers_alpha_within_five_percent_from_noisy_profiles(alpha: float) -> None:
    curve = DelayCurve(A=5000.0, alpha=alpha, noise=0.03, seed=int(alpha * 10))
    sizes = [5, 10, 20, 40, 80]
    times = [curve.seconds(b) * N / b for b in sizes]
    A, fitted = fit_power_law(sizes, times)
    assert fitted == pytest.approx(alpha, rel=0.05)
    assert A == pytest.approx(5000.0, rel=0.15)


def test_fit_is_exact_on_a_noiseless_curve_and_rejects_degenerate_input() -> None:
    sizes = [2.0, 7.0, 31.0]
    A, alpha = fit_power_law(sizes, [300.0 * b**-0.7 for b in sizes])
    assert (A, alpha) == (pytest.approx(300.0), pytest.approx(0.7))
    with pytest.raises(ValueError, match="two distinct batch sizes"):
        fit_power_law([4, 4], [1.0, 2.0])
    with pytest.raises(ValueError, match="must be > 0"):
        fit_power_law([1, 2], [0.0, 1.0])


def test_optimal_batch_size_is_where_the_slope_falls_to_tau() -> None:
    A, alpha, tau = 4000.0, 0.9, 0.5
    bs = optimal_batch_size(A, alpha, tau)
    assert alpha * A * bs ** -(alpha + 1) == pytest.approx(tau)


def test_profiles_every_candidate_then_picks_bs_star_by_the_formula() -> None:
    controller = BatchSizeController(ControllerConfig())
    curve = DelayCurve(A=20_000.0, alpha=0.85, noise=0.02, seed=1)
    profiled = run(controller, curve, 5)
    assert profiled == [5, 10, 20, 40, 80]
    assert [d.reason for d in controller.decisions] == ["profile"] * 5

    plan = controller.next_batch_size()
    sizes = [float(m.batch_size) for m in controller.measurements]
    A, alpha = fit_power_law(sizes, [m.epoch_seconds for m in controller.measurements])
    tau = 0.016 * steepest_slope(A, alpha, [5, 10, 20, 40, 80])
    assert tau == pytest.approx(0.016 * alpha * A * 5 ** -(alpha + 1))
    assert plan.reason == "plan"
    assert plan.batch_size == round(optimal_batch_size(A, alpha, tau))
    assert plan.inputs["alpha"] == pytest.approx(alpha) and plan.inputs["tau"] == pytest.approx(tau)
    assert plan.inputs["bs_star"] == pytest.approx(optimal_batch_size(A, alpha, tau))
    assert controller.next_batch_size() is plan  # asking again does not decide again


@pytest.mark.parametrize(("factor", "direction"), [(3.0, 1), (1 / 3, -1)])
def test_replans_within_three_iterations_when_the_endpoint_changes_speed(factor: float, direction: int) -> None:
    controller = BatchSizeController(ControllerConfig())
    curve = DelayCurve(A=20_000.0, alpha=0.8, noise=0.02, seed=2)
    before = run(controller, curve, 12)[-1]
    curve.A *= factor  # a slower (or faster) endpoint from now on
    after = run(controller, curve, 3)
    moved = [bs for bs in after if (bs - before) * direction > 0]
    assert moved, f"stayed at {before} for three iterations: {after}"
    assert controller.decisions[-len(after) :][after.index(moved[0])].reason == "replan"
    # It moves towards the new optimum: bs* scales by factor ** (1 / (alpha + 1)) at fixed tau.
    settled = run(controller, curve, 8)[-1]
    assert settled == pytest.approx(before * factor ** (1 / 1.8), rel=0.2)


def test_hysteresis_holds_the_batch_under_measurement_noise() -> None:
    controller = BatchSizeController(ControllerConfig())
    sizes = run(controller, DelayCurve(A=20_000.0, alpha=0.8, noise=0.05, seed=3), 40)
    changes = sum(1 for a, b in zip(sizes[5:], sizes[6:]) if a != b)
    assert changes <= 1, sizes
    assert {d.reason for d in controller.decisions[6:]} <= {"hold", "replan"}


def test_falling_retention_shrinks_and_recovery_lifts_the_cap_again() -> None:
    config = ControllerConfig(retention_floor=0.6, shrink_factor=0.5, recover_after=3)
    controller = BatchSizeController(config)
    curve = DelayCurve(A=20_000.0, alpha=0.8, seed=4)
    planned = run(controller, curve, 7, retention=0.9)[-1]
    low = run(controller, curve, 1, retention=0.3)
    assert low == [planned]
    shrunk = controller.next_batch_size()
    assert shrunk.batch_size == math.floor(planned * 0.5)
    assert shrunk.reason.startswith("shrink: retention 0.3 < floor 0.6")
    assert shrunk.inputs["retention"] == 0.3
    healthy = run(controller, curve, 8, retention=0.9)
    assert max(healthy) == planned  # the cap is lifted step by step, never beyond the plan


def test_validation_drop_shrinks() -> None:
    controller = BatchSizeController(ControllerConfig(validation_drop=0.05))
    curve = DelayCurve(A=20_000.0, alpha=0.8, seed=5)
    planned = run(controller, curve, 7, validation=0.70)[-1]
    run(controller, curve, 1, validation=0.60)
    decision = controller.next_batch_size()
    assert decision.batch_size < planned and decision.reason.startswith("shrink: validation 0.6 fell")


def test_capacity_and_fan_in_bound_profiling_and_plans() -> None:
    controller = BatchSizeController(ControllerConfig(), capacity=32, max_fan_in=24)
    sizes = run(controller, DelayCurve(A=50_000.0, alpha=1.2, seed=6), 10)
    assert controller.upper == 24
    assert sizes[:4] == [5, 10, 20, 24]  # 40 and 80 clamp to 24 and are profiled once
    assert max(sizes) <= 24


def test_without_two_distinct_measured_sizes_the_batch_stays_fixed() -> None:
    single = BatchSizeController(ControllerConfig(candidates=(8, 16)), capacity=6)
    assert run(single, DelayCurve(A=100.0, alpha=0.5), 3) == [6, 6, 6]
    assert single.decisions[-1].reason.startswith("fixed: fewer than two distinct batch sizes")
    short = BatchSizeController(ControllerConfig(candidates=(4, 8)))
    for _ in range(2):  # the caller ran smaller batches than asked (the end of an epoch)
        short.next_batch_size()
        short.record(IterationMeasurement(3, 1.0, 100))
    assert short.fit is None and short.next_batch_size().batch_size == 4


def test_flat_curve_plans_the_smallest_candidate() -> None:
    controller = BatchSizeController(ControllerConfig())
    sizes = run(controller, DelayCurve(A=100.0, alpha=-0.2, seed=7), 7)
    assert sizes[5:] == [5, 5]
    assert controller.decisions[5].reason == "plan: no speed-up from larger batches"


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(1, 400), min_size=1, max_size=6),
    st.integers(1, 50),
    st.integers(0, 300),
    st.one_of(st.none(), st.integers(1, 300)),
    st.one_of(st.none(), st.integers(1, 300)),
    st.lists(st.tuples(st.floats(0.01, 1000.0), st.one_of(st.none(), st.floats(0, 1))), min_size=1, max_size=25),
)
def test_never_leaves_its_bounds(
    candidates: list[int],
    min_batch: int,
    extra: int,
    capacity: int | None,
    fan_in: int | None,
    iterations: list[tuple[float, float | None]],
) -> None:
    config = ControllerConfig(candidates=tuple(candidates), min_batch=min_batch, max_batch=min_batch + extra)
    upper = min(b for b in (config.max_batch, capacity, fan_in) if b is not None)
    if upper < min_batch:
        with pytest.raises(ConfigError, match="no batch size fits"):
            BatchSizeController(config, capacity=capacity, max_fan_in=fan_in)
        return
    controller = BatchSizeController(config, capacity=capacity, max_fan_in=fan_in)
    for seconds, retention in iterations:
        bs = controller.next_batch_size().batch_size
        assert min_batch <= bs <= upper
        controller.record(IterationMeasurement(bs, seconds, 500, retention=retention))
    assert len(controller.decisions) == len(iterations)
    assert all(d.reason and "lower" in d.inputs for d in controller.decisions)


def test_bad_config_and_measurements_are_named() -> None:
    with pytest.raises(ConfigError, match="shrink_factor must be in"):
        ControllerConfig(shrink_factor=1.5)
    with pytest.raises(ConfigError, match="min_batch <= max_batch"):
        ControllerConfig(min_batch=10, max_batch=5)
    controller = BatchSizeController(ControllerConfig())
    with pytest.raises(ValueError, match="seconds must be finite and > 0"):
        controller.record(IterationMeasurement(5, 0.0, 100))
    with pytest.raises(ValueError, match="retention must be finite"):
        controller.record(IterationMeasurement(5, 1.0, 100, retention=math.nan))
    assert controller.measurements == []
