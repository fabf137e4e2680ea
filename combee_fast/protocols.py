"""The extension points, declared once. Each is a small Protocol; one strategy per module.

What is learned (a learner is its own package plus one line in :mod:`combee_fast.learners`):

- :class:`Artifact`: what the run loop carries from step to step (ACE: a playbook; GEPA: its
  candidate pool): a version number and a size, nothing more.
- :class:`Trace`: what the map made of one item; the ledger and the batch plans read only this
  (and, of an :class:`EpisodeTrace`, its agent episodes).
- :class:`Proposer`: proposes edits from records and merges proposals (the calls the shuffle
  and the reduce tree make); :class:`Learner` adds the map and the apply.
- :class:`ChangeReport`: what one apply changed (the ledger's added, rejected, evicted).
- :class:`LearnerKind`: one registered learner: its methods, its first artifact, the form
  users deploy (``final.json``), how that is scored, its files and its own stop rules.

How a run lives (:mod:`combee_fast.run.train`):

- :class:`Method`: one learning step over a batch (``sequential``, ``naive``, ``combee``...),
  and the work it carries into the next step.
- :class:`BatchPlan`: each step's batch size and shape, learning from what steps cost.
- :class:`StopRule`: why the run ends after a step.

Where items come from:

- :class:`Task`: examples and a grader; :class:`RolloutSource`: a task whose rollouts already
  exist (collected traces), returned by :meth:`Task.rollout_source`.

How a rollout is made (:mod:`combee_fast.rollouts`):

- :class:`Agent`: acts in one episode through an :class:`AgentEpisode` (model calls, actions,
  its answer); :class:`Environment`: reset from a task, step with an action, check at the end;
  :class:`EnvironmentTask`: a task whose examples are solved in an environment.
- :class:`RolloutExecutor`: runs episodes, at most ``capacity`` at once, and returns their
  trajectories (``local``, ``process``, ``ray``; picked by ``executor.backend``).

How a version reaches users:

- :class:`EmbeddedLearner`: an online learner inside a host (in its loop, a thread or a child
  process): submit rollouts, read the version in service (per request key), release by policy,
  never block.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from pathlib import Path

    from combee_fast.config import SessionConfig
    from combee_fast.methods.base import Applied, EvalResult, StepResult, StepShape
    from combee_fast.run.context import LearnContext
    from combee_fast.run.rundir import RunDir
    from combee_fast.run.state import TrainState
    from combee_fast.endpoint.calls import ChatResult
    from combee_fast.rollouts.episode import Episode
    from combee_fast.sandbox.sessions import Sandboxes
    from combee_fast.schema import (CallError, Example, Message, Observation, Proposal, Rollout, Tool, ToolCall,
                                    Trajectory, Usage)
    from combee_fast.tasks.base import Score, Split

A = TypeVar("A")  # an artifact
D = TypeVar("D")  # a deployable artifact (what final.json holds)
R = TypeVar("R")  # a record: what a proposer reads of one trace
E = TypeVar("E")  # an edit


@runtime_checkable
class Task(Protocol):
    """A source of examples and a grader of answers.

    ``load(split)`` accepts a split name (one of :meth:`split_names`) optionally followed by a
    slice of its rows, e.g. ``"val[0:200]"``; sliced examples keep their row index within the
    named split, so example ids stay stable. ``score`` never raises for a bad answer: an
    unusable answer (``None`` included) scores 0 with feedback saying why. It raises
    ``ValueError`` only for an example without a target (e.g. a trace without ground truth).
    """

    name: str

    def split_names(self) -> tuple[str, ...]: ...

    def load(self, split: str) -> Split: ...

    def score(self, example: Example, answer: str | None) -> Score: ...

    def rollout_source(self) -> RolloutSource | None:
        """This task's collected rollouts, when it learns from them instead of generating."""
        ...


