"""GEPA learning online (:mod:`combee_fast.embedded`): :class:`GepaOnline`, the
:class:`~combee_fast.protocols.OnlineLearning` :meth:`GepaKind.online_learner
<combee_fast.gepa.kind.GepaKind.online_learner>` gives.

What it learns is :class:`OnlineCandidate`: a :class:`~combee_fast.gepa.candidate.Candidate` and
its version number (the release gate's; a candidate learned offline, ``final.json``, starts one).
It rewrites one component, the candidate's first by name (a single-prompt candidate's system
prompt). No validation set and no Pareto pool: whether a rewrite serves is the release gate's
decision, on the rewards of the requests it serves.

- map: each submitted rollout is one row of GEPA's reflective dataset as it stands (question,
  answer, the host's score and feedback: a :class:`~combee_fast.schema.GradedAnswer`), never
  solved again; no call. A rollout without a score teaches nothing. A rollout whose call failed
  stays a row (no answer), as a failed solve does in GEPA's minibatch.
- propose: one reflection call (GEPA's proposer) over a shuffled group of rows; merge: one
  aggregation call over rewrites made from the same text; the reduce tree merges the groups'
  rewrites (:class:`~combee_fast.gepa.learner.GepaProposer`, as Combee-GEPA does).
- apply: the merged rewrite as the next version. When several are left (a failed aggregation
  falls back to all it was given; a reduce split by size merges each part apart), the first,
  with each other's line changes rebased onto it (:func:`~combee_fast.gepa.revisions.rebase`:
  their lines kept word for word, no call). No rewrite, or one that changes nothing, leaves the
  version as it is.
- its one-step attempt (:class:`SolverAttempts`): one solve under the context, seeded by the
  request (epoch, round and example), scored by the task.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence

import msgspec

from combee_fast.engine.kept import StructArtifact
from combee_fast.errors import ConfigError
from combee_fast.gepa.calls import GepaCalls, solver_messages
from combee_fast.gepa.candidate import Candidate
from combee_fast.gepa.learner import ComponentText, GepaProposer
from combee_fast.gepa.revisions import changes, rebase
from combee_fast.methods.base import Applied
from combee_fast.roles.calls import RoleCalls
from combee_fast.schema import CallError, Example, GradedAnswer, Proposal, Rollout, Usage


class OnlineCandidate(msgspec.Struct, frozen=True):
    """A candidate and its version (a :class:`~combee_fast.protocols.Releasable`); ``len()``
    counts the non-blank lines of its text. A learned candidate's ``parents`` name the version
    it was rewritten from (there is no pool to index)."""

    candidate: Candidate
    version: int = 0

    @classmethod
    def seed(cls) -> OnlineCandidate:
        """GEPA's seed instruction, version 0."""
        return cls(Candidate.seed())

    @property
    def component(self) -> str:
        """The component learning rewrites: the first by name."""
        return self.candidate.names()[0]

    def render(self) -> str:
        return self.candidate.render()

    def renumbered(self, version: int) -> OnlineCandidate:
        """The same candidate numbered ``version``, not below this one's (``ValueError``)."""
        if version < self.version:
            raise ValueError(f"a candidate cannot be renumbered down, from version {self.version} to {version}")
        return self if version == self.version else msgspec.structs.replace(self, version=version)

    def __len__(self) -> int:
        return sum(1 for line in self.render().splitlines() if line.strip())


class Submitted(msgspec.Struct, frozen=True):
    """The trace of one submitted rollout (a :class:`~combee_fast.protocols.Trace` of no call):
    its row of the reflective dataset, None when it has no score."""

    item_id: str
    row: GradedAnswer | None
    sim_seconds: float = 0.0

    @property
    def reward(self) -> float | None:
        return self.row.score if self.row is not None else None

    def call_outcomes(self) -> list[tuple[Usage, CallError | None]]:
        return []

    def errors(self) -> list[tuple[str, CallError]]:
        return []


class Rewrite(msgspec.Struct, frozen=True):
    """What one apply changed (a :class:`~combee_fast.protocols.ChangeReport`): the lines the
    rewrite added and the lines it dropped."""

    added_ids: tuple[str, ...] = ()
    rejected: tuple[str, ...] = ()
    evicted: tuple[str, ...] = ()


