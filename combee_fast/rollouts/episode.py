"""One agent episode, the unit a :class:`~combee_fast.protocols.RolloutExecutor` runs.

:class:`Episode` is what is submitted (it crosses process and machine boundaries: a msgspec
struct): the example, the frozen context text and its version (and whether it has citable parts),
the episode's seed and, on a retry round, the last answer and the learner's feedback on it. It
knows no learner: the context is whatever the learner renders (a playbook, an instruction, a
prompt variable). :func:`run_episode` is its life, the same
in every backend:

1. a fresh environment from the bounded pool (:class:`EnvironmentPool`), reset from the task,
   within the step's wall-clock limit (no environment: a task that is answered, not acted in);
2. the agent runs on an :class:`EpisodeRun` (the engine's side of
   :class:`~combee_fast.protocols.AgentEpisode`): every model call goes through ``chat_call`` (the
   engine's generator client, so it is accounted as every call), every action through the
   environment within the step's limit (less the seconds the environment waits on its own model
   calls, a task's user simulator: :mod:`.step_limit`), each recorded as a
   :class:`~combee_fast.schema.Step`;
3. the final state is checked (or the answer scored by the task), all within the episode's
   wall-clock limit, and the environment is released whatever happened.

The episode fails (its trajectory's ``error``) at the first of: a model call that failed
(``model_call``: the episode is unanswered), an environment wall (a sandbox limit, a step past
its time limit: the observation's error, except ``bad_action``), the agent giving up
(:meth:`EpisodeRun.fail`), the agent raising anything (``agent_error``: :mod:`.contained`, where a
user's agent runs on a thread of its own), the agent finishing with an answer that is not text
or longer than :data:`MAX_ANSWER_CHARS` (``bad_answer``; a long one is kept cut), the environment raising
(``env_error``: in ``reset``, ``step``, ``check`` or ``close``, or answering with what its contract
does not allow, such as a ``check`` that is no score or a reward that is not a finite number), the
episode's time limit (``episode_timeout``). A failed episode is still
scored. Nothing here raises for an episode's failure; cancellation propagates.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from combee_fast.endpoint.calls import ChatCall, ChatRequest, ChatResult
from combee_fast.errors import EpisodeOver, McpFailure
from combee_fast.engine.rng import derive_seed
from combee_fast.protocols.rollouts import Agent, Environment, Episode
from combee_fast.protocols.tasks import Task
from combee_fast.rollouts.contained import being_cancelled, described, run_agent
from combee_fast.rollouts.step_limit import StepLimit
from combee_fast.sandbox.bwrap import GRACE_S
from combee_fast.schema import (CallError, EpisodeError, Example, Message, Observation, Step, Tool, ToolCall, Trajectory,
                                Usage)


FINISH_ACTION = "finish"
"""The action a step records when the agent ended the episode on it."""

UNANSWERED_KINDS = frozenset({"timeout", "connection", "http_status", "replay_miss", "cancelled", "too_large"})
"""Call failures that leave an episode unanswered (the model could not be reached)."""

OBSERVATION_KEPT = 4
"""A trajectory keeps this many times ``agent.observation_chars`` of each observation."""

STEP_GRACE_S = GRACE_S + 1.0
"""Seconds past the step limit an environment step may take before it is given up on (the sandbox
kills the command at the limit, and itself past its own grace; this bounds an environment that
does neither)."""


class ChatFacts(msgspec.Struct, frozen=True):
    """What an agent's model calls send and what their endpoint can do: the role they are made as
    (the learner's serving role), temperature, the reply's token limit and extra body fields (that
    role's sampling), the endpoint's context length (None: unknown) and whether it does OpenAI
    tool calling."""

    role: str
    temperature: float
    max_tokens: int
    extra_body: dict[str, Any] | None
    context_length: int | None
    tool_calls: bool


class Limits(msgspec.Struct, frozen=True):
    """An episode's limits: model turns, each step's and the whole episode's wall clock, and the
    characters of an observation kept."""

    max_steps: int
    step_timeout_s: float
    episode_timeout_s: float
    observation_chars: int


class EnvironmentPool:
    """Fresh environments from ``factory``, at most ``capacity`` alive at once; every one
    acquired is released (closed) by :meth:`release`."""

    def __init__(self, factory: Callable[[], Environment], capacity: int) -> None:
        self._factory = factory
        self._room = asyncio.Semaphore(capacity)

    async def acquire(self) -> Environment:
        await self._room.acquire()
        try:
            return self._factory()
        except BaseException:
            self._room.release()
            raise

    async def release(self, environment: Environment) -> None:
        try:
            await environment.close()
        finally:
            self._room.release()


MAX_ANSWER_CHARS = 20_000
"""The longest answer an episode keeps (a longer one is cut and fails the episode)."""

MAX_CITED = 1_000
"""The most context ids an episode's answer cites (more are dropped)."""

CITED_ARGUMENT = "cited"
"""The finish tool's argument that lists the cited ids, when the context has citable parts (ACE's
playbook: the only context that has them). Its name is part of what a model is sent (the tools
are in a replay cache's request key: an agent request recorded when it was ``bullet_ids``
misses), and the simulated agent's finishing call names it
(:func:`combee_fast.sim.agent_world.finish_reply`)."""


def finish_arguments(answer: str | None, cited: Sequence[str], *, citable: bool) -> dict[str, Any]:
    """The arguments of the finish tool that end an episode with ``answer`` (and, for a context
    with citable parts, the ids cited): how a finish step is recorded."""
    return {"answer": answer, CITED_ARGUMENT: list(cited)} if citable else {"answer": answer}


class EpisodeRun:
    """The engine's side of one episode (:class:`~combee_fast.protocols.AgentEpisode`)."""

    def __init__(self, episode: Episode, chat_call: ChatCall, facts: ChatFacts, limits: Limits) -> None:
        self.task = episode.example
        self.context = episode.context
        self.seed = episode.seed
        self.round = episode.round
        self.previous_answer = episode.previous_answer
        self.feedback = episode.feedback
        self.citable = episode.citable
        self.tools: Sequence[Tool] = ()
        self.observation = ""
        self.context_length = facts.context_length
        self.tool_calls = facts.tool_calls
        self._chat_call = chat_call
        self.step_limit = StepLimit(chat_call)  # the environment's own model calls go through it
        self._facts = facts
        self._limits = limits
        self._environment: Environment | None = None
        self._steps: list[Step] = []
        self._open: Step | None = None  # the step waiting for its action
        self.answer: str | None = None
        self.cited: tuple[str, ...] = ()
        self.finished = False
        self.failure: EpisodeError | None = None
        self.call_error: CallError | None = None
        self.env_calls: list[Usage] = []  # the environment's own model calls (Observation.calls)

    def bind(self, environment: Environment, observation: str) -> None:
        self._environment = environment
        self.tools = tuple(environment.tools())
        self.observation = observation

    @property
    def steps_left(self) -> int:
        return 0 if self.finished else self._limits.max_steps - len(self._steps) - (self._open is not None)

    def fail(self, kind: str, message: str, *, step: int | None = None) -> None:
        """Mark the episode failed with ``kind`` at ``step`` (default: the current one); the first
        failure is kept."""
        if self.failure is None:
            at = step if step is not None else len(self._steps) - (self._open is None)
            self.failure = EpisodeError(kind, message, max(0, at))

    async def chat(self, messages: Sequence[Message], *, tools: Sequence[dict[str, Any]] = (),
                   schema: dict[str, Any] | None = None, max_tokens: int | None = None) -> ChatResult:
        if self.steps_left <= 0 or self.call_error is not None:
            raise EpisodeOver("the episode has no model turn left")
        self._close_step()
        facts = self._facts
        turn = len(self._steps)
        request = ChatRequest(
            role=facts.role, messages=tuple(messages), max_tokens=max_tokens or facts.max_tokens,
            temperature=facts.temperature, seed=derive_seed(self.seed, "turn", turn), json_schema=schema,
            schema_name="action", extra_body=facts.extra_body, tools=tuple(tools),
            tool_choice="auto" if tools else None)
        result = await self._chat_call(request)
        self._open = Step(turn, result.text or "", None, "", result.usage.effective_latency_s, 0.0, result.usage,
                          error=result.error)
        if result.error is not None and result.error.kind in UNANSWERED_KINDS:
            self.call_error = result.error
            self.fail("model_call", f"{result.error.label}: {result.error.message}")
        return result

    def reject(self, error: CallError) -> None:
        """The reply of the current step could not be used: kept on the step with its raw text."""
        if self._open is not None:
            raw = error.raw if error.raw is not None else self._open.thought
            self._open = msgspec.structs.replace(self._open, error=error, raw=raw)

    async def act(self, action: ToolCall) -> Observation:
        started = time.perf_counter()
        if self._environment is None:
            observation = Observation("there is no environment to act in", "bad_action")
        else:
            try:
                async with self.step_limit.within(self._limits.step_timeout_s + STEP_GRACE_S):
                    observation = await self._environment.step(action)
            except TimeoutError:
                observation = Observation(f"the step took longer than {self._limits.step_timeout_s:g} s and was "
                                          "given up on", "step_timeout")
            except asyncio.CancelledError as exc:
                if being_cancelled():
                    raise
                observation = Observation(f"the environment failed: {described(exc)}", "env_error")
            except (Exception, SystemExit) as exc:  # the environment's fault, not the agent's
                observation = Observation(f"the environment failed: {described(exc)}", "env_error")
            if not isinstance(observation, Observation) or not isinstance(observation.text, str):
                observation = Observation(f"the environment failed: step() returned {type(observation).__name__}, "
                                          "not an Observation of text", "env_error")
        self.env_calls.extend(u for u in observation.calls if isinstance(u, Usage))
        seconds = observation.seconds if observation.seconds is not None else time.perf_counter() - started
        kept = observation.text[: OBSERVATION_KEPT * self._limits.observation_chars]
        step = self._open or Step(len(self._steps), "", None, "", 0.0, 0.0, Usage())
        self._open = None
        self._steps.append(msgspec.structs.replace(step, action=action, observation=kept, env_seconds=seconds,
                                                   env_error=observation.error))
        if observation.error is not None and observation.error != "bad_action":
            self.fail(observation.error, f"{action.name}: {observation.text[-200:].strip()}", step=step.index)
        return observation

    def finish(self, answer: str | None, *, cited: Sequence[str] = ()) -> None:
        """End the episode with ``answer`` (and the ids of the context's parts it relied on,
        ``cited``); the current step's action is recorded as ``finish`` with the arguments of
        the finish tool (:func:`finish_arguments`). An answer that is not text (or None) is
        dropped, one longer than :data:`MAX_ANSWER_CHARS` cut, cited ids that are not text
        dropped: each fails the episode as ``bad_answer``, saying what was given."""
        problem = None
        if answer is not None and not isinstance(answer, str):
            problem, answer = f"finish() takes a text answer, got {type(answer).__name__}", None
        elif answer is not None and len(answer) > MAX_ANSWER_CHARS:
            problem = f"the answer has {len(answer)} characters, more than {MAX_ANSWER_CHARS}: it was cut"
            answer = answer[:MAX_ANSWER_CHARS]
        listed = isinstance(cited, Sequence) and not isinstance(cited, (str, bytes))
        ids = [i for i in cited if isinstance(i, str)] if listed else []
        if not listed or len(ids) != len(cited):
            problem = problem or f"finish(cited=...) takes a list of text ids, got {type(cited).__name__}"
        self.answer = answer
        self.cited = tuple(ids[:MAX_CITED])
        self.finished = True
        if problem is not None:
            self.fail("bad_answer", problem)
        if self._open is not None:
            arguments = msgspec.json.encode(finish_arguments(answer, self.cited, citable=self.citable)).decode()
            self._open = msgspec.structs.replace(self._open, action=ToolCall(FINISH_ACTION, arguments))

    def _close_step(self) -> None:
        if self._open is not None:
            self._steps.append(self._open)
            self._open = None

    def steps(self) -> tuple[Step, ...]:
        self._close_step()
        return tuple(self._steps)


@dataclass(frozen=True)
class Runtime:
    """What runs episodes in one process: the agent, the environments' pool (None: the task is
    answered, not acted in), the task (scores answers when there is no environment), the facts of
    the generator's endpoint and the limits; ``threaded``: the agent runs each episode on a
    thread of its own (a user's agent: :mod:`~combee_fast.rollouts.contained`)."""

    agent: Agent
    pool: EnvironmentPool | None
    task: Task
    facts: ChatFacts
    limits: Limits
    threaded: bool = False


def failed_trajectory(episode: Episode, kind: str, message: str) -> Trajectory:
    """The trajectory of an episode that never ran to its end."""
    return Trajectory(episode.key, episode.example.id, episode.round, episode.version, episode.context_sha,
                      episode.seed, (), None, 0.0, "", EpisodeError(kind, message))


class _EnvironmentBroken(Exception):
    """An environment answered with something its contract does not allow (the message says what)."""


def graded(score: object, source: str) -> tuple[float, str]:
    """The reward and feedback of ``score``, what ``source`` returned; :class:`_EnvironmentBroken`
    when it is not a score (``value`` and ``feedback``) or its value is not a finite number."""
    value, feedback = getattr(score, "value", None), getattr(score, "feedback", None)
    if value is None or feedback is None:
        raise _EnvironmentBroken(f"{source} returned {type(score).__name__}, not a Score")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _EnvironmentBroken(f"{source} gave a reward of {value!r}, not a number in [0, 1]")
    return float(value), feedback if isinstance(feedback, str) else repr(feedback)


def _scored(task: Task, example: Example, answer: str | None) -> tuple[float, str]:
    try:
        score = task.score(example, answer)
    except ValueError as exc:
        return 0.0, f"not scored: {exc}"
    return graded(score, "the task's score()")


async def run_episode(runtime: Runtime, episode: Episode, chat_call: ChatCall) -> Trajectory:
    """Run ``episode`` to its trajectory (module docstring)."""
    run = EpisodeRun(episode, chat_call, runtime.facts, runtime.limits)
    limits = runtime.limits
    environment: Environment | None = None
    reward, feedback = 0.0, ""
    try:
        async with asyncio.timeout(limits.episode_timeout_s):
            if runtime.pool is not None:
                environment = await runtime.pool.acquire()
                connect = getattr(environment, "use_chat", None)
                if callable(connect):  # an environment that calls a model (a task's user): through the engine
                    connect(run.step_limit, episode.seed)
                async with run.step_limit.within(limits.step_timeout_s + STEP_GRACE_S):
                    first = await environment.reset(episode.example)
                if not isinstance(first, str):
                    raise _EnvironmentBroken(f"reset() returned {type(first).__name__}, not text")
                run.bind(environment, first)
            await run_agent(runtime.agent, run, threaded=runtime.threaded)
            if environment is not None:
                score = await asyncio.wait_for(environment.check(), limits.step_timeout_s + STEP_GRACE_S)
                reward, feedback = graded(score, "check()")
            else:
                reward, feedback = _scored(runtime.task, episode.example, run.answer)
    except TimeoutError:
        run.fail("episode_timeout", f"the episode took longer than {limits.episode_timeout_s:g} s")
    except asyncio.CancelledError as exc:
        if being_cancelled():
            raise
        run.fail("env_error", described(exc))
    except _EnvironmentBroken as exc:
        run.fail("env_error", str(exc))
    except McpFailure as exc:  # an MCP server failed its reset or its grading: the kind says how
        run.fail(exc.kind, exc.message)
    except (Exception, SystemExit) as exc:  # the environment broke: this episode fails, the run goes on
        run.fail("env_error", described(exc))
    finally:
        if environment is not None and runtime.pool is not None:
            try:
                await runtime.pool.release(environment)
            except asyncio.CancelledError as exc:
                if being_cancelled():
                    raise
                run.fail("env_error", f"close(): {described(exc)}")
            except (Exception, SystemExit) as exc:  # its close broke: the episode says so, the run goes on
                run.fail("env_error", f"close(): {described(exc)}")
    return Trajectory(
        key=episode.key, item_id=episode.example.id, round=episode.round, version=episode.version,
        context_sha=episode.context_sha, seed=episode.seed, steps=run.steps(), answer=run.answer,
        reward=float(min(1.0, max(0.0, reward))), feedback=feedback, error=run.failure, cited=run.cited,
        finished=run.finished, call_error=run.call_error, env_calls=tuple(run.env_calls),
    )
