"""An episode's life through the session's real executor (simulated endpoint on loopback, real
environments and agents of the contract): a fresh environment from a bounded pool, always
released; each step and the episode within their wall-clock limits; every failure an error of
its own kind on the trajectory, never an exception."""

from __future__ import annotations

import asyncio
import time

import msgspec
import pytest

from combee_fast.config import (AgentConfig, ExecutorConfig, FaultConfig, MapConfig, SessionConfig, SimConfig,
                                TaskConfig)
from combee_fast.rollouts.episode import MAX_ANSWER_CHARS
from combee_fast.session import open_session
from tests.rollouts import environments


def _config(agent: str, env: str | None = "counting", *, workers: int = 3, faults: FaultConfig | None = None,
            **executor: float | str) -> SessionConfig:
    return SessionConfig(
        task=TaskConfig(name="formula", train_split="train[0:8]", val_split="val[0:2]"),
        agent=AgentConfig(factory=f"tests.rollouts.agents:{agent}",
                          env=None if env is None else f"tests.rollouts.environments:{env}"),
        executor=ExecutorConfig(**executor), map=MapConfig(workers=workers),
        sim=SimConfig(preset="flat", time_scale=0.001, faults=faults or FaultConfig()))


async def _episodes(config: SessionConfig, count: int = 8):  # type: ignore[no-untyped-def]
    async with open_session(config) as session:
        assert session.episodes is not None and session.episodes.capacity == config.map.workers
        attempts = session.attempts()
        examples = session.train_split.examples[:count]
        return await asyncio.gather(*(attempts.attempt(e, "", version=0, epoch=0) for e in examples))


async def test_every_environment_is_fresh_bounded_and_released() -> None:
    environments.LIVE.clear()
    rollouts = await _episodes(_config("talker"))
    assert environments.LIVE["opened"] == environments.LIVE["closed"] == 8 and environments.LIVE["open"] == 0
    assert environments.LIVE["most"] <= 3
    for rollout in rollouts:
        trajectory = rollout.trajectory
        assert trajectory is not None and trajectory.error is None and trajectory.finished
        assert rollout.score == 1.0 and trajectory.feedback == "1 said" and rollout.answer == "said"
        assert [s.action.name for s in trajectory.steps] == ["say"] and trajectory.steps[0].usage.role == "generator"
        assert trajectory.model_seconds > 0 and trajectory.env_seconds > 0


async def test_an_agent_that_raises_fails_its_episode_not_the_run() -> None:
    environments.LIVE.clear()
    rollouts = await _episodes(_config("broken"), 3)
    assert environments.LIVE["closed"] == 3
    for rollout in rollouts:
        error = rollout.trajectory.error  # type: ignore[union-attr]
        assert error is not None and error.kind == "agent_error" and "this agent is broken" in error.message
        assert rollout.error is None and rollout.score == 0.0  # answered (scored), but failed


async def test_an_environment_that_cannot_start_fails_its_episode() -> None:
    rollouts = await _episodes(_config("talker", "broken"), 2)
    assert {r.trajectory.error.kind for r in rollouts} == {"env_error"}  # type: ignore[union-attr]


@pytest.mark.slow
async def test_a_step_past_its_limit_is_given_up_on() -> None:
    environments.LIVE.clear()
    rollouts = await _episodes(_config("talker", "stuck", step_timeout_s=0.1), 2)
    assert {r.trajectory.error.kind for r in rollouts} == {"step_timeout"}  # type: ignore[union-attr]
    assert environments.LIVE["open"] == 0


@pytest.mark.slow
async def test_a_step_waiting_on_the_environments_own_model_is_not_charged_for_it() -> None:
    """A user simulator on a slow model answers within its calls' own timeouts, not the step's."""
    config = _config("talker", "consulting", step_timeout_s=0.1)
    config = msgspec.structs.replace(config, sim=SimConfig(preset="flat", time_scale=1.0))
    started = time.perf_counter()
    rollouts = await _episodes(config, 1)
    assert time.perf_counter() - started > environments.CONSULTING_S  # past the step's limit and grace
    trajectory = rollouts[0].trajectory
    assert trajectory is not None and trajectory.error is None and rollouts[0].score == 1.0, trajectory