class RolloutSource(Protocol):
    """Rollouts that already exist, by split (the map reflects on them, no generation)."""

    def load_rollouts(self, split: str) -> tuple[Rollout, ...]: ...


class Artifact(Protocol):
    """What is learned, as the run loop sees it: immutable, numbered, sized."""

    @property
    def version(self) -> int:
        """Increases with every change applied to it."""
        ...

    def __len__(self) -> int:
        """Its size (ACE: bullets; GEPA: candidates in the pool)."""
        ...


class Deployable(Protocol):
    """The form of an artifact that users deploy and evaluate (``final.json``, ``best.json``)."""

    def render(self) -> str:
        """The context text an agent reads."""
        ...

    def save(self, path: str | Path) -> None: ...


class Trace(Protocol):
    """What the map made of one item (ACE: a generate/reflect chain; GEPA: one graded solve)."""

    @property
    def item_id(self) -> str: ...

    @property
    def sim_seconds(self) -> float:
        """The chain's duration: its calls run one after another."""
        ...

    @property
    def reward(self) -> float | None:
        """The score of the item's first attempt in this step (None: it made none here)."""
        ...

    def call_outcomes(self) -> list[tuple[Usage, CallError | None]]:
        """``(usage, error)`` of every LLM call the chain made, in the order it made them."""
        ...

    def errors(self) -> list[tuple[str, CallError]]:
        """``(what, error)`` of every failed call."""
        ...


@runtime_checkable
class EpisodeTrace(Trace, Protocol):
    """A trace whose attempts were agent episodes (ACE's chain on a task with an environment)."""

    def episodes(self) -> list[Trajectory]:
        """The episodes of this trace's attempts, in order."""
        ...


class ChangeReport(Protocol):
    """What one apply changed."""

    @property
    def added_ids(self) -> Sequence[Any]: ...

    @property
    def rejected(self) -> Sequence[Any]: ...

    @property
    def evicted(self) -> Sequence[Any]: ...


class Proposer(Protocol[R, E]):
    """Edits from records, and merged proposals: the calls the shuffle's groups and the reduce
    tree make (:mod:`combee_fast.combee.reduce`). Calls never raise for a bad endpoint or reply:
    failures are recorded on the :class:`~combee_fast.schema.Proposal` they return."""

    def insight(self, record: R) -> str:
        """The one-line lesson of ``record``: what retention checks for in the artifact."""
        ...

    async def propose(
        self, records: Sequence[R], artifact: Any, text: str, *, source: str, seed_path: tuple[int | str, ...]
    ) -> Proposal[E]:
        """One proposer call over ``records`` against ``artifact`` (rendered as ``text``)."""
        ...

    async def merge(
        self, proposals: Sequence[Sequence[E]], text: str, *, source: str, seed_path: tuple[int | str, ...]
    ) -> Proposal[E]:
        """One merge call over proposals made against the same base artifact."""
        ...

    def edit_text(self, edit: E) -> str:
        """The text of one edit (for the topic split of the reduce)."""
        ...

    def edit_target(self, edit: E) -> str | None:
        """What one edit changes, when it names an existing part (edits of one part merge together)."""
        ...


class Learner(Proposer[R, E], Protocol[A, R, E]):
    """The learner-specific half of a step; the methods and the Combee mechanisms call it and
    nothing else. A *trace* is what the map made of one item; a *record* is what a proposer reads
    of one trace; *edits* are what a proposal holds."""

    async def render(self, artifact: A) -> str:
        """The artifact's context text, as every call of a step sees it (off the event loop)."""
        ...

    async def run_item(self, item: Any, artifact: A, text: str, *, epoch: int, rounds: int) -> Trace:
        """The map for one item against the frozen snapshot: its trace, ``rounds`` retries at most."""
        ...

    def continuation(self, trace: Any, artifact: A, text: str, *, epoch: int) -> Awaitable[Trace] | None:
        """The rest of a chain still retrying after its step's rounds (None: nothing left to do)."""
        ...

    def record(self, trace: Any) -> R | None:
        """What a proposer reads of ``trace`` (ACE: its last usable reflection), or None."""
        ...

    async def apply(self, artifact: A, traces: Sequence[Any], edits: Sequence[E], source: str) -> Applied[A]:
        """Everything the traces and edits say, as one change applied once (off the event loop)."""
        ...


