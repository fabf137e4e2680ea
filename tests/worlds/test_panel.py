"""An agent world that names no learner, and every built-in learner learns on it: the panel task
(:mod:`.panel`) and its world (:mod:`.panel_world`) are written here, outside ``combee_fast``, and
reach the simulated endpoint through the task's ``sim_world`` path alone. ``combee learn`` runs
ACE, GEPA and TextGrad on it against the in-process simulated endpoint, each a short real
session; each run's agent turns are made as its learner's serving role and played by the world's
agent, and each learner's final artifact holds the world's own lessons, which its first artifact
cannot know."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

import pytest

from combee_fast.learners import LEARNERS
from tests.worlds.panel_world import FAMILY_LESSONS

ROOT = Path(__file__).resolve().parents[2]
TASK = "tests.worlds.panel:panel"
SHORT = {"ace": ("--batch-size", "6"), "gepa": ("--combee-minibatch", "6", "--max-metric-calls", "120"),
         "textgrad": ("--batch-size", "6")}
"""Each learner's flags for a short run (GEPA's minibatch and budget are its own)."""

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600),
              pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bubblewrap is not installed (an episode's executor checks it at start)")]


async def _learn(learner: str, out: Path) -> dict:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "combee_fast.cli", "learn", "--task", TASK, "--learner", learner, "--method", "combee",
        "--train-split", "train", "--val-split", "selection", *SHORT[learner], "--sim-preset", "flat", "--quiet",
        "--out", str(out), cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(process.communicate(), 300)
    assert process.returncode == 0, err.decode()
    return json.loads((out / "summary.json").read_text())


async def test_every_built_in_learner_learns_on_an_agent_world_that_names_none(tmp_path: Path) -> None:
    learners = list(LEARNERS.builtin)
    summaries = await asyncio.gather(*(_learn(learner, tmp_path / learner) for learner in learners))
    lessons = [lesson for family in FAMILY_LESSONS.values() for lesson in family]
    for learner, summary in zip(learners, summaries):
        kind = LEARNERS.load(learner)
        assert summary["learner"] == learner and summary["episodes"] > 0 and summary["episodes_failed"] == 0
        turns = summary["accounting"]["train"]["calls"][kind.rollout_role]
        assert turns >= 2 * summary["episodes"], learner  # each episode sets the dial, then finishes
        final = (tmp_path / learner / "final.json").read_text()
        learned = [lesson for lesson in lessons if json.dumps(lesson)[1:-1] in final]
        assert learned, f"{learner}'s final artifact holds none of the panel world's lessons"
