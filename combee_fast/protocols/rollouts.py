"""The rollout seam: how a rollout is made (:mod:`combee_fast.rollouts`); it knows no learner.

- :class:`Agent`: acts in one episode through an :class:`AgentEpisode` (model calls, actions,
  its answer); :class:`Environment`: reset from a task, step with an action, check at the end;
  :class:`EnvironmentTask`: a task whose examples are solved in an environment.
- :class:`Attempts`: how a learner gets one attempt at an example (one model call, or an episode).
- :class:`RolloutExecutor`: runs episodes, at most ``capacity`` at once, and returns their
  trajectories (``local``, ``process``, ``ray``, or a plugin's; picked by ``executor.backend``).

Value types: :class:`Episode` (here, beside the executor that runs it),
:class:`~combee_fast.schema.Trajectory`, :class:`~combee_fast.schema.Step`, :class:`~combee_fast.schema.Tool`, :class:`~combee_fast.schema.ToolCall`,
:class:`~combee_fast.schema.Observation`, :class:`~combee_fast.schema.Rollout`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import msgspec

from combee_fast.schema import Example

if TYPE_CHECKING:
    from combee_fast.endpoint.calls import ChatResult
    from combee_fast.sandbox.sessions import Sandboxes
    from combee_fast.schema import CallError, Message, Observation, Rollout, Tool, ToolCall, Trajectory
    from combee_fast.tasks.base import Score


@runtime_checkable
class Environment(Protocol):
    """Where an agent acts in one episode. The executor owns its life: a fresh one per episode
    (from its factory), :meth:`reset` first, :meth:`step` per action (each within the step's
    wall-clock limit), :meth:`check` once at the end, :meth:`close` always, whatever happened.

    An environment that calls a model itself (a task's user simulator) may have
    ``use_chat(chat_call, seed)``: called before :meth:`reset` with the engine's chat call (each
    request made as a role its task declares, ``Task.roles``, so it is accounted as that role's)
    and the episode's seed. The seconds a step or :meth:`reset` waits on those calls are not
    charged to the step's limit: each call is bounded by its endpoint's own timeout
    (:mod:`combee_fast.rollouts.step_limit`)."""

    def tools(self) -> Sequence[Tool]:
        """The actions it takes (each a tool with a JSON-Schema object of arguments)."""
        ...

    async def reset(self, task: Example) -> str:
        """Set up ``task``; the first observation (what the agent sees before it acts)."""
        ...

    async def step(self, action: ToolCall) -> Observation:
        """Carry out ``action``; never raises for a bad action (the observation says so)."""
        ...

    async def check(self) -> Score:
        """The grade of the final state: ``Score(value, feedback)``, ``value`` (the reward) in
        [0, 1], ``feedback`` the text the learner reflects on beside the trajectory."""
        ...

    async def close(self) -> None: ...

@runtime_checkable
class EnvironmentTask(Protocol):
    """A :class:`Task` whose examples are solved by acting in an environment."""

    def environment(self, sandboxes: Sandboxes) -> Environment:
        """A fresh environment, whose commands run in ``sandboxes``."""
        ...

class AgentEpisode(Protocol):
    """What an :class:`Agent` gets for one episode, from the engine; it names no learner.
    ``task``: the example; ``context``: the frozen context text of the version being learned
    (whatever the learner renders: ACE's playbook, GEPA's candidate, TextGrad's prompt variable);
    ``citable``: the context's parts have ids the agent may cite when it finishes (ACE's
    bullets); ``seed``: the episode's node of the seed tree; ``previous_answer`` and
    ``feedback``: on a retry round, the last attempt's answer and the learner's feedback on it;
    ``tools`` and ``observation``: the environment's tools and first observation (none: empty);
    ``steps_left``: model turns left.

    Every :meth:`chat` is one model call of the learner's serving role through the engine's client
    (so it is accounted like every call) and opens a step of the trajectory; :meth:`act` is one
    environment step, recorded on the current step; :meth:`reject` marks the current step's
    reply unusable (kept with its raw text); :meth:`finish` gives the answer (and the ids of the
    context's parts it relied on) and ends the episode.
    """

    task: Example
    context: str
    seed: int
    round: int
    previous_answer: str | None
    feedback: str | None
    citable: bool
    tools: Sequence[Tool]
    observation: str
    context_length: int | None
    tool_calls: bool

    @property
    def steps_left(self) -> int: ...

    async def chat(self, messages: Sequence[Message], *, tools: Sequence[dict[str, Any]] = (),
                   schema: dict[str, Any] | None = None, max_tokens: int | None = None) -> ChatResult: ...

    async def act(self, action: ToolCall) -> Observation: ...

    def reject(self, error: CallError) -> None: ...

    def fail(self, kind: str, message: str, *, step: int | None = None) -> None:
        """Give the episode up as failed with ``kind`` (at ``step``, default the current one)."""
        ...

    def finish(self, answer: str | None, *, cited: Sequence[str] = ()) -> None: ...

class Agent(Protocol):
    """Acts in one episode (see :class:`AgentEpisode`). Returning without :meth:`AgentEpisode.finish`
    ends the episode unfinished (its final state is still checked). Anything it raises
    (``BaseException`` included) fails the episode (``agent_error``) and never stops the run. A
    user's agent runs each episode on a thread and event loop of its own
    (:mod:`combee_fast.rollouts.contained`): one object serves episodes at once from several
    threads, and reaches the engine only through its episode."""

    async def run(self, episode: AgentEpisode) -> None: ...

class Attempts(Protocol):
    """How a learner gets one attempt at an example against a context version: the one-step case
    is the learner's own model call (ACE: :meth:`~combee_fast.ace.calls.AceCalls.attempt`);
    otherwise an agent episode run by a :class:`RolloutExecutor`
    (:class:`~combee_fast.rollouts.attempts.EpisodeAttempts`), whose rollout carries its
    trajectory. ``previous`` and ``feedback``: a retry round's last attempt and the learner's
    feedback on it (text; None: none could be had). Never raises for a failed call or episode."""

    async def attempt(self, example: Example, context: str, *, version: int, epoch: int | str, round_: int = 0,
                      previous: Rollout | None = None, feedback: str | None = None) -> Rollout: ...

class Episode(msgspec.Struct, frozen=True):
    """One episode to run (module docstring). ``key`` identifies it within a run; ``citable``:
    the context's parts have ids the agent may cite when it finishes (ACE's bullets);
    ``feedback``: on a retry round, what the learner said of ``previous_answer``."""

    key: str
    example: Example
    context: str
    version: int
    context_sha: str
    seed: int
    round: int = 0
    previous_answer: str | None = None
    feedback: str | None = None
    citable: bool = False


class RolloutExecutor(Protocol):
    """Runs agent episodes, at most :attr:`capacity` at once (the map's width), and returns each
    one's :class:`~combee_fast.schema.Trajectory` with the usage, latency and errors of its steps.

    ``run`` waits for room, never raises for an episode's failure (the trajectory says what went
    wrong) and may be called from many tasks at once; ``start`` before the first, ``close`` after
    the last (every worker and environment is released). Backends are picked by
    ``executor.backend`` and imported only when chosen (:mod:`combee_fast.rollouts.executors`).
    """

    @property
    def capacity(self) -> int: ...

    async def start(self) -> None: ...

    async def run(self, episode: Episode) -> Trajectory: ...

    async def close(self) -> None: ...