async def test_an_episode_past_its_limit_ends_as_episode_timeout() -> None:
    environments.LIVE.clear()
    rollouts = await _episodes(_config("lingering", episode_timeout_s=0.5), 2)
    for rollout in rollouts:
        trajectory = rollout.trajectory
        assert trajectory is not None and trajectory.error is not None
        assert trajectory.error.kind == "episode_timeout" and len(trajectory.steps) >= 1
    assert environments.LIVE["open"] == 0


async def test_a_model_call_that_fails_leaves_the_episode_unanswered() -> None:
    rollouts = await _episodes(_config("talker", faults=FaultConfig(rate_500=1.0)), 2)
    for rollout in rollouts:
        assert rollout.trajectory.error.kind == "model_call"  # type: ignore[union-attr]
        assert rollout.error is not None and rollout.error.label == "5xx"  # unanswered, like a failed call


async def test_a_task_without_environment_scores_the_answer() -> None:
    rollouts = await _episodes(_config("talker", None), 2)
    for rollout in rollouts:
        trajectory = rollout.trajectory
        assert trajectory is not None and trajectory.steps[0].env_error == "bad_action"
        assert trajectory.error is None and trajectory.answer == "said" and rollout.score == 0.0 and rollout.feedback


@pytest.mark.parametrize("agent, raised", [("exiting", "SystemExit: 7"), ("bare_raising", "BaseException: a bare one"),
                                           ("cancelling", "CancelledError: of its own")])
@pytest.mark.parametrize("backend", ["local", "process"])
async def test_whatever_an_agent_raises_fails_its_episode_not_the_run(agent: str, raised: str, backend: str) -> None:
    rollouts = await _episodes(_config(agent, backend=backend), 2)  # type: ignore[arg-type]
    for rollout in rollouts:
        error = rollout.trajectory.error  # type: ignore[union-attr]
        assert error is not None and error.kind == "agent_error" and error.message == raised


@pytest.mark.parametrize("backend", ["local", "process"])
async def test_an_agent_that_blocks_its_thread_is_timed_out(backend: str) -> None:
    started = time.monotonic()
    rollouts = await _episodes(_config("sleeper", backend=backend, episode_timeout_s=1.0), 2)  # type: ignore[arg-type]
    assert time.monotonic() - started < 20  # not the agent's minute
    blocked, other = (r.trajectory for r in rollouts)
    assert blocked is not None and blocked.error is not None and blocked.error.kind == "episode_timeout"
    assert other is not None and other.error is None and other.answer == "awake"  # never held up by it


@pytest.mark.parametrize("agent, message", [
    ("object_finisher", "finish() takes a text answer, got object"),
    ("dict_finisher", "finish() takes a text answer, got dict"),
    ("long_finisher", "the answer has 5000000 characters, more than 20000: it was cut")])
@pytest.mark.parametrize("backend", ["local", "process"])
async def test_an_answer_that_is_not_bounded_text_fails_its_episode(agent: str, message: str, backend: str) -> None:
    rollouts = await _episodes(_config(agent, backend=backend), 2)  # type: ignore[arg-type]
    for rollout in rollouts:
        trajectory = rollout.trajectory
        assert trajectory is not None and trajectory.error is not None
        assert (trajectory.error.kind, trajectory.error.message) == ("bad_answer", message)
        assert trajectory.answer is None or len(trajectory.answer) == MAX_ANSWER_CHARS


@pytest.mark.parametrize("env, message", [
    ("wordy", "check() returned str, not a Score"),
    ("nan_scoring", "check() gave a reward of nan, not a number in [0, 1]"),
    ("closing_badly", "close(): RuntimeError: close failed"),
    ("stepping_badly", "say: the environment failed: KeyError: 'no such tool state'")])
async def test_an_environment_that_breaks_its_contract_fails_its_episode_as_env_error(env: str, message: str) -> None:
    rollouts = await _episodes(_config("talker", env), 2)
    for rollout in rollouts:
        error = rollout.trajectory.error  # type: ignore[union-attr]
        assert error is not None and (error.kind, error.message) == ("env_error", message)