class Method(Protocol[A]):
    """One learning step over a batch, from one artifact version to the next.

    ``name`` is what ledgers and summaries call it. ``batches_span_epochs``: a batch may run on
    from the end of one epoch into the next (GEPA's minibatches); otherwise an epoch ends with a
    shorter batch. Work the method carries from a step into the next (ACE's chains still
    retrying) is counted by :meth:`pending`, kept by a checkpoint through :meth:`carried` and
    taken up again by :meth:`resume`.
    """

    name: str
    batches_span_epochs: bool

    async def start(self, artifact: A) -> StepResult[A] | None:
        """The work before the first batch (GEPA grades its seed on validation); None: none."""
        ...

    async def step(
        self, items: Sequence[Any], artifact: A, *, epoch: int, step: int, shape: StepShape | None = None
    ) -> StepResult[A]:
        """Learn from ``items`` (examples, or rollouts for reflect-only tasks) starting at
        ``artifact``; ``shape`` (from the batch plan) overrides the method's shape for this step."""
        ...

    def pending(self) -> int:
        """Chains carried into the next step; a step with no items curates them."""
        ...

    def carried(self) -> Any:
        """What a checkpoint keeps of the carried work (None: nothing is carried): a value of
        :meth:`carried_type`."""
        ...

    def carried_type(self, artifact_type: Any) -> Any:
        """The type of what :meth:`carried` returns, for artifacts of ``artifact_type`` (how a
        checkpoint decodes it: a msgspec-typed value, artifacts as ``artifact_type``)."""
        ...

    async def resume(self, carried: Any, items: Mapping[str, Any]) -> None:
        """Carry again what :meth:`carried` returned, its items looked up by id in ``items``."""
        ...


class BatchPlan(Protocol):
    """Chooses each step's batch size (and shape) and learns from what the step cost.

    ``state_type`` is the type of what :meth:`state` returns (msgspec-typed), which a checkpoint
    keeps and decodes as that type."""

    state_type: Any

    def next_size(self, remaining: int) -> tuple[int, str]:
        """The next batch size and the reason for it; ``remaining`` items wait in the epoch."""
        ...

    def step_shape(self) -> StepShape | None:
        """The shape of the step just sized (None: the method's configured shape)."""
        ...

    async def observe(self, batch_size: int, result: StepResult[Any], samples_in_epoch: int) -> None:
        """Learn from the step just run at ``batch_size``."""
        ...

    def state(self) -> Any:
        """What a checkpoint keeps of the plan (its fit, its decisions)."""
        ...

    def restore(self, state: Any) -> None:
        """Continue from what :meth:`state` returned."""
        ...


class StopRule(Protocol):
    """Why a run ends after the step that ``state`` holds.

    The loop asks its rules after every completed step (and once before the first): the first
    reason given ends the run cleanly there. A rule judging the run a failure (most calls failed)
    raises :class:`~combee_fast.errors.CallsFailed` or
    :class:`~combee_fast.errors.EndpointUnreachable` instead; such rules are asked after the
    others and see their reason in ``state.stopping``.
    """

    def check(self, state: TrainState[Any]) -> str | None: ...


