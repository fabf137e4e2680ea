"""Episodes on Ray across 1, 2 and 4 nodes, against the local executor: scaling, overhead, faults.

    python bench/ray_scaling.py
    python bench/ray_scaling.py --per-node 4 --tool-wait 1.0 --waves 3

A real Ray cluster on this machine (``tests/rollouts/ray_cluster.py``: ``ray start`` nodes of
one CPU and one ``sandbox`` resource each) grows from 1 to 2 to 4 nodes. The workload is the
terminal task with its opt-in ``tool_wait_s`` (every command also waits ``--tool-wait`` seconds,
as a tool whose answer waits on I/O), episodes of the built-in agent played by the simulated
endpoint, each in a bubblewrap sandbox on the node that runs it.

- Throughput: with ``n`` nodes (``--nodes``, default 1 2 4; each size first checked to be the
  live node count Ray sees, :mod:`physics`), ``n`` actors of ``--per-node`` episodes each run
  ``--waves`` x ``n`` x ``--per-node`` episodes (after a warm-up wave, untimed), each node's share
  the same chores as one node's; ``efficiency_n`` = throughput(n) / (n x throughput(1)). One node's
  share is timed twice before the larger clusters and again after them (one actor on the grown
  cluster) and throughput(1) is their mean: how far they differ is the measurement's noise here now
  (the machine's load moves it; :func:`physics.repeat_noise`, a 99 % bound), and an efficiency
  above 1 by more than that is refused.
- Overhead: ``--serial`` episodes one at a time, without tool waits, on one Ray actor and on the
  local executor; ``overhead_ms`` is the difference of their mean wall-clock times per episode.
- Faults and identity: ``combee learn`` on the terminal task (``train[0:24]``, batch 12) with the
  local executor and then with the ray executor on the 4-node cluster, one node killed (SIGKILL
  of its every process) once its third episode is recorded; ``lost_rollouts`` counts the local
  run's episodes missing from the Ray run's record, plus any recorded twice, plus any failed
  because its worker died; ``identical`` is 1 when both ``final.json`` are the same bytes.

Last line: ``efficiency_2=... efficiency_4=... overhead_ms=... lost_rollouts=0 identical=1``
(the load average is printed beside the wall-clock figures).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from combee_fast.config import ExecutorConfig, MapConfig, SessionConfig, TaskConfig  # noqa: E402
from combee_fast.engine.loop import run  # noqa: E402
from combee_fast.session import open_session  # noqa: E402
from tests.rollouts.ray_cluster import DRIVER_ENV, LocalRayCluster  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
from physics import check_nodes, guarded, physical_ratio, repeat_noise  # noqa: E402

LEARN = ["--task", "terminal", "--train-split", "train[0:24]", "--val-split", "selection[0:4]", "--batch-size", "12",
         "--quiet"]


def _loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


async def _episodes(config: SessionConfig, count: int, *, warm_up: int, chores: int) -> tuple[float, int]:
    """Wall seconds of ``count`` episodes (the first ``chores`` train chores in turn, empty
    context) at the executor's capacity, after ``warm_up`` untimed ones; and how many failed."""
    async with open_session(config) as session:
        assert session.episodes is not None
        attempts = session.attempts()
        examples = session.train_split.examples
        chores = min(chores, len(examples))

        async def one(index: int, epoch: str) -> bool:
            rollout = await attempts.attempt(examples[index % chores], "", version=0, epoch=epoch)
            return rollout.trajectory is not None and rollout.trajectory.error is None

        await asyncio.gather(*(one(i, "warm") for i in range(warm_up)))
        started = time.perf_counter()
        done = await asyncio.gather(*(one(i, "timed") for i in range(count)))
        return time.perf_counter() - started, done.count(False)


def _config(backend: str, *, address: str | None, actors: int, capacity: int, tool_wait: float) -> SessionConfig:
    options = {"tool_wait_s": str(tool_wait)} if tool_wait else {}
    return SessionConfig(method="combee", task=TaskConfig(name="terminal", options=options, train_split="train",
                                                          val_split="selection[0:4]"),
                         map=MapConfig(workers=capacity),
                         executor=ExecutorConfig(backend=backend, ray_address=address, ray_actors=actors))


