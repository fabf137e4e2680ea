"""Hostile agents are contained (``combee learn`` in real processes, real bubblewrap sandboxes):
a fork bomb, a command filling the disk, one sleeping forever, one printing without end, one
reading ``/etc/shadow`` and an API key, one opening a network connection and one writing outside
its working directory each become one error of their own kind in ``errors.jsonl``, the host is
untouched, and the run goes on; when most episodes fail, it stops with exit 3. Two runs at once,
each with a fork bomb, leave each other's episodes and a host process alone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from combee_fast.sandbox.limits import LEASES, SEARCH_SPAN, live_processes, user_processes
from combee_fast.sandbox.scratch import scratch_folder
from tests.rollouts.agents import HOSTILE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600),
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)")]

ROOT = Path(__file__).resolve().parents[2]
UID_BASE = 63000
WORKERS = 16
SECRET = "sk-test-this-key-must-never-be-read-7731"
CONFIG = f"""
[executor]
step_timeout_s = 3.0
[sandbox]
cpu_s = 3
memory_mb = 512
max_processes = 32
file_mb = 2
disk_mb = 8
uid_base = {UID_BASE}
[map]
workers = {WORKERS}
max_rounds = 0
"""


def _learn_command(config: Path, agent: str, *, items: int, out: Path) -> list[str]:
    return [sys.executable, "-m", "combee_fast.cli", "learn", "--config", str(config), "--task", "terminal",
            "--agent", f"tests.rollouts.agents:{agent}", "--train-split", f"train[0:{items}]",
            "--val-split", "selection[30:32]", "--batch-size", str(items), "--out", str(out), "--quiet"]


def _learn(tmp_path: Path, agent: str, *, items: int) -> tuple[subprocess.CompletedProcess[str], int]:
    """The finished run and its process id."""
    config = tmp_path / "run.toml"
    config.write_text(CONFIG)
    command = _learn_command(config, agent, items=items, out=tmp_path / "run")
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env={**os.environ, "OPENAI_API_KEY": SECRET}) as process:
        stdout, stderr = process.communicate(timeout=500)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr), process.pid


def _sandbox_folders(pid: int) -> list[Path]:
    """The sandbox folders process ``pid`` made that are still there (other processes of this
    machine make their own meanwhile)."""
    return list(Path(scratch_folder() or tempfile.gettempdir()).glob(f"combee-sandbox-{pid}-*"))


def _untouched(run: Path, pid: int) -> None:
    assert not Path("/usr/combee-escape.txt").exists()
    assert not _sandbox_folders(pid)
    assert all(live_processes(uid) == 0 for uid in range(UID_BASE, UID_BASE + WORKERS))
    for path in run.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path


def test_each_hostile_agent_is_one_error_of_its_kind_and_the_run_goes_on(tmp_path: Path) -> None:
    done, pid = _learn(tmp_path, "hostile", items=16)
    assert done.returncode == 0, done.stderr
    run = tmp_path / "run"
    failures = [json.loads(line) for line in (run / "errors.jsonl").read_text().splitlines()]
    episodes = [f for f in failures if "episode" in f]
    assert sorted(f["kind"] for f in episodes) == sorted(HOSTILE)
    by_kind = {f["kind"]: f for f in episodes}
    for index, kind in enumerate(HOSTILE):
        assert by_kind[kind]["item"] == f"train:{index}", kind
    summary = json.loads((run / "summary.json").read_text())
    assert summary["episodes"] == 16 and summary["episodes_failed"] == len(HOSTILE)
    _untouched(run, pid)


def test_a_run_whose_episodes_mostly_fail_stops_with_exit_3(tmp_path: Path) -> None:
    done, pid = _learn(tmp_path, "all_hostile", items=12)
    assert done.returncode == 3, done.stderr
    assert "12 of 12 agent episodes failed" in done.stderr and "final.json" in done.stderr
    _untouched(tmp_path / "run", pid)


def _leased(first: int) -> set[int]:
    """The uids from ``first`` on (a pool's search span) that have a lease file."""
    names = os.listdir(LEASES) if os.path.isdir(LEASES) else []
    return {int(name) for name in names if name.isdigit() and first <= int(name) < first + SEARCH_SPAN}


def _unused_uid_base() -> int:
    """A uid_base of this test's own: no lease file and no process in its pools' search span (other
    runs of these tests on this machine lease from :data:`UID_BASE`)."""
    for base in range(1_960_000_000 + (os.getpid() % 1000) * SEARCH_SPAN, 2_100_000_000, SEARCH_SPAN):
        if not _leased(base) and not any(user_processes(uid) for uid in range(base, base + 4 * WORKERS)):
            return base
    raise AssertionError("no unused uid range")


def _sandbox_uids(run: Path) -> set[int]:
    """The uids a run's sandboxes ran as, as its episodes' ``ls -la`` saw them (the owner of ``/work``)."""
    uids: set[int] = set()
    for line in (run / "trajectories.jsonl").read_text().splitlines():
        for step in json.loads(line)["episode"]["steps"]:
            if step["action"] and step["action"]["arguments"] == json.dumps({"command": "ls -la"}):
                uids |= {int(row.split()[2]) for row in step["observation"].splitlines() if row.endswith(" .")}
    return uids


@pytest.mark.skipif(os.geteuid() != 0, reason="sandboxes run as uids of their own under root only")
def test_two_runs_at_once_each_with_a_fork_bomb_leave_each_other_and_the_host_untouched(tmp_path: Path) -> None:
    # two `combee learn` processes of one configuration (one uid_base) at once, the hostile agent's fork
    # bomb in item 0 of each, and a host process running as uid_base: each run's episodes end as their
    # own kinds (the bomb's as process_limit: it hits the limit before its next command has run, and
    # what it printed comes with a result), the two runs' sandboxes share no uid and none runs as the
    # host process's, which lives; no process of their uids is left, nor a sandbox folder of theirs
    base = _unused_uid_base()
    bystander = subprocess.Popen(["setpriv", f"--reuid={base}", f"--regid={base}", "--clear-groups", "sleep", "300"])
    started: list[subprocess.Popen[str]] = []
    try:
        deadline = time.monotonic() + 10
        while not live_processes(base) and time.monotonic() < deadline:  # it runs as uid_base before the runs start
            time.sleep(0.01)
        runs = [tmp_path / name for name in ("first", "second")]
        for run in runs:
            run.mkdir()
            (run / "run.toml").write_text(CONFIG.replace(f"uid_base = {UID_BASE}", f"uid_base = {base}"))
        started += [subprocess.Popen(_learn_command(run / "run.toml", "hostile", items=16, out=run / "run"),
                                     cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                    for run in runs]
        for process in started:
            _, stderr = process.communicate(timeout=500)
            assert process.returncode == 0, stderr
        for run in runs:
            failures = [json.loads(line) for line in (run / "run" / "errors.jsonl").read_text().splitlines()]
            episodes = sorted((f["kind"], f["item"]) for f in failures if "episode" in f)
            assert episodes == sorted((kind, f"train:{index}") for index, kind in enumerate(HOSTILE)), failures
            summary = json.loads((run / "run" / "summary.json").read_text())
            assert summary["episodes"] == 16 and summary["episodes_failed"] == len(HOSTILE)
        first, second = (_sandbox_uids(run / "run") for run in runs)
        assert first and second and not first & second  # no uid of one run's sandboxes is the other's
        assert base not in first | second and bystander.poll() is None  # nor the host's, whose process lives
        assert all(live_processes(uid) == 0 for uid in range(base + 1, base + 4 * WORKERS))
        assert not [path for process in started for path in _sandbox_folders(process.pid)]
    finally:
        for process in started:  # still running only when an assertion stopped the test
            process.kill()
            process.wait()
        bystander.kill()
        bystander.wait()
        for uid in _leased(base):  # the runs' lease files, in this test's own range
            Path(LEASES, str(uid)).unlink(missing_ok=True)
