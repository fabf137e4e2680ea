"""Issue 52, finding 1: a task of the user's own that the simulated endpoint does not play is
refused at start-up in one line naming the task and what to do, in process and by ``combee
sim-server --world``, instead of running and stopping with exit 3 on ``schema_mismatch ... got None``
(every agent turn answered with no action). The task is a plug-in module of the user's folder,
named by path, solved by acting in an environment with a tool of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from combee_fast.errors import EXIT_USAGE

COMBEE = Path(sys.executable).with_name("combee")
LOOKUP = '''from pathlib import Path

from combee_fast.environments import Observation, Score, Tool
from combee_fast.tasks.jsonl import JsonlTask

LOOKUP = Tool("lookup", "Look a country up.", {"type": "object", "properties": {"country": {"type": "string"}},
                                               "required": ["country"]})


class Atlas:
    """One episode: the agent may look a country up, then answers with its capital."""

    def tools(self):
        return [LOOKUP]

    async def reset(self, task):
        self.target = task.target
        return "Ask the atlas."

    async def step(self, action):
        return Observation(f"its capital is {self.target}", None)

    async def check(self):
        return Score(0.0, "graded by the task")

    async def close(self):
        pass


class AtlasTask(JsonlTask):
    def environment(self, sandboxes):
        return Atlas()


def atlas(**options):
    return AtlasTask(path=Path(__file__).with_name("atlas.jsonl"), name="atlas", **options)
'''
REFUSED = "no simulated world plays task 'atlas': its examples are solved by acting in an environment"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The user's folder: ``atlas_task.py`` and its rows."""
    (tmp_path / "atlas_task.py").write_text(LOOKUP)
    rows = [{"input": f"The capital of country {i}?", "target": f"City {i}"} for i in range(40)]
    (tmp_path / "atlas.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return tmp_path


def _refused(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == EXIT_USAGE and len(lines) == 1, (done.returncode, done.stderr)
    assert REFUSED in lines[0] and "--endpoint URL --model NAME" in lines[0] and "sim_world" in lines[0], lines[0]
    assert "sim.world:" not in lines[0], lines[0]  # the line says what is wrong, not a setting the user never gave
    return lines[0]


def test_learning_an_own_task_the_simulated_endpoint_does_not_play_is_refused_at_start(folder: Path) -> None:
    done = subprocess.run([str(COMBEE), "learn", "--task", "atlas_task:atlas", "--train-split", "train[0:10]",
                           "--val-split", "selection[0:4]", "--batch-size", "5", "--time-scale", "0.0001",
                           "--sandbox", "none", "--quiet", "--out", str(folder / "run")],
                          capture_output=True, text=True, timeout=300, cwd=folder,
                          env={**os.environ, "PYTHONPATH": str(folder)})
    _refused(done)
    assert not (folder / "run").exists()  # refused before anything was made


def test_a_sim_server_asked_to_play_an_own_task_it_cannot_refuses_to_start(folder: Path) -> None:
    done = subprocess.run([str(COMBEE), "sim-server", "--world", "atlas_task:atlas", "--port", "0"],
                          capture_output=True, text=True, timeout=60, cwd=folder,
                          env={**os.environ, "PYTHONPATH": str(folder)})
    assert "listening" not in done.stdout
    _refused(done)
