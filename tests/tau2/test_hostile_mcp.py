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


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", ["local", "process"])
def test_a_server_gets_none_of_the_engines_secrets(tmp_path: Path, backend: str) -> None:
    """An MCP server (outside the sandbox) is given the few variables every child keeps, not the
    API key or any other credential in the engine's environment."""
    seen = tmp_path / "seen"
    seen.mkdir()  # items past the misbehaviours: the servers behave
    secrets = {"OPENAI_API_KEY": "sk-engine-secret", "AWS_SECRET_ACCESS_KEY": "aws-secret", "GITHUB_TOKEN": "ghp-x"}
    done = subprocess.run(
        [sys.executable, "-m", "combee_fast.cli", "learn", "--task", "terminal",
         "--agent", "tests.tau2.agents:misbehaving", "--env", f"mcp:{sys.executable} {SERVER}",
         "--executor", backend, "--sandbox", "none", "--train-split", f"train[{len(MISBEHAVIOURS)}:{len(MISBEHAVIOURS) + 2}]",
         "--val-split", "selection[30:31]",
         "--max-rounds", "0", "--out", str(tmp_path / "run"), "--quiet"],
        cwd=ROOT, capture_output=True, text=True, timeout=280,
        env={**os.environ, **secrets, "COMBEE_TEST_MCP_ENV": str(seen)})
    assert done.returncode == 0, done.stderr
    assert "MCP server runs outside the sandbox, as this user" in done.stderr
    given = [json.loads(path.read_text()) for path in seen.iterdir()]
    assert given, "no MCP server started"
    for environment in given:
        assert not set(secrets) & set(environment), sorted(environment)
        assert environment["PATH"] == os.environ["PATH"]
