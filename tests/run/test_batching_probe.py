"""``--batch-size auto`` against a simulated server with four slots: the start-up probe's curve
seeds the planner's first decision (planned in waves of its best level), is recorded with the run (a replay decides the same), and the
summary and page show it with the planner's predicted against measured step seconds."""

from __future__ import annotations

import json
import math

import msgspec

from combee_fast.config import CacheConfig, EndpointSpec, SessionConfig, TaskConfig, TrainConfig, TransportConfig
from combee_fast.endpoint.batching import PROBE_ROLE
from combee_fast.learners import role_table
from combee_fast.session import open_session
from combee_fast.sim.responders import SimRequest
from combee_fast.sim.worlds import task_world
from combee_fast.tasks.registry import get_task
from tests.endpoint.test_batching import FOUR_SLOTS

WORLD = task_world(get_task("formula"), role_table())


def _config(url: str, **changes: object) -> SessionConfig:
    base = SessionConfig(task=TaskConfig(train_split="train[0:40]", val_split="val[0:10]"),
                         train=TrainConfig(batch_size=None), endpoints={"default": EndpointSpec(url=url, model="sim")})
    return msgspec.structs.replace(base, **changes)


def _read(folder, name: str):
    text = (folder / name).read_text()
    return [json.loads(line) for line in text.splitlines()] if name.endswith(".jsonl") else json.loads(text)


async def test_the_probe_seeds_the_first_step_and_a_replay_decides_the_same(start_sim_server, tmp_path) -> None:
    server = await start_sim_server(WORLD, preset=FOUR_SLOTS, time_scale=0.2)  # real jitter stays small in sim time
    cache = str(tmp_path / "cache.jsonl")
    runs, requests = {}, {}
    for mode in ("record", "replay"):
        config = _config(server.url, cache=CacheConfig(cache, mode))
        async with open_session(config) as session:
            await session.train(out=tmp_path / mode)
        runs[mode], requests[mode] = tmp_path / mode, server.counters().requests
    recorded, replayed = runs["record"], runs["replay"]
    assert requests["replay"] == requests["record"]  # the replay sent nothing, its probe included

    curve = _read(recorded, "batching.json")
    best = curve["best_concurrency"]
    assert [p["concurrency"] for p in curve["points"]][:3] == [1, 2, 4] and 4 <= best <= 8  # near the 4 slots
    decisions = _read(recorded, "controller.jsonl")
    first = decisions[0]
    assert "start-up probe" in first["reason"] and first["inputs"]["probe_best_concurrency"] == best
    # Planned in waves of the probe's best level, each step's tail taken as one wave: the smallest
    # batch within 10% of the fewest waves for the 40 items, at most 4x the largest level probed.
    sizes = range(best, min(40, 4 * max(p["concurrency"] for p in curve["points"])) + 1)
    waves = {b: math.ceil(40 / b) * (math.ceil(b / best) + 1) for b in sizes}
    assert first["batch_size"] == min(b for b in sizes if waves[b] <= 1.1 * min(waves.values()))
    assert first["inputs"]["start_waves"] == waves[first["batch_size"]]

    # Recorded with the run: the replay's probe is answered by the cache, and every decision repeats.
    assert _read(replayed, "batching.json") == curve
    assert [(d["batch_size"], d["reason"]) for d in _read(replayed, "controller.jsonl")] == \
        [(d["batch_size"], d["reason"]) for d in decisions]

    summary = _read(recorded, "summary.json")
    batching = summary["batching"]
    assert batching["best_concurrency"] == best and batching["gain"] > 1 and batching["points"] == curve["points"]
    rows = _read(recorded, "ledger.jsonl")
    predicted = [r for r in rows if r["predicted_seconds"] is not None]
    assert rows[0]["predicted_seconds"] is None and predicted  # predicted once a step was measured
    assert batching["steps_predicted"] == len(predicted)
    assert 0 < batching["predicted_vs_measured"] < 10
    assert _read(recorded, "calls.json")[PROBE_ROLE] == sum(p["concurrency"] for p in curve["points"])
    page = (recorded / "report.md").read_text()
    assert "## Batching" in page and f"at the best concurrency {best}" in page and "Predicted against measured step seconds: median ratio" in page


class _ProbeFails:
    """The task world, but every batching-probe request gets HTTP 500."""

    def respond(self, request: SimRequest):
        if request.role == PROBE_ROLE:
            raise RuntimeError("the probe is refused")
        return WORLD.respond(request)


async def test_a_server_failing_the_probe_leaves_one_line_and_a_cold_start(start_sim_server, tmp_path, capsys) -> None:
    server = await start_sim_server(_ProbeFails(), preset=FOUR_SLOTS, time_scale=0.02)
    config = _config(server.url, transport=TransportConfig(max_retries=0))
    async with open_session(config) as session:
        result = await session.train(out=tmp_path / "run")
    assert result.steps > 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "batching probe" in line]
    assert len(lines) == 1 and "failed" in lines[0] and lines[0].endswith("the planner starts cold")
    first = _read(tmp_path / "run", "controller.jsonl")[0]
    assert first["batch_size"] == 20 and first["reason"].startswith("start: nothing measured yet")
    batching = _read(tmp_path / "run", "summary.json")["batching"]
    assert batching["points"] == [] and batching["stopped"] == "error" and batching["best_concurrency"] is None
