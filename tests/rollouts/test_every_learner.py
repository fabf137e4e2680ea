"""GEPA and TextGrad on agents, through the CLI (real ``combee learn`` processes, real sandboxes):
every method of both learns the same ``final.json`` on the ``local``, ``process`` and ``ray``
executors; a run killed with SIGKILL in the middle of a step resumes to the same ``final.json``,
reusing the episodes it had finished; a run recorded in a replay cache replays (on the other
executor) to the same ``final.json`` with no request the cache does not hold.

The simulated endpoint's ``flat`` preset keeps every call's latency independent of the load, so
``async-gepa``, whose decisions follow the calls' latencies, decides alike on every executor."""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.worker_groups import RAY

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900),
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)")]

ROOT = Path(__file__).resolve().parents[2]
COMMON = ["--task", "terminal", "--train-split", "train[0:24]", "--val-split", "selection[0:4]", "--sim-preset", "flat",
          "--quiet"]
GEPA = [*COMMON, "--learner", "gepa", "--combee-minibatch", "8", "--max-metric-calls", "160"]
TEXTGRAD = [*COMMON, "--learner", "textgrad", "--batch-size", "12"]
METHODS = [(GEPA, "gepa"), (GEPA, "naive-gepa"), (GEPA, "combee-gepa"), (GEPA, "async-gepa"),
           (TEXTGRAD, "textgrad"), (TEXTGRAD, "naive-textgrad"), (TEXTGRAD, "combee-textgrad")]


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "combee_fast.cli", "learn", *args]


def _learn(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_command(*args), cwd=ROOT, capture_output=True, text=True, timeout=400,
                          env={**os.environ, **(env or {})})


def _summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


@pytest.mark.parametrize(("args", "method"), METHODS, ids=[method for _, method in METHODS])
def test_each_method_learns_on_agents_alike_in_the_engine_loop_and_in_worker_processes(
        tmp_path: Path, args: list[str], method: str) -> None:
    local = _learn(*args, "--method", method, "--out", str(tmp_path / "local"))
    process = _learn(*args, "--method", method, "--executor", "process", "--processes", "3", "--out",
                     str(tmp_path / "process"))
    assert local.returncode == 0 and process.returncode == 0, local.stderr + process.stderr
    assert (tmp_path / "local" / "final.json").read_bytes() == (tmp_path / "process" / "final.json").read_bytes()
    summary = _summary(tmp_path / "process")
    assert summary["learner"] in ("gepa", "textgrad") and summary["episodes"] >= 24
    assert summary["episodes_failed"] == 0 and summary["env_seconds"] > 0
    serving = "gepa_solver" if summary["learner"] == "gepa" else "textgrad_forward"
    assert summary["accounting"]["train"]["calls"][serving] > summary["episodes"]  # every agent turn, as that role
    learned = (tmp_path / "process" / "prompt.txt").read_text()
    assert " — lesson " in learned  # the context learned from the episodes (the families' lessons)


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _started(log: Path) -> collections.Counter[str]:
    return collections.Counter(log.read_text().splitlines())


RESUMED = [(GEPA, "async-gepa"), (GEPA, "gepa"), (TEXTGRAD, "combee-textgrad")]


