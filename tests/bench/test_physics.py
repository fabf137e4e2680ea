"""The benches' physics checks (``bench/physics.py``): a figure is refused, not printed, when the
world is not the one its formula divides by."""

from __future__ import annotations

import math

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.bench_scripts import load_bench

ROOT = Path(__file__).resolve().parents[2]


physics = load_bench("physics")
EXIT_WRONG_WORLD, WrongWorld = physics.EXIT_WRONG_WORLD, physics.WrongWorld
check_latency, check_nodes, physical_ratio = physics.check_latency, physics.check_nodes, physics.physical_ratio


@contextmanager
def sim_server(*args: str) -> Iterator[str]:
    """A ``sim-server`` process (echo world) on a free port with ``args``; its base URL."""
    process = subprocess.Popen([sys.executable, "-m", "combee_fast.sim.cli", "sim-server", "--port", "0",
                                "--world", "echo", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("listening on "), process.stderr.read() if process.stderr else line
        yield line.removeprefix("listening on ").strip()
    finally:
        process.terminate()
        process.communicate(timeout=10)


def _throughput(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "throughput.py"), "--concurrency", "4", "--seconds",
                           "0.5", "--warmup", "0.2", "--no-httpx", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_throughput_refuses_a_server_that_answers_sooner_than_asked() -> None:
    """The sim-server at its default time scale (learn's, 0.01) answers a 0.2 s latency in ~2 ms:
    the bench once divided by 200 ms anyway and printed 5.5x its physical limit."""
    with sim_server("--constant-latency", "0.2") as url:
        done = _throughput("--url", url, "--latency", "0.2")
    assert done.returncode == EXIT_WRONG_WORLD, done.stdout + done.stderr
    assert done.stdout == ""  # no figure
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bench/throughput.py: refused: the server at ")
    assert "sooner than the 200.0 ms the ideal divides by" in lines[0]


def test_throughput_measures_a_server_at_real_time() -> None:
    with sim_server("--constant-latency", "0.1", "--time-scale", "1") as url:
        done = _throughput("--url", url, "--latency", "0.1")
    assert done.returncode == 0, done.stderr
    figures = dict(token.split("=", 1) for token in done.stdout.strip().splitlines()[-1].split())
    assert 0 < float(figures["throughput_ratio"]) <= 1
    assert float(figures["single_request_ms"]) >= 95 and figures["server_cpu_us_per_request"] == "-"


def test_a_ratio_to_a_physical_limit_never_exceeds_one() -> None:
    assert physical_ratio("r", 0.5) == 0.5
    assert physical_ratio("r", 1.004) == 1.0  # within the timer's noise
    for value in (1.2, float("nan"), -0.1):
        with pytest.raises(WrongWorld, match="r="):
            physical_ratio("r", value)


def test_a_ratio_may_exceed_one_by_the_measured_noise_and_no_more() -> None:
    noise = physics.repeat_noise([2.00, 2.04, 2.02])  # the same work timed three times
    assert noise == pytest.approx(9.925 * 0.02 * math.sqrt(4 / 3) / 2.02)  # t(2 df, 0.995) x sd x sqrt(1 + 1/3)
    assert physical_ratio("r", 1.1, noise=noise) == 1.0
    with pytest.raises(WrongWorld, match=r"r=1.120 exceeds its physical limit 1 by more than the measurement's noise \(0.113\)"):
        physical_ratio("r", 1.12, noise=noise)
    assert physical_ratio("r", 1.004, noise=0.0) == 1.0  # never tighter than the timer's noise
    with pytest.raises(WrongWorld, match="each > 0 s"):
        physics.repeat_noise([0.0, 1.0])
    with pytest.raises(WrongWorld, match="two or more timings"):
        physics.repeat_noise([1.0])


def test_latency_and_node_checks() -> None:
    assert check_latency([0.21, 0.2, 0.22], 0.2, where="here") == 0.21
    with pytest.raises(WrongWorld, match="answered a single request in 2.0 ms"):
        check_latency([0.2, 0.002, 0.2], 0.2, where="here")  # one early answer: the server does not wait
    with pytest.raises(WrongWorld, match="over 1.5x"):
        check_latency([0.5, 0.6], 0.2, where="here")
    check_nodes(2, 2)
    with pytest.raises(WrongWorld, match="Ray counts 1 live node"):
        check_nodes(1, 2)
