"""GEPA on agents: on the terminal task a solve is an agent episode (real sandboxes, the in-process
simulated endpoint playing the agent) whose instructions are the candidate, every candidate gets
the same seed on an example, the proposer reads the episodes' trajectories within its context,
and async-gepa's decisions do not follow the environment's (real, varying) seconds."""

from __future__ import annotations

import shutil

import orjson
import pytest

from combee_fast.config import MapConfig, SessionConfig, SimConfig, TaskConfig
from combee_fast.gepa.settings import GepaConfig, PipelineConfig
from combee_fast.gepa.calls import GepaCalls, proposer_messages
from combee_fast.gepa.candidate import Candidate
from combee_fast.gepa.iteration import grade
from combee_fast.roles.budget import TEMPLATE_TOKENS_PER_MESSAGE, conservative_tokens
from combee_fast.schema import GradedAnswer, Step, ToolCall, Trajectory, Usage
from combee_fast.session import open_session
from combee_fast.sim.terminal import TERMINAL_LESSONS
from combee_fast.tasks.registry import get_task
from combee_fast.tasks.terminal.families import BY_KEY
from tests.gepa.test_pipeline import _Watched

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)")


def _config(method: str = "gepa", **options: str) -> SessionConfig:
    return SessionConfig(learner="gepa", method=method, seed=3,
                         task=TaskConfig(name="terminal", train_split="train[0:16]", val_split="selection[0:4]",
                                         options=options),
                         map=MapConfig(workers=8), sim=SimConfig("flat", 1e-3),
                         learners={"gepa": GepaConfig(combee_minibatch=4, max_metric_calls=10**9, max_epochs=1,
                                                      pipeline=PipelineConfig(proposals=2))})


@needs_bwrap
async def test_a_solve_is_an_episode_under_the_candidate_seeded_by_its_example_alone() -> None:
    async with open_session(_config()) as session:
        calls = GepaCalls(session.task, session.calls, session.attempts())
        example, other = session.train_split.examples[:2]
        family = BY_KEY[example.meta["family"]]
        taught = f"Do the chore.\n- {TERMINAL_LESSONS.about(family.name, 0)}"
        first, second = await calls.solve(example, "Do the chore."), await calls.solve(example, taught)
        elsewhere = await calls.solve(other, "Do the chore.")
        graded = await grade(calls, Candidate.seed(), session.train_split.examples[:4], workers=4)
    for solve in (first, second):
        trajectory = solve.trajectory
        assert trajectory is not None and trajectory.steps and trajectory.finished
        assert solve.score == trajectory.reward and solve.feedback == trajectory.feedback
        assert solve.sim_seconds == solve.usage.effective_latency_s + trajectory.env_seconds > trajectory.env_seconds > 0
        assert [usage.role for usage, _ in solve.call_outcomes()] == ["gepa_solver"] * len(trajectory.steps)
    assert first.trajectory.seed == second.trajectory.seed != elsewhere.trajectory.seed  # common random numbers
    assert first.trajectory.key != second.trajectory.key  # told apart by the candidate's text
    assert graded.env_seconds > 0
    assert graded.model_seconds == pytest.approx(max(e.usage.effective_latency_s for e in graded.evaluations))


def _episode(index: int, observation: str, reward: float) -> GradedAnswer:
    example = get_task("terminal").load("train").examples[index]
    steps = (Step(0, "look around", ToolCall("run", '{"command": "ls"}'), observation, 1.0, 0.01, Usage(role="x")),
             Step(1, "done", ToolCall("finish", '{"answer": "done"}'), "", 1.0, 0.0, Usage(role="x")))
    feedback = "every check passed" if reward else "not done: sorted.txt: line 2 is '10'"
    trajectory = Trajectory(f"solve:{example.id}", example.id, 0, 0, "sha", 1, steps, "done", reward, feedback,
                            finished=True)
    return GradedAnswer(example, "done", reward, feedback, Usage(role="x"), None, trajectory)


def test_the_reflective_dataset_holds_every_trajectory_within_the_proposers_context() -> None:
    long = "listing " * 2000
    few = [_episode(i, long if i % 2 else "exit status 0\nnums.txt", float(i % 2)) for i in range(2)]
    many = [_episode(i, long, 0.0) for i in range(8)]
    for episodes in (few, many):
        messages = proposer_messages("Do the chore.", episodes, 6000, 1024)
        rows = [orjson.loads(line) for line in messages[1].content.split("<examples>\n")[1].split("\n</examples>")[0]
                .splitlines()]
        assert [row["question"] for row in rows] == [e.example.input for e in episodes]
        assert [(row["score"], row["feedback"]) for row in rows] == [(e.score, e.feedback) for e in episodes]
        for row in rows:
            assert row["trajectory"].startswith("Step 1:\n  thought: look around\n  action: run")
            assert "Final answer: done" in row["trajectory"]
        assert sum(conservative_tokens(m.content) + TEMPLATE_TOKENS_PER_MESSAGE for m in messages) <= 6000 - 1024
    short = proposer_messages("Do the chore.", few, None, 1024)[1].content
    assert "observation: exit status 0\\nnums.txt" in short  # a short trajectory whole, its observation with it
    assert "gepa_solver" not in short and "(no answer)" not in short


@needs_bwrap
async def test_async_gepas_decisions_do_not_follow_the_environments_seconds_but_its_time_counts_them() -> None:
    runs = []
    for options in ({}, {"tool_wait_s": "0.05"}):  # every command also waits 50 ms: environment seconds
        async with open_session(_config("async-gepa", **options)) as session:
            watched = _Watched(session.method())
            runs.append((await session.train(method=watched), watched.changes))
    (plain, plain_changes), (slow, slow_changes) = runs
    assert plain.artifact == slow.artifact and plain.final == slow.final  # the same pool, the same decisions
    schedule = [[(c.outcome, c.measure.spans, c.measure.latency) for c in changes if c.measure is not None]
                for changes in (plain_changes, slow_changes)]
    assert schedule[0] == schedule[1] and len(schedule[0]) >= 3  # the schedule runs on model seconds alone
    assert slow.env_seconds > plain.env_seconds + 1.0
    assert slow.train_sim_seconds > plain.train_sim_seconds + 0.1  # the environment's delay is on the reported path