class LearnerKind(Protocol[A, D]):
    """One learner, registered once by name in :data:`combee_fast.learners.LEARNERS`.

    ``methods`` maps each method it offers to the name ledgers and summaries show.
    ``rollout_role`` is the role whose calls are rollouts (ACE: generator); ``learning_roles``
    the roles whose replies become edits (a run stops when most of one role's calls fail).
    A kind may also say what ``len(artifact)`` counts in ``size_unit`` (ACE: bullets; GEPA:
    candidates), shown in progress lines and reports ("size" without it). A stop rule that ends
    the run when its work is done may tell what the run spends towards it with
    ``budget(items) -> run.progress.Budget`` (epochs: train samples; GEPA: metric calls), which the
    progress bar counts.
    """

    name: str
    methods: Mapping[str, str]
    rollout_role: str
    learning_roles: tuple[str, ...]
    size_unit: str
    """What ``len(artifact)`` counts (``bullets``, ``candidates``, ``lines``), in progress lines
    and reports."""
    artifact_type: type[A]
    """The artifact's class. A checkpoint stores the run's artifact and best one with
    :meth:`encode_artifact` and reads them back with :meth:`decode_artifact`; an artifact inside
    the carried work (typed as this class) likewise, unless msgspec encodes the class itself."""

    def encode_artifact(self, artifact: A) -> bytes:
        """``artifact`` as bytes that :meth:`decode_artifact` turns back into an equal artifact
        (version, every part, every counter: a resumed run goes on from it)."""
        ...

    def decode_artifact(self, data: bytes) -> A:
        """The artifact :meth:`encode_artifact` encoded; ``ValueError`` when ``data`` is not one."""
        ...

    def initial(self, config: SessionConfig) -> A:
        """The artifact a run starts from."""
        ...

    def batch_size(self, method: str, config: SessionConfig) -> int | None:
        """The fixed batch size of ``method`` (None: the batch-size controller plans it)."""
        ...

    def live_plan(self, method: str, config: SessionConfig, run_dir: RunDir | None) -> BatchPlan | None:
        """This learner's own live planner of ``method``'s batches, when they are planned (None:
        the generic one, :class:`~combee_fast.run.batch_plans.LivePlan`)."""
        ...

    def build_method(self, method: str, context: LearnContext) -> Method[A]:
        """The method ``method`` (one of :attr:`methods`) on this learner."""
        ...

    def stop_rules(self, config: SessionConfig) -> list[StopRule]:
        """The rules that end this learner's runs when their work is done (epochs, budgets)."""
        ...

    def deployable(self, artifact: A) -> D:
        """What ``final.json`` and ``best.json`` hold of ``artifact``, and what is evaluated."""
        ...

    def load(self, path: str | Path) -> D | None:
        """The deployable saved at ``path``, or None when the file is not this learner's."""
        ...

    async def evaluate(self, context: LearnContext, deployable: D, examples: Sequence[Example]) -> EvalResult:
        """``deployable`` scored on ``examples``, per example."""
        ...

    def version_files(self, artifact: A) -> list[tuple[str, bytes]]:
        """The run-directory files (relative path, bytes) of a new version of ``artifact``."""
        ...

    def load_version(self, root: Path, version: int, config: SessionConfig) -> D:
        """The deployable of version ``version``, read back from the files of the run in ``root``."""
        ...

    def lessons(self, artifact: A) -> list[str]:
        """The texts retention looks for in ``artifact`` (the insights it holds)."""
        ...

    def summary(self, artifact: A) -> dict[str, Any]:
        """What the run summary says about the learned artifact."""
        ...

    def online_learner(self, agents: Any) -> Learner[A, Any, Any]:
        """The learner of rollouts submitted online (reflect only); a ConfigError when this
        learner cannot learn online."""
        ...


@runtime_checkable
class Environment(Protocol):
    """Where an agent acts in one episode. The executor owns its life: a fresh one per episode
    (from its factory), :meth:`reset` first, :meth:`step` per action (each within the step's
    wall-clock limit), :meth:`check` once at the end, :meth:`close` always, whatever happened."""

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
        """The reward in [0, 1] of the final state, and the checker's feedback."""
        ...

    async def close(self) -> None: ...


@runtime_checkable
class EnvironmentTask(Protocol):
    """A :class:`Task` whose examples are solved by acting in an environment."""

    def environment(self, sandboxes: Sandboxes) -> Environment:
        """A fresh environment, whose commands run in ``sandboxes``."""
        ...


