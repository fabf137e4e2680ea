"""A real Ray cluster of several nodes on this machine, for the ``ray`` backend's tests and
``bench/ray_scaling.py``: :class:`LocalRayCluster`.

Each node is ``ray start --block`` (the head with ``--head``, the others with ``--address``) in a
session of its own, so every process it starts (raylet, object store, workers, the head's GCS)
carries that session id: :meth:`~LocalRayCluster.kill_node` kills one node's processes and only
them (SIGKILL, as a machine that dies), :meth:`~LocalRayCluster.stop` every node's, whatever
happened. The nodes share a short temporary folder of their own (Ray's, and ``TMPDIR`` of every
process they start, so what a killed node's workers left there goes with it), have no dashboard, a small
object store, ``cpus`` CPUs and ``sandboxes`` ``sandbox`` resources each; the head declares a
node dead after about a second without a heartbeat. Token authentication is off
(:data:`DRIVER_ENV`: the environment a driver of this cluster runs with): the cluster is this
machine's own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
OBJECT_STORE_BYTES = 80 * 2**20
DRIVER_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
FAST_FAILURE_DETECTION = {"RAY_health_check_period_ms": "300", "RAY_health_check_timeout_ms": "300",
                          "RAY_health_check_failure_threshold": "3", "RAY_health_check_initial_delay_ms": "0"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _session_members(sid: int) -> list[int]:
    """The live (not zombie) processes of session ``sid``."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                members.append(int(entry))
    return members


class LocalRayCluster:
    """Nodes of one Ray cluster on this machine (module docstring); a context manager that stops it."""

    def __init__(self, *, cpus: int = 1, sandboxes: int = 4) -> None:
        self.cpus = cpus
        self.sandboxes = sandboxes
        self.temp_dir = tempfile.mkdtemp(prefix="cbray", dir="/tmp")  # short: Ray's socket paths must fit
        self.nodes: list[subprocess.Popen[bytes]] = []
        self.address = ""

    def __enter__(self) -> LocalRayCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _start(self, *args: str) -> None:
        log = open(Path(self.temp_dir) / f"node{len(self.nodes)}.log", "wb")
        node = subprocess.Popen(
            [RAY, "start", "--block", *args, f"--num-cpus={self.cpus}", "--num-gpus=0",
             f"--resources={json.dumps({'sandbox': self.sandboxes})}", f"--object-store-memory={OBJECT_STORE_BYTES}",
             "--disable-usage-stats"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, **FAST_FAILURE_DETECTION, **DRIVER_ENV, "TMPDIR": self.temp_dir})
        self.nodes.append(node)

    def start(self, nodes: int, *head_options: str) -> str:
        """Start a head (with ``head_options`` of ``ray start``) and ``nodes - 1`` more nodes; the
        cluster's address once all have joined."""
        port = _free_port()
        self._start("--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={self.temp_dir}",
                    *head_options)
        self.address = f"{self._node_ip()}:{port}"
        self._started(0)
        self.grow(nodes)
        return self.address

    def grow(self, nodes: int) -> None:
        """Add nodes until the cluster has ``nodes`` (started ones, killed ones included)."""
        for index in range(len(self.nodes), nodes):  # one at a time: a loaded machine times concurrent ones out
            self._start(f"--address={self.address}")
            self._started(index)
        self._wait(sum(node.poll() is None for node in self.nodes))

    def _started(self, index: int, timeout_s: float = 120.0) -> None:
        log = Path(self.temp_dir) / f"node{index}.log"
        deadline = time.monotonic() + timeout_s
        while b"Ray runtime started" not in log.read_bytes():
            if self.nodes[index].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Ray node {index} did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)

    def _node_ip(self) -> str:
        done = subprocess.run([sys.executable, "-c", "import ray.util; print(ray.util.get_node_ip_address())"],
                              capture_output=True, text=True, timeout=60)
        return done.stdout.strip() or "127.0.0.1"

    def alive_nodes(self) -> int:
        """Nodes the cluster's GCS counts alive."""
        done = subprocess.run(
            [sys.executable, "-c", "import sys, ray; ray.init(address=sys.argv[1], log_to_driver=False); "
             "print(sum(n['Alive'] for n in ray.nodes()))", self.address],
            capture_output=True, text=True, timeout=120, env={**os.environ, **DRIVER_ENV})
        return int(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else -1

    def _wait(self, count: int, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(node.poll() is not None for node in self.nodes):
                raise RuntimeError(f"a Ray node exited: see {self.temp_dir}/node*.log")
            if self.alive_nodes() >= count:
                return
            time.sleep(0.5)
        raise RuntimeError(f"the Ray cluster did not reach {count} nodes in {timeout_s:g} s")

    def kill_node(self, index: int) -> None:
        """SIGKILL every process of node ``index`` (as a machine that dies)."""
        sid = self.nodes[index].pid
        deadline = time.monotonic() + 20.0
        while (members := _session_members(sid)) and time.monotonic() < deadline:
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if self.nodes[index].poll() is None:
                self.nodes[index].wait()
            time.sleep(0.1)

    def stop(self) -> None:
        """Kill every node's processes (the head last) and remove the temporary folder."""
        for index in reversed(range(len(self.nodes))):
            self.kill_node(index)
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def leftovers(self) -> list[int]:
        """Processes of this cluster still running (none after :meth:`stop`)."""
        return [pid for node in self.nodes for pid in _session_members(node.pid)]
