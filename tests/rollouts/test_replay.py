"""Agents in a real environment, replayed: a terminal-task run recorded in a replay cache and
replayed from it (on the other executor, so the requests complete in another order) makes no
request the cache does not hold and learns the same playbook. What an agent sees of its
sandbox is in its next request, so this fails as soon as an observation differs between runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.rollouts.test_process import RUN, _learn

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("bwrap") is None,
                                                   reason="bubblewrap is not installed (.ci/run installs it)")]


def test_a_recorded_terminal_run_replays_to_the_same_playbook(tmp_path: Path) -> None:
    cache = str(tmp_path / "cache.jsonl")
    recorded = _learn(*RUN, "--cache", cache, "--cache-mode", "record", "--out", str(tmp_path / "recorded"))
    assert recorded.returncode == 0, recorded.stderr
    replayed = _learn(*RUN, "--cache", cache, "--cache-mode", "replay", "--executor", "process", "--processes", "3",
                      "--out", str(tmp_path / "replayed"))
    assert replayed.returncode == 0, replayed.stderr
    assert (tmp_path / "replayed" / "errors.jsonl").read_text() == ""
    assert (tmp_path / "recorded" / "final.json").read_bytes() == (tmp_path / "replayed" / "final.json").read_bytes()
    summaries = [json.loads((tmp_path / run / "summary.json").read_text()) for run in ("recorded", "replayed")]
    assert summaries[0]["calls"] == summaries[1]["calls"] > 24