class SolverAttempts:
    """GEPA's one-step attempt (:class:`~combee_fast.protocols.Attempts`): one solve under the
    context, its own draw per request; a retry's ``previous`` and ``feedback`` are not read
    (GEPA learns by rewrites, not by retries)."""

    def __init__(self, calls: GepaCalls) -> None:
        self.calls = calls

    async def attempt(self, example: Example, context: str, *, version: int, epoch: int | str, round_: int = 0,
                      previous: Rollout | None = None, feedback: str | None = None) -> Rollout:
        graded = await self.calls.solve(example, context, seed_path=(epoch, round_))
        return Rollout(example=example, round=round_, messages=solver_messages(example, context), answer=graded.answer,
                       reasoning="", cited=(), score=graded.score, feedback=graded.feedback, usage=graded.usage,
                       error=graded.error)


class GepaOnline(StructArtifact):
    """GEPA's learner of submitted rollouts on the role calls ``calls``, whose task scores its
    attempts (module docstring). Its artifact travels as MessagePack."""

    artifact_type = OnlineCandidate

    def __init__(self, calls: RoleCalls) -> None:
        if calls.task is None:
            raise ConfigError("learner gepa learns online through calls that grade its attempts: "
                              "its role calls need a task")
        self.calls = GepaCalls(calls.task, calls)
        self.attempts = SolverAttempts(self.calls)

    async def render(self, artifact: OnlineCandidate) -> str:
        """The text of the component learning rewrites (what every proposal of a step reads)."""
        return artifact.candidate.components[artifact.component]

    async def run_item(self, item: Rollout, artifact: OnlineCandidate, text: str, *, epoch: int,
                       rounds: int) -> Submitted:
        if item.score is None:
            return Submitted(item.id, None)
        return Submitted(item.id, GradedAnswer(item.example, item.answer, item.score, item.feedback, item.usage,
                                               item.error))

    def continuation(self, trace: Submitted, artifact: OnlineCandidate, text: str, *,
                     epoch: int) -> Awaitable[Submitted] | None:
        return None

    def record(self, trace: Submitted) -> GradedAnswer | None:
        return trace.row

    def insight(self, record: GradedAnswer) -> str:
        return record.feedback

    async def propose(self, records: Sequence[GradedAnswer], artifact: OnlineCandidate, text: str, *, source: str,
                      seed_path: tuple[int | str, ...]) -> Proposal[ComponentText]:
        """One reflection call over ``records``: a rewrite of ``text``."""
        return await GepaProposer(self.calls, artifact.component).propose(records, artifact, text, source=source,
                                                                          seed_path=seed_path)

    async def merge(self, proposals: Sequence[Sequence[ComponentText]], text: str, *, source: str,
                    seed_path: tuple[int | str, ...]) -> Proposal[ComponentText]:
        """One aggregation call over the rewrites of ``text`` in ``proposals`` (of one component)."""
        component = next(edit.component for edits in proposals for edit in edits)
        return await GepaProposer(self.calls, component).merge(proposals, text, source=source, seed_path=seed_path)

    def edit_text(self, edit: ComponentText) -> str:
        return edit.text

    def edit_target(self, edit: ComponentText) -> str | None:
        return edit.component

    async def apply(self, artifact: OnlineCandidate, traces: Sequence[Submitted], edits: Sequence[ComponentText],
                    source: str) -> Applied[OnlineCandidate]:
        """The rewrites of the learned component, merged, as the next version (module docstring)."""
        name = artifact.component
        current = artifact.candidate.components[name]
        rewrites = [edit.text for edit in edits if edit.component == name]
        new = rewrites[0] if rewrites else current
        for other in rewrites[1:]:
            new = rebase(current, other, new)
        if new == current:
            return Applied(artifact, Rewrite(), (), ())
        change = changes(current, new, 1)
        lines = current.split("\n")
        report = Rewrite(tuple(line for _, line in change.added), evicted=tuple(lines[i - 1] for i in change.removed))
        candidate = artifact.candidate.replaced(name, new, parent=artifact.version)
        return Applied(OnlineCandidate(candidate, artifact.version + 1), report, report.added_ids, ())
