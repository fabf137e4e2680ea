"""The learner seam: what is learned, and by whom (a learner is its package plus one line in
:mod:`combee_fast.learners`, or a plugin's entry point or ``module:object`` path).

- :class:`Artifact`: what the run loop carries from step to step (ACE: a playbook; GEPA: its
  candidate pool): a version number and a size.
- :class:`Releasable`: an artifact an online learner learns and the release gate serves: it
  renders its context text and can be renumbered.
- :class:`Deployable`: the form users deploy (``final.json``): its context text, saved to a file.
- :class:`Trace`: what the map made of one item; the ledger and the batch plans read only this
  (and, of an :class:`EpisodeTrace`, its agent episodes).
- :class:`Proposer`: proposes edits from records and merges proposals (the calls the shuffle
  and the reduce tree make); :class:`Learner` adds the map and the apply.
- :class:`OnlineLearning`: a learner of rollouts submitted online (reflect only): its one-step
  attempt and how its artifact travels as bytes (what :meth:`LearnerKind.online_learner` gives).
- :class:`ChangeReport`: what one apply changed (the ledger's added, rejected, evicted).
- :class:`LearnerKind`: one learner as its package writes it (name, roles, artifact type, first
  artifact, methods, evaluation, deployable files); :class:`CompleteKind`: the same completed
  with every optional member (:mod:`combee_fast.kinds` holds their defaults), what the core reads.
- :class:`LearnContext`: what a kind builds its methods and its evaluation from (one session's
  pieces), the value the session passes to :meth:`LearnerKind.build_method` and
  :meth:`LearnerKind.evaluate`.

Value types: :class:`~combee_fast.roles.spec.Role`, :class:`~combee_fast.schema.Proposal`,
:class:`~combee_fast.methods.base.Applied`, :class:`~combee_fast.methods.base.EvalResult`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar, runtime_checkable

if TYPE_CHECKING:
    from pathlib import Path

    from combee_fast.config import SessionConfig
    from combee_fast.methods.base import Applied, EvalResult
    from combee_fast.protocols.flags import Flag
    from combee_fast.protocols.rollouts import Attempts
    from combee_fast.protocols.running import BatchPlan, DecisionLog, Method, StopRule
    from combee_fast.protocols.tasks import Task
    from combee_fast.roles.calls import RoleCalls
    from combee_fast.roles.spec import Role
    from combee_fast.schema import CallError, Example, Proposal, Trajectory, Usage
    from combee_fast.sim.responders import RoleResponder

A = TypeVar("A")  # an artifact
D = TypeVar("D")  # a deployable artifact (what final.json holds)
R = TypeVar("R")  # a record: what a proposer reads of one trace
R_in = TypeVar("R_in", contravariant=True)  # a record, as a proposer only reads it
E = TypeVar("E")  # an edit


class Artifact(Protocol):
    """What is learned, as the run loop sees it: immutable, numbered, sized."""

    @property
    def version(self) -> int:
        """Increases with every change applied to it."""
        ...

    def __len__(self) -> int:
        """Its size (ACE: bullets; GEPA: candidates in the pool)."""
        ...

class Releasable(Artifact, Protocol):
    """What an online learner learns and its release gate serves
    (:mod:`combee_fast.embedded.release`): ACE's playbook, TextGrad's prompt variable, the
    embedded GEPA learner's numbered candidate. Version numbers are the gate's: never reused,
    so a version learned on an older one after a rollback is renumbered past every number given."""

    def render(self) -> str:
        """The context text a request runs with."""
        ...

    def renumbered(self, version: int) -> Self:
        """The same artifact numbered ``version`` (never lower than its own: ``ValueError``)."""
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

class Proposer(Protocol[R_in, E]):
    """Edits from records, and merged proposals: the calls the shuffle's groups and the reduce
    tree make (:mod:`combee_fast.combee.reduce`). Calls never raise for a bad endpoint or reply:
    failures are recorded on the :class:`~combee_fast.schema.Proposal` they return."""

    def insight(self, record: R_in) -> str:
        """The one-line lesson of ``record``: what retention checks for in the artifact."""
        ...

    async def propose(
        self, records: Sequence[R_in], artifact: Any, text: str, *, source: str, seed_path: tuple[int | str, ...]
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

class OnlineLearning(Learner[A, R, E], Protocol[A, R, E]):
    """A learner of rollouts submitted online (:mod:`combee_fast.embedded`), what
    :meth:`LearnerKind.online_learner` gives: its map reads each submitted, already-scored
    rollout and never generates again; its artifact is :class:`Releasable`.

    ``attempts`` is its one-step attempt (one call of its serving role, scored by the task):
    what a ``shadow`` release re-runs a task with under the candidate's context, and what a host
    may serve with. :meth:`encode_artifact`/:meth:`decode_artifact` carry its artifact as bytes
    (a process learner's frames)."""

    attempts: Attempts

    def encode_artifact(self, artifact: A) -> bytes: ...

    def decode_artifact(self, data: bytes) -> A:
        """The artifact :meth:`encode_artifact` encoded; ``ValueError`` when ``data`` is not one."""
        ...

@dataclass(frozen=True)
class LearnContext:
    """A session's configuration, task, role calls (``calls``, for the learner's declared roles;
    their clients in ``calls.clients``) and validation examples. ``from_traces``: the train items
    are collected rollouts (the map only reflects). ``attempts``: how an attempt at an example is
    made as an agent episode (None: the learner's own one-step attempt, one model call)."""

    config: SessionConfig
    task: Task
    calls: RoleCalls
    val_examples: tuple[Example, ...]
    from_traces: bool = False
    attempts: Attempts | None = None


class LearnerKind(Protocol[A, D]):
    """One learner as its package writes it: the seven members every learner has. Registered by
    name in :data:`combee_fast.learners.LEARNERS` (built in), by an entry point of group
    ``combee_fast.learners``, or named by a ``package.module:object`` path (:mod:`combee_fast.plugins`).

    The registry completes it (:class:`~combee_fast.kinds.Kind`) with the members of
    :class:`CompleteKind` it does not have, each default defined in :mod:`combee_fast.kinds`
    (its methods ``sequential``, ``naive``, ``combee`` shown as ``<name>``, ``naive-<name>``,
    ``combee-<name>``; the first ``serve`` role's calls are the rollouts; ...). The core reads only
    the completed kind.
    """

    name: str
    roles: tuple[Role, ...]
    """Every role it calls (:class:`~combee_fast.roles.spec.Role`: name, pool, sampling defaults,
    prompt files), which the session opens clients for and the ledger keeps apart."""
    artifact_type: type[A]
    """The artifact's class. A checkpoint stores the run's artifact and best one with
    :meth:`CompleteKind.encode_artifact` and reads them back with :meth:`CompleteKind.decode_artifact`;
    an artifact inside the carried work (typed as this class) likewise, unless msgspec encodes the
    class itself."""

    def initial(self, config: SessionConfig) -> A:
        """The artifact a run starts from."""
        ...

    def build_method(self, method: str, context: LearnContext) -> Method[A]:
        """The method ``method`` (one of :attr:`CompleteKind.methods`) on this learner."""
        ...

    async def evaluate(self, context: LearnContext, deployable: D, examples: Sequence[Example]) -> EvalResult:
        """``deployable`` scored on ``examples``, per example."""
        ...

    def load(self, path: str | Path) -> D | None:
        """The deployable saved at ``path``, or None when the file is not this learner's."""
        ...

class CompleteKind(LearnerKind[A, D], Protocol[A, D]):
    """A registered learner with every member the core reads: a :class:`LearnerKind` completed by
    :class:`~combee_fast.kinds.Kind` (which says each member's default).

    ``key`` is the name a configuration gives to find it again (``ace``, an entry point's name, a
    ``package.module:object`` path); ``methods`` maps each method it offers to the name ledgers
    and summaries show. ``rollout_role`` is the role whose calls are rollouts (ACE: generator);
    ``learning_roles`` the roles whose replies become edits (a run stops when most of one role's
    calls fail). ``size_unit`` says what ``len(artifact)`` counts (ACE: bullets; GEPA:
    candidates), in progress lines and reports. ``responders``: how the simulated endpoint answers
    its roles, by request role name (:data:`~combee_fast.sim.responders.RoleResponder`; the
    built-in learners' make the role table of the simulated worlds, :func:`combee_fast.learners.role_table`).
    """

    key: str
    methods: Mapping[str, str]
    citable: bool
    """Whether its context has parts an agent may cite when it finishes (ACE's bullets)."""
    rollout_role: str
    learning_roles: tuple[str, ...]
    size_unit: str
    responders: Mapping[str, RoleResponder]
    settings: type[Any] | None
    """Its own settings (a msgspec Struct type; None: none): a configuration's ``learners.<name>``
    section decoded as it (:meth:`~combee_fast.config.SessionConfig.learner_settings`)."""
    flags: tuple[Flag, ...]
    """Its own ``combee learn`` flags, each setting a path inside its section."""

    def encode_artifact(self, artifact: A) -> bytes:
        """``artifact`` as bytes that :meth:`decode_artifact` turns back into an equal artifact
        (version, every part, every counter: a resumed run goes on from it)."""
        ...

    def decode_artifact(self, data: bytes) -> A:
        """The artifact :meth:`encode_artifact` encoded; ``ValueError`` when ``data`` is not one."""
        ...

    def batch_size(self, method: str, config: SessionConfig) -> int | None:
        """The fixed batch size of ``method`` (None: the batch-size controller plans it)."""
        ...

    def live_plan(self, method: str, config: SessionConfig, run_dir: DecisionLog | None) -> BatchPlan | None:
        """This learner's own live planner of ``method``'s batches, when they are planned (None:
        the generic one, :class:`~combee_fast.run.batch_plans.LivePlan`), appending its decisions
        to ``run_dir`` (None: kept nowhere)."""
        ...

    def stop_rules(self, config: SessionConfig) -> list[StopRule]:
        """The rules that end this learner's runs when their work is done (epochs, budgets)."""
        ...

    def deployable(self, artifact: A) -> D:
        """What ``final.json`` and ``best.json`` hold of ``artifact``, and what is evaluated."""
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

    def improvements(self, report: Any) -> tuple[int, int]:
        """``(explored, accepted)``: the candidates one apply's report (a :class:`ChangeReport`)
        judged and those it kept, as this learner defines a candidate
        (:mod:`combee_fast.money.improvements`)."""
        ...

    def online_learner(self, calls: RoleCalls) -> OnlineLearning[Any, Any, Any]:
        """The learner of rollouts submitted online (reflect only) on ``calls`` (which serve
        every role of :attr:`roles`); a ConfigError when this learner cannot learn online."""
        ...