@pytest.mark.parametrize(("args", "method"), RESUMED, ids=[method for _, method in RESUMED])
def test_a_run_killed_mid_step_resumes_to_the_same_final_json_reusing_its_finished_episodes(
        tmp_path: Path, args: list[str], method: str) -> None:
    run = [*args, "--method", method, "--agent", "tests.rollouts.agents:counting"]
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    done = _learn(*run, "--out", str(whole), env={"COMBEE_TEST_EPISODE_LOG": str(tmp_path / "a.log")})
    assert done.returncode == 0, done.stderr

    process = subprocess.Popen(_command(*run, "--time-scale", "0.05", "--out", str(killed)), cwd=ROOT,
                               env={**os.environ, "COMBEE_TEST_EPISODE_LOG": str(tmp_path / "b1.log")},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while _lines(killed / "ledger.jsonl") < (2 if args is GEPA else 1) and time.monotonic() < deadline:  # a step done
        time.sleep(0.01)
    at_checkpoint = _lines(killed / "trajectories.jsonl")
    while _lines(killed / "trajectories.jsonl") < at_checkpoint + 4 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert process.poll() is None, "the run ended before it could be killed mid-step"
    process.send_signal(signal.SIGKILL)
    process.wait()
    finished = sum(1 for line in (killed / "trajectories.jsonl").read_bytes().splitlines() if line.endswith(b"}"))
    assert finished > at_checkpoint and sum(_started(tmp_path / "b1.log").values()) > finished  # some in flight

    resumed = _learn("--resume", str(killed), "--quiet", env={"COMBEE_TEST_EPISODE_LOG": str(tmp_path / "b2.log")})
    assert resumed.returncode == 0, resumed.stderr
    again, all_of_them = _started(tmp_path / "b2.log"), _started(tmp_path / "a.log")
    # the episodes finished before the kill are not run again (a candidate graded on an example once
    # more is the same episode again: counted, not told apart)
    assert finished + sum(again.values()) <= sum(all_of_them.values())
    assert not again - all_of_them  # and nothing runs that the whole run did not
    assert (killed / "final.json").read_bytes() == (whole / "final.json").read_bytes()


REPLAYED = [(GEPA, "async-gepa"), (TEXTGRAD, "combee-textgrad")]


@pytest.mark.parametrize(("args", "method"), REPLAYED, ids=[method for _, method in REPLAYED])
def test_a_recorded_run_replays_on_the_other_executor_to_the_same_final_json(
        tmp_path: Path, args: list[str], method: str) -> None:
    cache = str(tmp_path / "cache.jsonl")
    recorded = _learn(*args, "--method", method, "--sim-preset", "h200-70b", "--cache", cache, "--cache-mode",
                      "record", "--out", str(tmp_path / "recorded"))
    assert recorded.returncode == 0, recorded.stderr
    replayed = _learn(*args, "--method", method, "--sim-preset", "h200-70b", "--cache", cache, "--cache-mode",
                      "replay", "--executor", "process", "--processes", "3", "--out", str(tmp_path / "replayed"))
    assert replayed.returncode == 0, replayed.stderr
    assert (tmp_path / "replayed" / "errors.jsonl").read_text() == ""
    assert (tmp_path / "recorded" / "final.json").read_bytes() == (tmp_path / "replayed" / "final.json").read_bytes()
    summaries = [_summary(tmp_path / run) for run in ("recorded", "replayed")]
    assert summaries[0]["calls"] == summaries[1]["calls"] > 24


needs_ray = pytest.mark.skipif(shutil.which("ray", path=str(Path(sys.executable).parent)) is None,
                               reason="Ray is not installed (pip install -e '.[ray]'; .ci/run installs it)")
ON_RAY = [(GEPA, "combee-gepa"), (TEXTGRAD, "combee-textgrad")]


@needs_ray
@RAY
@pytest.mark.parametrize(("args", "method"), ON_RAY, ids=[method for _, method in ON_RAY])
def test_ray_actors_learn_what_the_engine_loop_learns(tmp_path: Path, args: list[str], method: str) -> None:
    local = _learn(*args, "--method", method, "--out", str(tmp_path / "local"))
    ray_run = _learn(*args, "--method", method, "--executor", "ray", "--out", str(tmp_path / "ray"))
    assert local.returncode == 0 and ray_run.returncode == 0, local.stderr + ray_run.stderr
    assert (tmp_path / "local" / "final.json").read_bytes() == (tmp_path / "ray" / "final.json").read_bytes()
    assert (tmp_path / "local" / "calls.json").read_bytes() == (tmp_path / "ray" / "calls.json").read_bytes()
    assert _summary(tmp_path / "ray")["episodes_failed"] == 0
