"""The built-in ReAct agent against the simulated endpoint (a real HTTP server on loopback) in
real sandboxes: OpenAI tool calls where the endpoint does them (probed), a bounded JSON action
otherwise, the same episode either way; a reply that gives no action is an accounted error with
its raw text."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from combee_fast.config import AgentConfig, MapConfig, SessionConfig, SimConfig, TaskConfig
from combee_fast.rollouts.episode import CITED_ARGUMENT
from combee_fast.rollouts.react import FINISH, action_schema
from combee_fast.session import open_session
from combee_fast.tasks.terminal.environment import RUN_TOOL

ROOT = Path(__file__).resolve().parents[2]

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)")


async def _trajectories(tool_calls: str, count: int = 6):  # type: ignore[no-untyped-def]
    config = SessionConfig(task=TaskConfig(name="terminal", train_split="test", val_split="selection[0:1]"),
                           agent=AgentConfig(tool_calls=tool_calls), map=MapConfig(workers=6),
                           sim=SimConfig(preset="flat", time_scale=0.001))
    async with open_session(config) as session:
        attempts = session.attempts()
        examples = session.train_split.examples[::12][:count]
        rollouts = [await attempts.attempt(e, "", version=0, epoch=0) for e in examples]
        probed = session.clients["generator"].capabilities.tools  # type: ignore[union-attr]
    return [r.trajectory for r in rollouts], probed


@needs_bwrap
async def test_tool_calls_and_json_actions_make_the_same_episodes() -> None:
    with_tools, probed = await _trajectories("auto")
    with_json, _ = await _trajectories("off")
    assert probed is True  # the simulated endpoint answers the tool-calling probe with a call
    for a, b in zip(with_tools, with_json):
        assert a.error is None and a.finished and b.finished
        assert all(step.error is None for step in a.steps + b.steps)
        assert [s.action.name for s in a.steps] == [s.action.name for s in b.steps]
        assert [msgspec.json.decode(s.action.arguments) for s in a.steps] == \
            [msgspec.json.decode(s.action.arguments) for s in b.steps]
        assert a.reward == b.reward and a.steps[0].action.name == "run" and a.steps[-1].action.name == "finish"
    assert {t.reward for t in with_tools} <= {0.0, 1.0}


def test_the_json_action_schema_is_bounded() -> None:
    schema = action_schema([RUN_TOOL, FINISH])
    assert schema["properties"]["tool"]["enum"] == ["run", "finish"]
    fields = schema["properties"]["arguments"]["properties"]
    assert fields["command"]["maxLength"] and fields["answer"]["maxLength"] and fields[CITED_ARGUMENT]["maxItems"]
    assert schema["properties"]["arguments"]["additionalProperties"] is False


@pytest.mark.slow
def test_replies_that_give_no_action_are_accounted_errors_with_their_raw_text(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "combee_fast.cli", "learn", "--task", "formula", "--agent", "react",
         "--train-split", "train[0:12]", "--val-split", "val[0:2]", "--batch-size", "12", "--max-rounds", "0",
         "--out", str(out), "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    # the formula world does not play an agent: no reply is an action, every episode fails as unparsed,
    # and the run stops at once on its failed generator replies
    assert done.returncode == 3 and "calls failed (schema_mismatch 24" in done.stderr, done.stderr
    failures = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
    replies = [f for f in failures if f.get("role") == "generator"]
    # two unusable replies an episode, 12 learning episodes and the 2 of the validation after the step
    assert len(replies) == 2 * (12 + 2) and all(f["raw"] and f["kind"] == "schema_mismatch" for f in replies)
    episodes = [f for f in failures if "episode" in f]
    assert len(episodes) == 12 + 2 and all(f["kind"] == "unparsed" for f in episodes)
    calls = json.loads((out / "calls.json").read_text())
    assert calls["generator"] == len(replies) and calls["failed"] >= len(replies)
