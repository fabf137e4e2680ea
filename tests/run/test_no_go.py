"""The live planner on a server shaped like the project's CPU llama.cpp server (four slots, the
0.5B decoding ~40 tokens/s alone): where four requests at once generate 1.5 times one request's
tokens/s, the first step is a batch; where they generate less than one (four requests at once were
slower in aggregate than one on another host of the kind, on Formula's prompts), the planner says
``no-go`` (in one line on stderr, in ``controller.jsonl``, the ledger and ``summary.json``) and
runs every step with one item, the sequential schedule, instead of running slower."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from combee_fast.config import EndpointSpec, SessionConfig, TaskConfig, TrainConfig
from combee_fast.learners import role_table
from combee_fast.readout.notices import WaitNotices
from combee_fast.session import open_session
from combee_fast.sim.latency import LatencyPreset
from combee_fast.sim.worlds import task_world
from combee_fast.tasks.registry import get_task

WORLD = task_world(get_task("formula"), role_table())


def cpu_server(gain: float) -> LatencyPreset:
    """Four slots, 25 ms a token alone; four sequences at once generate ``gain`` times one's tokens/s."""
    return LatencyPreset(name=f"cpu-{gain:g}x", overhead_s=0.0, decode_s_per_token=0.025, max_running=4,
                         full_batch_slowdown=4 / gain)


def _read(path: Path):
    text = path.read_text()
    return [json.loads(line) for line in text.splitlines()] if path.suffix == ".jsonl" else json.loads(text)


async def _auto_run(start_sim_server, out: Path, gain: float, capsys) -> tuple[list[dict], dict, str]:
    server = await start_sim_server(WORLD, preset=cpu_server(gain), time_scale=0.1)
    config = SessionConfig(task=TaskConfig(train_split="train[0:12]", val_split="val[0:4]"),
                           train=TrainConfig(batch_size=None, eval_every=0),
                           endpoints={"default": EndpointSpec(url=server.url, model="sim")})
    config = msgspec.structs.replace(config, controller=msgspec.structs.replace(config.controller, probe_s=60.0))
    async with open_session(config) as session:
        session.events.subscribe(WaitNotices())
        result = await session.train(out=out)
    assert result.samples == 12
    return _read(out / "controller.jsonl"), _read(out / "summary.json")["batching"], capsys.readouterr().err


@pytest.mark.slow
async def test_a_server_that_batches_gets_a_batch_and_one_that_is_slower_at_once_gets_the_no_go(
        start_sim_server, tmp_path, capsys) -> None:
    decisions, batching, err = await _auto_run(start_sim_server, tmp_path / "gain", 1.5, capsys)
    assert decisions[0]["batch_size"] > 1 and not decisions[0]["reason"].startswith("no-go")
    assert batching["no_go"] is None and "no-go" not in err and batching["gain"] > 1.3

    decisions, batching, err = await _auto_run(start_sim_server, tmp_path / "flat", 0.7, capsys)
    assert [d["batch_size"] for d in decisions] == [1] * 12
    assert all(d["reason"].startswith("no-go: ") for d in decisions)
    assert batching["no_go"] == decisions[0]["reason"] and batching["gain"] < 1.1
    assert err.count("[planner] no-go: ") == 1  # said once, in one line
    rows = _read(tmp_path / "flat" / "ledger.jsonl")
    assert all(row["batch_reason"].startswith("no-go: ") for row in rows if row["batch_size"])