def _records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _faults(cluster: LocalRayCluster, folder: Path) -> tuple[int, int, int]:
    """The learn runs of the module docstring: ``(lost_rollouts, identical, re-runs)``."""
    command = [sys.executable, "-m", "combee_fast.cli", "learn", *LEARN, "--task-option", "tool_wait_s=0.3"]
    local = subprocess.run([*command, "--out", str(folder / "local")], cwd=ROOT, capture_output=True, text=True)
    if local.returncode != 0:
        raise SystemExit(f"the local learn run failed: {local.stderr}")
    out = folder / "ray"
    ray_run = subprocess.Popen([*command, "--executor", "ray", "--ray-address", cluster.address, "--ray-actors",
                                str(len(cluster.nodes)), "--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, env={**os.environ, **DRIVER_ENV})
    while len(_records(out / "trajectories.jsonl")) < 3 and ray_run.poll() is None:
        time.sleep(0.1)
    cluster.kill_node(len(cluster.nodes) - 1)
    stderr = ray_run.communicate()[1]
    if ray_run.returncode != 0:
        raise SystemExit(f"the ray learn run failed: {stderr}")
    expected = {str(r["id"]) for r in _records(folder / "local" / "trajectories.jsonl")}
    keys = [str(r["id"]) for r in _records(out / "trajectories.jsonl")]
    died = sum(1 for e in _records(out / "errors.jsonl") if e.get("kind") == "worker_died")
    lost = len(expected - set(keys)) + (len(keys) - len(set(keys))) + died
    identical = int((folder / "local" / "final.json").read_bytes() == (out / "final.json").read_bytes())
    reruns = json.loads((out / "summary.json").read_text()).get("episodes_rerun", 0)
    return lost, identical, reruns


def main() -> int:
    return guarded(_main, "bench/ray_scaling.py")


def _main() -> None:
    parser = argparse.ArgumentParser(description="Ray executor: scaling over nodes, overhead, a node killed")
    parser.add_argument("--per-node", type=int, default=4, help="episodes at once per node (its actor's share)")
    parser.add_argument("--tool-wait", type=float, default=1.0, help="seconds each command also waits (I/O)")
    parser.add_argument("--waves", type=int, default=3, help="timed episodes = waves x nodes x per-node")
    parser.add_argument("--serial", type=int, default=12, help="episodes one at a time for the overhead")
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4],
                        help="cluster sizes, growing from 1 (efficiency_n for every n past 1)")
    args = parser.parse_args()
    if args.nodes[0] != 1 or args.nodes != sorted(set(args.nodes)):
        parser.error(f"--nodes must grow from 1, each size once, got {args.nodes}")
    os.environ.update(DRIVER_ENV)
    walls: dict[int, float] = {}
    with LocalRayCluster(cpus=1, sandboxes=1) as cluster, tempfile.TemporaryDirectory(prefix="ray-bench-") as folder:
        for nodes in args.nodes:
            cluster.start(1) if nodes == 1 else cluster.grow(nodes)
            check_nodes(cluster.alive_nodes(), nodes)
            capacity = nodes * args.per_node
            config = _config("ray", address=cluster.address, actors=nodes, capacity=capacity,
                             tool_wait=args.tool_wait)
            count = args.waves * capacity
            wall, failed = run(_episodes(config, count, warm_up=capacity, chores=args.per_node))
            walls[nodes] = wall
            if nodes == 1:  # one node's share twice before the larger clusters, once after: its noise
                one_node_walls = [wall, run(_episodes(config, count, warm_up=0, chores=args.per_node))[0]]
            print(f"nodes={nodes} episodes={count} failed={failed} wall_s={wall:.2f} "
                  f"episodes_per_s={count / wall:.3f} loadavg={_loadavg()}", file=sys.stderr)
            if nodes == 1:
                serial = {backend: run(_episodes(_config(backend, address=cluster.address, actors=1, capacity=1,
                                                         tool_wait=0.0), args.serial, warm_up=1,
                                                 chores=args.serial))[0]
                          for backend in ("ray", "local")}
                overhead_ms = 1000 * (serial["ray"] - serial["local"]) / args.serial
                print(f"serial episodes={args.serial} ray_s={serial['ray']:.2f} local_s={serial['local']:.2f} "
                      f"loadavg={_loadavg()}", file=sys.stderr)
        one_node = _config("ray", address=cluster.address, actors=1, capacity=args.per_node, tool_wait=args.tool_wait)
        wall_after = run(_episodes(one_node, args.waves * args.per_node, warm_up=args.per_node,
                                   chores=args.per_node))[0]
        one_node_walls.append(wall_after)
        noise = repeat_noise(one_node_walls)
        print(f"one node again after the larger clusters: wall_s={wall_after:.2f} (before: "
              f"{', '.join(f'{w:.2f}' for w in one_node_walls[:-1])}; the noise an efficiency may exceed 1 by, "
              f"99 %: {noise:.3f}) loadavg={_loadavg()}", file=sys.stderr)
        lost, identical, reruns = _faults(cluster, Path(folder))
        print(f"learn with a node killed: re-runs={reruns} loadavg={_loadavg()}", file=sys.stderr)
    one_node_wall = statistics.fmean(one_node_walls)
    efficiency = {n: physical_ratio(f"efficiency_{n}", one_node_wall / walls[n], noise=noise) for n in args.nodes[1:]}
    print(" ".join(f"efficiency_{n}={value:.3f}" for n, value in efficiency.items()) +
          f" overhead_ms={overhead_ms:.1f} lost_rollouts={lost} identical={identical}")


if __name__ == "__main__":
    sys.exit(main())
