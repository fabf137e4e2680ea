"""The live batch-shape planner and the latency curve on synthetic endpoints."""

from __future__ import annotations

import math

import pytest

from combee_fast.combee.latency_curve import CallSample, LatencyCurve
from combee_fast.combee.planner import ShapePlanner, StepSignals
from combee_fast.config import CombeeConfig, ControllerConfig
from combee_fast.endpoint.batching import BatchingCurve, BatchingPoint


def latency(k: float, prompt: int, completion: int, *, base=0.4, per_prompt=1e-4, per_token=0.025, load=0.0, wait=0.0):
    return base + per_prompt * prompt + per_token * completion + (load * completion + wait) * (k - 1)


def step(batch: int, **endpoint: float) -> StepSignals:
    """A step of ``batch`` chains of 4 calls whose in-flight level falls as chains finish."""
    calls = []
    for i in range(batch):
        for position in range(2 if i % 3 else 4):
            k = max(1, batch - (batch * position) // 4)
            prompt, completion = 800 + 7 * (i % 5), 150 + 20 * (i % 7)
            calls.append(CallSample(float(k), prompt, completion, latency(k, prompt, completion, **endpoint)))
    slowest = sum(latency(max(1, batch - batch * p // 4), 800, 250, **endpoint) for p in range(4))
    return StepSignals(batch_size=batch, seconds=slowest + 10.0, map_seconds=slowest, chain_calls=4.0,
                       calls=tuple(calls), playbook_tokens=1000, prefill_share=0.5, retention=0.9,
                       insights=batch, distinct_insights=batch // 2)


def test_the_curve_recovers_a_load_effect_and_its_absence() -> None:
    flat = LatencyCurve(4096, 0.25)
    flat.add(step(100).calls)
    assert flat.coef is not None and flat.coef[3] == pytest.approx(0.0, abs=1e-9) and flat.coef[4] == pytest.approx(0.0, abs=1e-9)
    assert flat.predict(1, 800, 200) == pytest.approx(latency(1, 800, 200), rel=1e-6)
    loaded = LatencyCurve(4096, 0.25)
    loaded.add(step(100, load=2e-4).calls)
    assert loaded.predict(80, 800, 200) == pytest.approx(latency(80, 800, 200, load=2e-4), rel=1e-3)
    assert loaded.load_factor(80, 800, 200) > 1.5 > flat.load_factor(80, 800, 200) == pytest.approx(1.0)
    summary = loaded.summary()
    assert {"latency_p50", "latency_p95", "fit_s_per_token_per_inflight", "s_per_token_inflight_65_up"} <= summary.keys()


def test_the_first_step_is_a_real_step_and_the_next_finishes_the_queue_in_fewest_steps() -> None:
    planner = ShapePlanner(ControllerConfig(), CombeeConfig(), upper=256)
    first = planner.decide(500)
    assert first.batch_size == 250 and first.reason.startswith("start")
    assert first.max_group == 8 and first.duplicates == 2
    planner.record(step(250))
    second = planner.decide(250)
    assert second.batch_size == 250 and second.inputs["bs_star"] >= 0.9 * 256 / 1.1
    assert "1.00x their unloaded latency" in second.reason


def probed(levels: list[int], gain: float) -> BatchingCurve:
    """A probe whose generated tokens/s rise linearly from one request's to ``gain`` times it at the top level."""
    def rate(c: int) -> float:
        return 6.0 * (1 + (gain - 1) * (c - 1) / (levels[-1] - 1))
    return BatchingCurve.of([BatchingPoint(c, 32 * c / rate(c), rate(c), 600, 32) for c in levels], stopped="cap")


def first_step(remaining: int, curve: BatchingCurve, *, slots: float = math.inf, **config: float):
    planner = ShapePlanner(ControllerConfig(**config), CombeeConfig(), upper=256, in_flight_cap=slots)
    planner.seed(curve)
    return planner.decide(remaining)


def test_the_probed_first_step_pays_its_tail_once_for_a_short_queue_and_starts_a_long_one_at_a_few_waves() -> None:
    four = probed([1, 2, 4], 1.9)  # a CPU server's four slots (bench/real_model.py measured 1.9-2.3x)
    short = first_step(12, four, slots=4)
    assert short.batch_size == 12 and "1 step(s) of 3 wave(s)" in short.reason  # not 4, then 8: one tail
    assert short.inputs["start_waves"] == short.inputs["fewest_waves"] == 4.0
    assert first_step(3, four, slots=4).batch_size == 3
    assert first_step(24, four, slots=4).batch_size == 12  # 16 (4x the top level) at most: two steps of 3 waves
    wide = probed([1, 2, 4, 8, 16, 32, 64], 8.0)  # a GPU server
    long = first_step(1000, wide)
    assert long.batch_size == 250 and "4 step(s) of 4 wave(s)" in long.reason  # then re-planned on what it measured
    # Without a tail to pay once per step, waves alone say nothing beyond filling the probed level.
    assert first_step(12, four, slots=4, start_tail_waves=0.0).batch_size == 4
    # Never below the level of the peak (a smaller step is as many waves for fewer items), nor
    # above the client's slots' width as the wave.
    assert first_step(12, probed([1, 2, 4, 8], 3.0), slots=4).inputs["start_width"] == 4.0


def test_a_saturating_endpoint_plans_smaller_batches_than_a_flat_one() -> None:
    stars = {}
    for name, endpoint in (("flat", {}), ("saturating", {"wait": 0.5})):
        planner = ShapePlanner(ControllerConfig(), CombeeConfig(), upper=256)
        planner.decide(2000)
        planner.record(step(128, **endpoint))
        stars[name] = planner.decide(2000).inputs["bs_star"]
    assert stars["saturating"] < 0.5 * stars["flat"]


def test_a_surprisingly_slow_step_halves_the_batch_and_relearns_the_curve() -> None:
    planner = ShapePlanner(ControllerConfig(), CombeeConfig(), upper=256)
    planner.decide(1000)
    planner.record(step(200))
    planned = planner.decide(1000)
    planner.record(step(planned.batch_size, per_token=0.25))  # the endpoint is now 10x slower per token
    after = planner.decide(1000)
    assert after.reason.startswith("surprise") and after.inputs["surprise"] > 2
    assert after.batch_size == math.floor(planned.batch_size * 0.5)
    assert len(planner.curve) == len(step(planned.batch_size).calls)  # only the new endpoint's calls


def test_collapse_raises_the_temperature_then_reshuffles_and_holds_the_batch() -> None:
    planner = ShapePlanner(ControllerConfig(), CombeeConfig(), upper=256)
    planner.decide(1000)
    collapsed = StepSignals(**{**_fields(step(100)), "insights": 90, "distinct_insights": 2})
    planner.record(collapsed)
    first = planner.decide(1000)
    assert first.remedy == "temperature" and first.reflect_temperature == 0.7 and first.batch_size <= 100
    assert "2 distinct lessons among 90" in first.reason
    planner.record(StepSignals(**{**_fields(step(first.batch_size)), "insights": 90, "distinct_insights": 3}))
    second = planner.decide(1000)
    assert second.remedy == "reshuffle" and second.shuffle_salt == 1
    planner.record(step(second.batch_size))
    assert planner.decide(1000).remedy is None


def test_low_retention_narrows_the_groups_then_adds_copies_and_recovery_undoes_it() -> None:
    config = ControllerConfig(retention_floor=0.5, recover_after=2)
    planner = ShapePlanner(config, CombeeConfig(), upper=256)
    planner.decide(1000)
    shapes = []
    for _ in range(3):
        planner.record(StepSignals(**{**_fields(step(100)), "retention": 0.2}))
        decision = planner.decide(1000)
        shapes.append((decision.max_group, decision.duplicates))
        assert "quality: retention 0.2 < floor 0.5" in decision.reason
    assert shapes == [(4, 2), (4, 3), (4, 3)]
    for _ in range(2):
        planner.record(step(100))
        decision = planner.decide(1000)
    assert decision.max_group == 8


def test_the_decision_history_is_bounded() -> None:
    planner = ShapePlanner(ControllerConfig(history=5), CombeeConfig(), upper=64)
    planner.decide(10_000)
    for _ in range(12):
        planner.record(step(20))
        planner.decide(10_000)
    assert len(planner.decisions) == 5 and len(planner.curve) <= 5


def _fields(signals: StepSignals) -> dict:
    return {name: getattr(signals, name) for name in signals.__struct_fields__}


def test_fit_line_is_exact_on_a_line_and_needs_two_sizes() -> None:
    from combee_fast.combee.latency_curve import fit_line

    assert fit_line([(150, 310.0), (75, 160.0), (100, 210.0)], 0.5) == (pytest.approx(10.0), pytest.approx(2.0))
    assert fit_line([(100, 5.0), (100, 6.0)], 0.5) is None
    assert fit_line([(100, 50.0), (200, 40.0)], 0.5)[1] == 0.0  # never a negative cost per item


def chains(batch: int, length: int, slots: int) -> StepSignals:
    """A step of ``batch`` chains of ``length`` calls each on a server of ``slots`` slots, all of it
    at once (the chains' calls in lock-step, ``min(batch, slots)`` in flight)."""
    k = min(batch, slots)
    calls = [CallSample(float(max(1, k - i % 2)), 800 + 9 * (i % 4), 200 + 11 * (i % 3),
                        latency(max(1, k - i % 2), 800 + 9 * (i % 4), 200 + 11 * (i % 3), load=0.004))
             for i in range(batch * length)]
    map_seconds = length * latency(k, 813, 211, load=0.004)
    return StepSignals(batch_size=batch, seconds=map_seconds + 10.0, map_seconds=map_seconds,
                       chain_calls=float(length), calls=tuple(calls), playbook_tokens=1000, prefill_share=0.5,
                       retention=0.9, insights=batch, distinct_insights=batch // 2)


def predicted_map(measured: StepSignals, batch: int, cap: float) -> float:
    planner = ShapePlanner(ControllerConfig(), CombeeConfig(), upper=256, in_flight_cap=cap)
    planner.decide(12)
    planner.record(measured)
    return planner.decide(batch).inputs["predicted_step_s"] - (measured.seconds - measured.map_seconds)


def test_past_the_endpoints_slots_a_batch_runs_in_waves_and_is_predicted_so() -> None:
    """A 4-slot server: a step of 4 two-call chains measured, a step of 8 is predicted to take two
    waves of its map; where the endpoint's slots are unknown the curve alone predicts one (measured
    on the project's llama.cpp server, the curve alone predicted 8 chains at 1.3x the map of 4, and
    the step took 1.9x)."""
    measured = chains(4, 2, slots=4)
    # rel 0.1: eight chains keep the four slots full, where the step of four held 3.5 on average
    assert predicted_map(measured, 8, 4) == pytest.approx(2 * measured.map_seconds, rel=0.1)
    assert predicted_map(measured, 8, math.inf) < 1.5 * measured.map_seconds


def test_past_the_slots_uneven_chains_fill_the_slots_the_short_ones_leave() -> None:
    """Chains of 4 and of 2 calls (3 a chain on average): 8 of them on 4 slots make 24 calls, six
    rounds of the slots, not the two full waves of the longest chain (eight rounds) a wave model says
    (on the simulated endpoint the wave model predicted 1.30x the map a step measured)."""
    measured = step(4)
    wave_model = 2 * measured.map_seconds
    assert predicted_map(measured, 8, 4) == pytest.approx(wave_model * 6 / 8, rel=0.1)
