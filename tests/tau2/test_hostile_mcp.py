"""Hostile MCP servers are contained (``combee learn`` in a real process, real server processes):
a server that hangs, floods its output, writes malformed JSON-RPC, exits mid-call, or grades with
NaN, a string or an answer over the bound fails only its own episode, with an error of its own
kind in ``errors.jsonl`` (never a silent 0); the other episodes are
graded by the server's check tool, the run goes on, and no server process outlives it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.tau2.agents import MISBEHAVIOURS
from tests.tau2.helpers import assert_each_misbehaviour_failed_its_episode

ROOT = Path(__file__).resolve().parents[2]
SERVER = Path(__file__).with_name("hostile_mcp.py")
ITEMS = 16
CONFIG = """
[executor]
step_timeout_s = 3.0
[map]
workers = 16
max_rounds = 0
"""


def _tagged(tag: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if tag.encode() in cmdline:
                found.append(int(entry))
    return found


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", ["local", "process"])
def test_each_hostile_server_fails_only_its_episode(tmp_path: Path, backend: str) -> None:
    tag = f"combee-test-{uuid.uuid4().hex}"
    config = tmp_path / "run.toml"
    config.write_text(CONFIG)
    done = subprocess.run(
        [sys.executable, "-m", "combee_fast.cli", "learn", "--config", str(config), "--task", "terminal",
         "--agent", "tests.tau2.agents:misbehaving", "--env", f"mcp:{sys.executable} {SERVER} {tag}",
         "--executor", backend, "--sandbox", "none", "--train-split", f"train[0:{ITEMS}]",
         "--val-split", "selection[30:32]", "--batch-size", str(ITEMS), "--out", str(tmp_path / "run"), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr
    assert "never retrieved" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    summary = assert_each_misbehaviour_failed_its_episode(tmp_path / "run")
    assert summary["episodes_failed"] == len(MISBEHAVIOURS)
    assert _tagged(tag) == []


def _learn(tmp_path: Path, agent: str, tag: str, *, items: str, step_timeout_s: float = 3.0, backend: str = "local",
           variables: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``combee learn`` of the ``agent`` against the hostile server tagged ``tag`` on the executor
    ``backend``, started; its temporary folder ``tmp_path/tmp``, ``variables`` added to its
    environment."""
    (tmp := tmp_path / "tmp").mkdir(exist_ok=True)
    config = tmp_path / "run.toml"
    config.write_text(f"[executor]\nstep_timeout_s = {step_timeout_s}\n")
    return subprocess.Popen(
        [sys.executable, "-m", "combee_fast.cli", "learn", "--config", str(config), "--task", "terminal",
         "--agent", f"tests.tau2.agents:{agent}", "--env", f"mcp:{sys.executable} {SERVER} {tag}",
         "--executor", backend, "--sandbox", "none", "--train-split", items, "--val-split", "selection[30:31]",
         "--max-rounds", "0", "--out", str(tmp_path / f"run-{agent}"), "--quiet"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "TMPDIR": str(tmp), **(variables or {})})


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", ["local", "process"])
def test_a_server_gets_none_of_the_engines_secrets(tmp_path: Path, backend: str) -> None:
    """An MCP server (outside the sandbox) is given the few variables every child keeps, not the
    API key or any other credential in the engine's environment."""
    seen = tmp_path / "seen"
    seen.mkdir()
    secrets = {"OPENAI_API_KEY": "sk-engine-secret", "AWS_SECRET_ACCESS_KEY": "aws-secret", "GITHUB_TOKEN": "ghp-x"}
    behaving = f"train[{len(MISBEHAVIOURS)}:{len(MISBEHAVIOURS) + 2}]"  # items past the misbehaviours
    done = _learn(tmp_path, "misbehaving", f"combee-test-{uuid.uuid4().hex}", items=behaving, backend=backend,
                  variables={**secrets, "COMBEE_TEST_MCP_ENV": str(seen)})
    _, stderr = done.communicate(timeout=280)
    assert done.returncode == 0, stderr
    assert "MCP server runs outside the sandbox, as this user" in stderr
    given = [json.loads(path.read_text()) for path in seen.iterdir()]
    assert given, "no MCP server started"
    for environment in given:
        assert not set(secrets) & set(environment), sorted(environment)
        assert environment["PATH"] == os.environ["PATH"]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_nothing_a_server_starts_outlives_the_run_even_in_a_session_of_its_own(tmp_path: Path) -> None:
    tag = f"combee-test-{uuid.uuid4().hex}"
    done = _learn(tmp_path, "daemonizing", tag, items="train[0:2]")
    _, stderr = done.communicate(timeout=280)
    assert done.returncode == 0, stderr
    assert _tagged(tag) == []


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_killed_engine_leaves_no_server_and_the_next_run_sweeps_its_scratch(tmp_path: Path) -> None:
    """SIGKILL of the engine mid-episode: its servers (and what they started) die with it; their
    scratch folders, which it could not remove, are removed by the next run's first episode."""
    tag = f"combee-test-{uuid.uuid4().hex}"
    engine = _learn(tmp_path, "hanging", tag, items="train[0:2]", step_timeout_s=120.0)
    scratch = tmp_path / "tmp"
    try:
        deadline = time.monotonic() + 120
        while not list(scratch.glob(f"combee-mcp-{engine.pid}-*/hanging")):
            assert time.monotonic() < deadline and engine.poll() is None, "no server ever hung"
            time.sleep(0.2)
        left = list(scratch.glob(f"combee-mcp-{engine.pid}-*"))
    finally:
        engine.kill()
        engine.communicate(timeout=60)
    deadline = time.monotonic() + 10
    while _tagged(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _tagged(tag) == []
    assert all(folder.exists() for folder in left)
    later = _learn(tmp_path, "daemonizing", f"combee-test-{uuid.uuid4().hex}", items="train[0:1]")
    _, stderr = later.communicate(timeout=280)
    assert later.returncode == 0, stderr
    assert not any(folder.exists() for folder in left) and not list(scratch.glob("combee-mcp-*"))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_server_listing_more_tools_than_a_request_may_carry_fails_its_episodes_not_the_endpoint(
        tmp_path: Path) -> None:
    """200 tools of 1 kB each would go into every model request (about 200 kB each): each episode
    fails as ``mcp_tools_too_large`` before any model call, and a run where every episode failed
    is a failure, in one line naming why."""
    done = _learn(tmp_path, "daemonizing", f"combee-test-{uuid.uuid4().hex}", items="train[0:2]",
                  variables={"COMBEE_TEST_MCP_TOOLS": "200"})
    _, stderr = done.communicate(timeout=280)
    assert done.returncode == 3, stderr
    assert "2 of 2 agent episodes failed (mcp_tools_too_large 2;" in stderr and "Traceback" not in stderr
    failures = [json.loads(line) for line in (tmp_path / "run-daemonizing" / "errors.jsonl").read_text().splitlines()]
    assert {f["kind"] for f in failures if "episode" in f} == {"mcp_tools_too_large"}
    assert "over the 64,000 every model request" in failures[0]["message"]
