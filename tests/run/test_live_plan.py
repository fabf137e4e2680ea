"""The live batch-shape planner (``--batch-size auto``) end to end against the simulated endpoint."""

from __future__ import annotations

import json

import msgspec
import pytest

from combee_fast.config import CacheConfig, ControllerConfig, SessionConfig, SimConfig, TaskConfig, TrainConfig
from combee_fast.record.rundir import RunDir
from combee_fast.session import open_session
from combee_fast.sim.latency import LatencyPreset

SATURATED = LatencyPreset(name="saturated", overhead_s=0.4, decode_s_per_token=0.025, max_running=8,
                          full_batch_slowdown=2.0)
"""The flat yardstick's speed, but only 8 sequences at once: past 8 in flight, requests queue."""


def _auto(train_split: str, preset: str, time_scale: float, **changes: object) -> SessionConfig:
    base = SessionConfig(
        task=TaskConfig(train_split=train_split, val_split="val[0:20]"),
        train=TrainConfig(batch_size=None), sim=SimConfig(preset, time_scale),
    )
    return msgspec.structs.replace(base, **changes)


def _decisions(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "controller.jsonl").read_text().splitlines()]


@pytest.mark.slow
async def test_an_endpoint_that_saturates_mid_run_is_replanned_within_three_steps(tmp_path) -> None:
    config = _auto("train[0:300]", "flat", 0.002, train=TrainConfig(batch_size=None, epochs=3))
    run_dir = RunDir(tmp_path)
    switch_after = 3
    async with open_session(config) as session:
        def slow_down(row) -> None:
            if row.step + 1 == switch_after:
                session.server.set_preset(SATURATED)

        result = await session.train(run_dir=run_dir, on_step=slow_down)
    run_dir.close()
    decisions = _decisions(tmp_path)
    assert len(decisions) >= switch_after + 3
    before = decisions[switch_after - 1]  # planned from flat-endpoint measurements
    assert before["inputs"]["fit_wait_s_per_inflight"] == 0.0 and before["inputs"]["fit_s_per_token_per_inflight"] == 0.0
    # Step `switch_after` ran on the saturated endpoint; the decisions after it see it.
    after = decisions[switch_after + 1 : switch_after + 4]
    moved = [d for d in after if d["inputs"]["bs_star"] < 0.75 * before["inputs"]["bs_star"]]
    assert moved, [(d["batch_size"], d["inputs"]["bs_star"]) for d in decisions]
    assert moved[0]["batch_size"] < before["batch_size"]
    assert moved[0]["inputs"]["fit_wait_s_per_inflight"] > 0 or moved[0]["inputs"]["fit_s_per_token_per_inflight"] > 0
    assert "their unloaded latency" in moved[0]["reason"]
    assert result.samples == 900


async def test_collapsed_reflections_raise_the_alarm_and_the_remedy_learns_more(tmp_path) -> None:
    learned = {}
    for name, controller in (("remedy", ControllerConfig()), ("no alarm", ControllerConfig(collapse_below=0.0))):
        config = _auto("train[0:160]", "flat", 1e-4, controller=controller,
                       sim=SimConfig("flat", 1e-4, world="collapse"))
        run_dir = RunDir(tmp_path / name.replace(" ", "_"))
        async with open_session(config) as session:
            result = await session.train(run_dir=run_dir)
        run_dir.close()
        learned[name] = len(result.final)
        decisions = _decisions(run_dir.root)
        remedies = [d for d in decisions if d["remedy"] is not None]
        if name == "remedy":
            first = remedies[0]
            assert first["remedy"] == "temperature" and first["reflect_temperature"] == 0.7
            assert "diversity:" in first["reason"] and "distinct lessons among" in first["reason"]
            assert first["inputs"]["distinct_insights"] <= 0.25 * first["inputs"]["insights"]
            assert first["batch_size"] <= decisions[decisions.index(first) - 1]["batch_size"]  # no growth while collapsed
        else:
            assert remedies == []
    assert learned["remedy"] > 3 * learned["no alarm"], learned


async def test_the_default_world_raises_no_diversity_alarm(tmp_path) -> None:
    run_dir = RunDir(tmp_path)
    async with open_session(_auto("train[0:160]", "flat", 1e-4)) as session:
        await session.train(run_dir=run_dir)
    run_dir.close()
    decisions = _decisions(tmp_path)
    assert all(d["remedy"] is None for d in decisions)
    assert decisions[1]["inputs"]["distinct_insights"] > 0.25 * decisions[1]["inputs"]["insights"]


@pytest.mark.slow
async def test_bs_star_follows_the_hardware_class_of_each_preset(tmp_path) -> None:
    stars = {}
    for preset in ("flat", "hosted-api", "h200-70b"):
        run_dir = RunDir(tmp_path / preset)
        async with open_session(_auto("train[0:256]", preset, 0.005)) as session:
            await session.train(run_dir=run_dir)
        run_dir.close()
        planned = _decisions(run_dir.root)[1]["inputs"]
        stars[preset] = planned
    # No load effect measured on the flat yardstick or the hosted API; the H200 slows with load.
    for preset in ("flat", "hosted-api"):
        assert stars[preset]["fit_s_per_token_per_inflight"] == 0 and stars[preset]["fit_wait_s_per_inflight"] == 0
    h200 = stars["h200-70b"]
    assert h200["fit_s_per_token_per_inflight"] > 0 or h200["fit_wait_s_per_inflight"] > 0
    assert h200["bs_star"] < stars["flat"]["bs_star"] and h200["bs_star"] < stars["hosted-api"]["bs_star"]


async def test_a_replayed_auto_run_decides_the_same_and_sends_nothing(tmp_path) -> None:
    cache = str(tmp_path / "replay.jsonl")
    decided, finals = [], []
    for mode in ("record", "replay"):
        root = tmp_path / mode
        run_dir = RunDir(root)
        config = _auto("train[0:120]", "flat", 2e-4, cache=CacheConfig(cache, mode))
        async with open_session(config) as session:
            await session.train(run_dir=run_dir)
            if mode == "replay":
                assert session.server.counters().requests == 0
        run_dir.close()
        decided.append((root / "controller.jsonl").read_bytes())
        finals.append((root / "final.json").read_bytes())
    assert decided[0] == decided[1] and finals[0] == finals[1]
