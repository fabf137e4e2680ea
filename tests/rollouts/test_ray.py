"""The ``ray`` backend: without Ray the package still imports and choosing the backend is one
line; a cluster that cannot be reached is one line and exit 2; on a real two-node cluster on
this machine (:class:`~tests.rollouts.ray_cluster.LocalRayCluster`), a run whose second node is
killed mid-run loses no episode, counts none twice, counts its re-runs, and learns what the
``local`` and ``process`` backends learn."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from combee_fast.config import (AgentConfig, CacheConfig, ExecutorConfig, MapConfig, SessionConfig, SimConfig,
                                TaskConfig)
from combee_fast.engine.loop import run
from combee_fast.session import open_session
from tests.rollouts.ray_cluster import DRIVER_ENV, LocalRayCluster
from tests.worker_groups import RAY

pytestmark = RAY

ROOT = Path(__file__).resolve().parents[2]
RUN = ["--task", "terminal", "--train-split", "train[0:24]", "--val-split", "selection[0:4]", "--batch-size", "12",
       "--quiet"]
SLOW_TOOLS = ["--task-option", "tool_wait_s=0.4"]  # episodes long enough to be cut by a node's death

needs_ray = pytest.mark.skipif(shutil.which("ray", path=str(Path(sys.executable).parent)) is None,
                               reason="Ray is not installed (pip install -e '.[ray]'; .ci/run installs it)")
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bubblewrap is not installed (.ci/run installs it)")


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "combee_fast.cli", "learn", *args]


def _learn(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_command(*args), cwd=ROOT, capture_output=True, text=True, timeout=400,
                          env={**os.environ, **(env or {})})


def test_without_ray_the_package_imports_and_choosing_ray_is_one_line(tmp_path: Path) -> None:
    blocked = ("import sys; sys.modules['ray'] = None; "  # as if the extra were not installed
               "import combee_fast, combee_fast.session, combee_fast.rollouts.executors; "
               "from combee_fast.cli import main; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", blocked, "learn", *RUN, "--executor", "ray", "--out",
                           str(tmp_path / "run")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and not (tmp_path / "run").exists()
    line, = done.stderr.strip().splitlines()
    assert "executor.backend 'ray' needs Ray: pip install -e '.[ray]'" in line


@needs_ray
@pytest.mark.parametrize("given", ["address", "recorded"])
def test_a_cluster_that_cannot_be_reached_is_one_line_and_exit_2(tmp_path: Path, given: str) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address, env = (f"127.0.0.1:{port}", {}) if given == "address" else ("auto", {"RAY_ADDRESS": f"127.0.0.1:{port}"})
    done = _learn(*RUN, "--executor", "ray", "--ray-address", address, "--out", str(tmp_path / "run"), env=env)
    assert done.returncode == 2 and not (tmp_path / "run").exists()
    line, = done.stderr.strip().splitlines()
    assert line.startswith(f"combee learn: error: executor.ray_address '{address}'")
    assert f":{port}" in line and "no Ray cluster answers there" in line


@pytest.mark.slow
@needs_ray
def test_a_raylets_port_as_the_cluster_address_is_one_line_and_exit_2_at_once(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        raylet_port = probe.getsockname()[1]
    with LocalRayCluster() as cluster:
        cluster.start(1, f"--node-manager-port={raylet_port}")
        address = f"{cluster.address.rpartition(':')[0]}:{raylet_port}"
        started = time.monotonic()
        done = _learn(*RUN, "--executor", "ray", "--ray-address", address, "--out", str(tmp_path / "run"))
        seconds = time.monotonic() - started
    assert done.returncode == 2 and not (tmp_path / "run").exists()
    line, = done.stderr.strip().splitlines()
    assert line.startswith(f"combee learn: error: executor.ray_address '{address}'") and "not a Ray cluster's head" in line
    assert seconds < 15


def test_a_malformed_cluster_address_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = _learn(*RUN, "--executor", "ray", "--ray-address", "head-node", "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    line, = done.stderr.strip().splitlines()
    assert "executor.ray_address must be 'auto' or HOST:PORT, got 'head-node'" in line


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.slow
@needs_ray
@needs_bwrap
def test_a_node_killed_mid_run_loses_nothing_and_the_run_learns_what_local_and_process_learn(tmp_path: Path) -> None:
    others = {backend: subprocess.Popen(_command(*RUN, *SLOW_TOOLS, "--executor", backend, "--out",
                                                 str(tmp_path / backend)), cwd=ROOT, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
              for backend in ("local", "process")}
    with LocalRayCluster(cpus=1, sandboxes=1) as cluster:
        address = cluster.start(2)
        for process in others.values():
            assert process.wait(timeout=400) == 0, process.stderr.read()  # type: ignore[union-attr]
        out = tmp_path / "ray"
        run = subprocess.Popen(_command(*RUN, *SLOW_TOOLS, "--executor", "ray", "--ray-address", address,
                                        "--ray-actors", "2", "--out", str(out)),
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, **DRIVER_ENV})
        try:
            deadline = time.monotonic() + 300
            while len(_lines(out / "trajectories.jsonl")) < 3:  # the first batch's episodes are running
                assert run.poll() is None and time.monotonic() < deadline, run.stderr.read()  # type: ignore[union-attr]
                time.sleep(0.1)
            cluster.kill_node(1)
            stderr = run.communicate(timeout=400)[1]
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
        assert run.returncode == 0, stderr
    assert not cluster.leftovers()
    local = json.loads((tmp_path / "local" / "summary.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    final = (out / "final.json").read_bytes()
    assert final == (tmp_path / "local" / "final.json").read_bytes() == (tmp_path / "process" / "final.json").read_bytes()
    assert summary["episodes"] == local["episodes"] and summary["episodes_failed"] == 0
    assert summary["calls"] == local["calls"]
    keys = [record["id"] for record in _lines(out / "trajectories.jsonl")]
    assert len(keys) == len(set(keys))  # none twice
    assert sorted(keys) == sorted(record["id"] for record in _lines(tmp_path / "local" / "trajectories.jsonl"))
    reruns = [e for e in _lines(out / "errors.jsonl") if e.get("kind") == "worker_lost"]
    assert summary["episodes_rerun"] == len(reruns) >= 1 and all(e["rerun"] for e in reruns)
    assert "runs again: actor" in stderr


def _raylets() -> set[int]:
    done = subprocess.run(["ps", "-eo", "pid=,stat=,comm="], capture_output=True, text=True)
    return {int(pid) for pid, stat, comm in (line.split(None, 2) for line in done.stdout.splitlines())
            if comm.strip() == "raylet" and not stat.startswith("Z")}


def _gone(pids_before: set[int], timeout_s: float = 15.0) -> bool:
    """Whether every raylet started since ``pids_before`` was taken has exited (within the timeout)."""
    deadline = time.monotonic() + timeout_s
    while _raylets() - pids_before and time.monotonic() < deadline:
        time.sleep(0.2)
    return not _raylets() - pids_before


@pytest.mark.slow
@needs_ray
@needs_bwrap
def test_without_an_address_a_ray_instance_is_started_for_the_run_and_stopped_after(tmp_path: Path) -> None:
    before = _raylets()
    short = [*RUN[:2], "--train-split", "train[0:12]", "--val-split", "selection[0:2]", *RUN[6:]]
    broken = _learn(*short, "--executor", "ray", "--agent", "no_such_module.anywhere:factory", "--out",
                    str(tmp_path / "broken"))
    assert broken.returncode == 2 and not (tmp_path / "broken").exists()
    line, = broken.stderr.strip().splitlines()
    assert "did not start: --agent 'no_such_module.anywhere:factory': cannot import no_such_module.anywhere" in line
    local = _learn(*short, "--out", str(tmp_path / "local"))
    ray_run = _learn(*short, "--executor", "ray", "--out", str(tmp_path / "ray"))
    assert local.returncode == 0 and ray_run.returncode == 0, ray_run.stderr
    assert (tmp_path / "local" / "final.json").read_bytes() == (tmp_path / "ray" / "final.json").read_bytes()
    assert (tmp_path / "local" / "calls.json").read_bytes() == (tmp_path / "ray" / "calls.json").read_bytes()
    assert _gone(before)  # the instance started for the run is stopped


def _cached_config(backend: str, cache: Path, mode: str) -> SessionConfig:
    return SessionConfig(
        task=TaskConfig(name="formula", train_split="train[0:6]", val_split="val[0:2]"),
        agent=AgentConfig(factory="tests.rollouts.agents:talker", env="tests.rollouts.environments:counting"),
        executor=ExecutorConfig(backend=backend, ray_actors=1), map=MapConfig(workers=3),
        cache=CacheConfig(str(cache), mode), sim=SimConfig(preset="flat", time_scale=0.001))


async def _talks(config: SessionConfig) -> list[tuple[object, ...]]:
    """What each episode said and got, and whether all its calls came from the cache."""
    async with open_session(config) as session:
        assert session.episodes is not None
        attempts = session.attempts()
        rollouts = await asyncio.gather(*(attempts.attempt(example, "", version=0, epoch=0)
                                          for example in session.train_split.examples))
    return [(r.trajectory.key, r.trajectory.answer, r.trajectory.reward, r.trajectory.error,  # type: ignore[union-attr]
             [(s.thought, s.action) for s in r.trajectory.steps], r.usage.cached) for r in rollouts]  # type: ignore[union-attr]


@pytest.mark.slow
@needs_ray
def test_the_replay_cache_holds_the_actors_calls(tmp_path: Path) -> None:
    cache = tmp_path / "cache.jsonl"
    recorded = run(_talks(_cached_config("ray", cache, "record")))
    size = cache.stat().st_size
    assert size > 0 and all(error is None and not cached for *_, error, _, cached in recorded)
    for backend in ("ray", "local"):  # what the actors recorded answers a replay on either backend
        replayed = run(_talks(_cached_config(backend, cache, "replay")))
        assert [talk[:-1] for talk in replayed] == [talk[:-1] for talk in recorded]
        assert all(cached for *_, cached in replayed)
    assert cache.stat().st_size == size
