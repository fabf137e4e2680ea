"""TextGrad on agents: on the terminal task the forward pass is an agent episode (real sandboxes,
the in-process simulated endpoint playing the agent) under the prompt variable, and the loss and
the gradient read its trajectory, its reward and the checker's remarks, within their endpoints'
context."""

from __future__ import annotations

import shutil

import pytest

from combee_fast.config import MapConfig, SessionConfig, SimConfig, TaskConfig
from combee_fast.roles.budget import TEMPLATE_TOKENS_PER_MESSAGE, conservative_tokens
from combee_fast.roles.trajectory import fitted_prompt, render_trajectory
from combee_fast.session import open_session
from combee_fast.sim.terminal import TERMINAL_LESSONS
from combee_fast.tasks.terminal.families import BY_KEY
from combee_fast.textgrad.calls import GRADIENT_ROLE, LOSS_ROLE, TextGradCalls, loss_agent_messages
from combee_fast.textgrad.learner import run_chain

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)")


def _config() -> SessionConfig:
    return SessionConfig(learner="textgrad", method="textgrad", seed=5,
                         task=TaskConfig(name="terminal", train_split="train[0:8]", val_split="selection[0:2]"),
                         map=MapConfig(workers=4), sim=SimConfig("flat", 1e-3))


async def test_a_forward_pass_is_an_episode_whose_loss_and_gradient_read_its_trajectory() -> None:
    async with open_session(_config()) as session:
        calls = TextGradCalls(session.task, session.calls, session.attempts())
        traces = [await run_chain(calls, example, "Do the chore.", epoch=0, version=7)
                  for example in session.train_split.examples]
        again = await calls.forward(session.train_split.examples[0], "Do the chore, carefully.", epoch=0, version=8)
    verdicts = set()
    for trace in traces:
        forward, loss, gradient = trace.forward, trace.loss, trace.gradient
        trajectory = forward.trajectory
        assert trajectory is not None and ":v7:" in trajectory.key and trajectory.steps
        assert forward.score == trajectory.reward and forward.feedback == trajectory.feedback
        assert loss is not None and gradient is not None and loss.error is None and gradient.error is None
        assert loss.verdict == ("correct" if forward.score >= 1.0 else "incorrect")  # the checks' verdict, read
        family = BY_KEY[forward.example.meta["family"]]
        assert gradient.change in {TERMINAL_LESSONS.about(family.name, k) for k in range(2)} or \
            gradient.change.startswith("General — lesson")
        assert trace.episodes() == [trajectory]
        roles = [usage.role for usage, _ in trace.call_outcomes()]
        assert roles == ["textgrad_forward"] * len(trajectory.steps) + [LOSS_ROLE, GRADIENT_ROLE]
        assert trace.sim_seconds > trajectory.env_seconds > 0
        verdicts.add(loss.verdict)
    assert verdicts == {"correct", "incorrect"}
    assert again.trajectory is not None and again.trajectory.seed == traces[0].forward.trajectory.seed  # its node


async def test_the_losss_prompt_holds_the_trajectory_cut_to_its_endpoints_context() -> None:
    async with open_session(_config()) as session:
        calls = TextGradCalls(session.task, session.calls, session.attempts())
        forward = await calls.forward(session.train_split.examples[1], "Do the chore.", epoch=0)
    trajectory = forward.trajectory
    assert trajectory is not None
    def tokens(messages) -> int:
        return sum(conservative_tokens(m.content) + TEMPLATE_TOKENS_PER_MESSAGE for m in messages)

    def build(chars: int):
        return loss_agent_messages(forward, render_trajectory(trajectory, chars))

    whole = loss_agent_messages(forward, render_trajectory(trajectory))
    assert render_trajectory(trajectory) in whole[1].content
    assert f"Reward: {forward.score:g}\n{forward.feedback}" in whole[1].content
    assert fitted_prompt(build, None, 1024) == whole == fitted_prompt(build, 1024 + tokens(whole) + 20, 1024)
    tight = 1024 + (tokens(build(0)) + tokens(whole)) // 2  # room for about half the trajectory
    cut = fitted_prompt(build, tight, 1024)
    assert tokens(cut) <= tight - 1024 < tokens(whole)
    assert "Step 1:" in cut[1].content and "Final answer:" in cut[1].content  # its start and its end kept