class AgentEpisode(Protocol):
    """What an :class:`Agent` gets for one episode, from the engine. ``task``: the example;
    ``context``: the frozen context text (ACE: the playbook) of the version being learned;
    ``seed``: the episode's node of the seed tree; ``previous_answer`` and ``reflection``: on a
    retry round, the last attempt's answer and the reflection on it; ``tools`` and
    ``observation``: the environment's tools and first observation (none: empty);
    ``steps_left``: model turns left.

    Every :meth:`chat` is one model call of the generator role through the engine's client (so it
    is accounted like every call) and opens a step of the trajectory; :meth:`act` is one
    environment step, recorded on the current step; :meth:`reject` marks the current step's
    reply unusable (kept with its raw text); :meth:`finish` gives the answer and ends the episode.
    """

    task: Example
    context: str
    seed: int
    round: int
    previous_answer: str | None
    reflection: str | None
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

    def finish(self, answer: str | None, *, bullet_ids: Sequence[str] = ()) -> None: ...


class Agent(Protocol):
    """Acts in one episode (see :class:`AgentEpisode`). Returning without :meth:`AgentEpisode.finish`
    ends the episode unfinished (its final state is still checked). An exception it raises
    fails the episode (``agent_error``) and never stops the run."""

    async def run(self, episode: AgentEpisode) -> None: ...


class Attempts(Protocol):
    """How a learner gets one attempt at an example against a context version: the one-step case
    is one generator call (:meth:`~combee_fast.roles.agents.Agents.attempt`); otherwise an agent
    episode run by a :class:`RolloutExecutor` (:class:`~combee_fast.rollouts.attempts.EpisodeAttempts`),
    whose rollout carries its trajectory. ``previous`` and ``reflection``: a retry round's last
    attempt and the reflection on it. Never raises for a failed call or episode."""

    async def attempt(self, example: Example, context: str, *, version: int, epoch: int | str, round_: int = 0,
                      previous: Rollout | None = None, reflection: Any = None) -> Rollout: ...


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


class EmbeddedLearner(Protocol):
    """An online learner inside a host (:mod:`combee_fast.embedded`): the host submits finished
    rollouts and reads the latest published version; nothing it calls blocks its event loop."""

    async def start(self) -> None: ...

    async def stop(self) -> None:
        """Apply everything submitted, settle every ticket, then stop."""
        ...

    async def submit(self, rollout: Rollout, *, version: int | None = None) -> asyncio.Future[Any]:
        """Queue ``rollout`` (waits only for room), stamped with ``version``, the context
        version it was produced with, when given; a future of the batch that applied it."""
        ...

    def context_for(self, key: str) -> Any:
        """The version and text the request keyed ``key`` runs with (the release gate's
        :class:`~combee_fast.embedded.release.Context`: sticky per key); never blocks."""
        ...

    @property
    def release(self) -> Any:
        """Which versions serve requests now (:class:`~combee_fast.embedded.release.Release`)."""
        ...

    async def approve(self, version: int) -> None:
        """Promote candidate ``version`` (a ReleaseError if it is not the candidate)."""
        ...

    async def reject(self, version: int) -> None:
        """Roll candidate ``version`` back (a ReleaseError if it is not the candidate)."""
        ...

    async def propose(self, artifact: Any) -> int:
        """Hand ``artifact`` to the release as the next version; its number."""
        ...

    @property
    def text(self) -> str:
        """The version in service (the incumbent), rendered."""
        ...

    @property
    def playbook(self) -> Any:
        """The version in service (the incumbent)."""
        ...

    @property
    def batches(self) -> Sequence[Any]:
        """The latest applied batches (bounded)."""
        ...

    def usage_totals(self) -> dict[tuple[str, str, str], Any]:
        """Usage of the learner's own clients, keyed by (role, model, endpoint)."""
        ...
