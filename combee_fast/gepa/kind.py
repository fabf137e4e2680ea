"""GEPA registered as a learner (:class:`~combee_fast.protocols.LearnerKind`): its methods, its
pool, its deployable candidate and how that is scored.

Methods: ``sequential`` (shown as ``gepa``: serial GEPA, ``gepa.minibatch`` examples, one
reflection call), ``naive`` (``naive-gepa``: one reflection call over ``gepa.combee_minibatch``
examples) and ``combee`` (``combee-gepa``: ``gepa.combee_minibatch`` examples, Combee's parallel
reflection and aggregation tree). Candidate selection, acceptance and the budget are the same
for all (:mod:`.iteration`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from combee_fast.config import SessionConfig
from combee_fast.errors import ConfigError
from combee_fast.gepa.calls import AGGREGATOR_ROLE, PROPOSER_ROLE, SOLVER_ROLE, GepaCalls
from combee_fast.gepa.candidate import Candidate, is_candidate_file
from combee_fast.gepa.iteration import GepaIteration, grade
from combee_fast.gepa.pool import GepaState
from combee_fast.gepa.reflection import CombeeReflection, Reflection, SerialReflection
from combee_fast.gepa.stops import MetricCallBudget
from combee_fast.methods.base import EvalResult
from combee_fast.protocols import Learner, StopRule
from combee_fast.run.context import LearnContext
from combee_fast.run.stops import EpochsDone
from combee_fast.schema import Example


class GepaKind:
    """The GEPA learner: what it learns is a :class:`~combee_fast.gepa.pool.GepaState`, what it
    deploys a :class:`~combee_fast.gepa.candidate.Candidate`."""

    name = "gepa"
    methods = {"sequential": "gepa", "naive": "naive-gepa", "combee": "combee-gepa"}
    rollout_role = SOLVER_ROLE
    learning_roles = (PROPOSER_ROLE, AGGREGATOR_ROLE)
    size_unit = "candidates"  # what the artifact's size counts, in progress lines and reports
    artifact_type = GepaState

    def encode_artifact(self, artifact: GepaState) -> bytes:
        return msgspec.msgpack.encode(artifact)

    def decode_artifact(self, data: bytes) -> GepaState:
        return msgspec.msgpack.decode(data, type=GepaState)

    def initial(self, config: SessionConfig) -> GepaState:
        return GepaState(seed=Candidate.seed())

    def batch_size(self, method: str, config: SessionConfig) -> int:
        return config.gepa.minibatch if method == "sequential" else config.gepa.combee_minibatch

    def build_method(self, method: str, context: LearnContext) -> GepaIteration:
        if context.from_traces:
            raise ConfigError("learner gepa grades its own answers; it cannot learn from collected traces")
        config = context.config
        reflection: Reflection = (CombeeReflection(config.combee, seed=config.seed) if method == "combee"
                                  else SerialReflection())
        calls = GepaCalls(context.task, context.agents.clients, seed=config.seed, note=context.agents.note_call)
        return GepaIteration(self.methods[method], calls, reflection, context.val_examples, config=config.gepa,
                             seed=config.seed, workers=config.map.workers)

    def stop_rules(self, config: SessionConfig) -> list[StopRule]:
        rules: list[StopRule] = [MetricCallBudget(config.gepa.max_metric_calls)]
        if config.gepa.max_epochs is not None:
            rules.append(EpochsDone(config.gepa.max_epochs))
        return rules

    def deployable(self, artifact: GepaState) -> Candidate:
        return artifact.best()

    def load(self, path: str | Path) -> Candidate | None:
        return Candidate.load(path) if is_candidate_file(path) else None

    async def evaluate(self, context: LearnContext, deployable: Candidate, examples: Sequence[Example]) -> EvalResult:
        """``deployable``'s solves of ``examples`` (seeded as in the search), over the answered ones."""
        graded = await grade(GepaCalls(context.task, context.agents.clients, seed=context.config.seed,
                                       note=context.agents.note_call), deployable,
                             examples, workers=context.config.eval.parallel)
        answered = [e.score for e in graded.evaluations if e.error is None]
        failed: dict[str, int] = {}
        for e in graded.evaluations:
            if e.error is not None:
                failed[e.error.label] = failed.get(e.error.label, 0) + 1
        return EvalResult(
            accuracy=sum(answered) / len(answered) if answered else 0.0, examples=len(graded.evaluations),
            answered=len(answered), unanswered=len(graded.evaluations) - len(answered),
            unanswered_by_kind=dict(sorted(failed.items())), sim_seconds=graded.sim_seconds,
            scores=tuple(e.score if e.error is None else 0.0 for e in graded.evaluations),
            outcomes=tuple((e.usage, e.error) for e in graded.evaluations),
        )

    def version_files(self, artifact: GepaState) -> list[tuple[str, bytes]]:
        """The candidate added (``candidates/c*.json``) and which candidate is best in this version
        (``pool/v*.json``)."""
        index = len(artifact.candidates) - 1
        best = msgspec.json.encode({"best": artifact.best_index()})
        return [(f"candidates/c{index:05d}.json", artifact.candidates[index].to_bytes()),
                (f"pool/v{artifact.version:05d}.json", best)]

    def load_version(self, root: Path, version: int, config: SessionConfig) -> Candidate:
        if not version:
            return self.initial(config).best()
        best = msgspec.json.decode((root / f"pool/v{version:05d}.json").read_bytes(), type=dict[str, int])["best"]
        return Candidate.load(root / f"candidates/c{best:05d}.json")

    def lessons(self, artifact: GepaState) -> list[str]:
        return [line for line in artifact.best().render().splitlines() if line.strip()]

    def summary(self, artifact: GepaState) -> dict[str, Any]:
        return {"metric_calls": artifact.metric_calls, "candidates": len(artifact.candidates),
                "accepted": max(0, len(artifact.candidates) - 1), "instruction_chars": len(artifact.best().render())}

    def online_learner(self, agents: Any) -> Learner[Any, Any, Any]:
        raise ConfigError("learner gepa cannot learn online from submitted rollouts; use learner ace")


GEPA = GepaKind()
"""The registered GEPA learner."""
