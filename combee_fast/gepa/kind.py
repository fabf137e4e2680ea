"""GEPA registered as a learner (:class:`~combee_fast.protocols.LearnerKind`): its methods, its
pool, its deployable candidate and how that is scored.

Methods: ``sequential`` (shown as ``gepa``: serial GEPA, ``gepa.minibatch`` examples, one
reflection call), ``naive`` (``naive-gepa``: one reflection call over ``gepa.combee_minibatch``
examples), ``combee`` (``combee-gepa``: ``gepa.combee_minibatch`` examples, Combee's parallel
reflection and aggregation tree) and ``async`` (``async-gepa``: Combee-GEPA with its stages
decoupled, several proposals in flight, :mod:`.pipeline`). Candidate selection and acceptance
are the same for all (:mod:`.iteration`); ``async-gepa`` reserves its budget at dispatch. On a
task solved by acting, every solve is an agent episode whose instructions are the candidate
(:class:`~combee_fast.gepa.calls.GepaCalls`).

Its settings are :class:`~combee_fast.gepa.settings.GepaConfig` (a configuration's
``learners.gepa`` section, read by :func:`~combee_fast.gepa.settings.settings`; its flags
:data:`~combee_fast.gepa.settings.FLAGS`); its roles are answered on the simulated endpoint by
:mod:`~combee_fast.gepa.sim`. The batched methods' minibatch is
``gepa.combee_minibatch``; ``"auto"`` there, or ``train.batch_size = "auto"`` (``--batch-size
auto``), hands it to the live planner. Members it leaves out take their defaults (:mod:`combee_fast.kinds`: its artifact encoded as MessagePack, its
lessons the best candidate's lines, no online learning).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from combee_fast.config import SessionConfig
from combee_fast.errors import ConfigError
from combee_fast.gepa.calls import ROLES, GepaCalls
from combee_fast.gepa.candidate import Candidate, is_candidate_file
from combee_fast.gepa.iteration import GepaIteration, grade
from combee_fast.gepa.online import GepaOnline
from combee_fast.gepa.pipeline import AsyncGepa
from combee_fast.gepa.planner import GepaPlan, GepaPlanner
from combee_fast.gepa.pool import GepaState, PoolChange
from combee_fast.gepa.reflection import CombeeReflection, Reflection, SerialReflection
from combee_fast.gepa.sim import RESPONDERS
from combee_fast.gepa.settings import FLAGS, GepaConfig
from combee_fast.gepa.settings import settings as own
from combee_fast.gepa.stages import StageWork
from combee_fast.gepa.stops import MetricCallBudget
from combee_fast.methods.base import EvalResult, Prediction
from combee_fast.protocols.learning import LearnContext
from combee_fast.protocols.running import StopRule
from combee_fast.record.rundir import RunDir
from combee_fast.roles.calls import RoleCalls
from combee_fast.run.stops import EpochsDone
from combee_fast.schema import Example


PROPOSED = frozenset({"accepted", "rejected", "stale"})
"""The outcomes of an iteration that proposed a child candidate (:class:`~combee_fast.gepa.pool.PoolChange`)."""


def check_budget_pays_one_step(config: SessionConfig, validation: int, minibatch: int | None) -> None:
    """:class:`ConfigError` (one line), before any metric call, when ``gepa.max_metric_calls``
    cannot pay for one step of learning: the seed candidate's grading on the ``validation``
    examples, counted first, then one iteration's least, its parent and its child each graded on
    a minibatch (``minibatch``; None, planned: at least one example)."""
    least = 2 * (minibatch or 1)
    limit = own(config).max_metric_calls
    if limit >= validation + least:
        return
    name = config.task.val_split.split("[")[0]
    raise ConfigError(
        f"--max-metric-calls {limit:,} cannot pay for one GEPA step: grading the seed candidate on the validation "
        f"split {config.task.val_split!r} takes {validation:,} metric calls and one iteration at least {least:,} more "
        f"(the parent and its child on a minibatch of {minibatch or 1}); give at least {validation + least:,}, or "
        f"validate on fewer examples (e.g. --val-split '{name}[0:50]')")


class GepaKind:
    """The GEPA learner: what it learns is a :class:`~combee_fast.gepa.pool.GepaState`, what it
    deploys a :class:`~combee_fast.gepa.candidate.Candidate`."""

    name = "gepa"
    methods = {"sequential": "gepa", "naive": "naive-gepa", "combee": "combee-gepa", "async": "async-gepa"}
    roles = ROLES
    size_unit = "candidates"  # what the artifact's size counts, in progress lines and reports
    artifact_type = GepaState
    responders = RESPONDERS  # how the simulated endpoint answers its roles
    settings = GepaConfig  # its section, learners.gepa (the [gepa] table of older files)
    flags = FLAGS

    def initial(self, config: SessionConfig) -> GepaState:
        return GepaState(seed=Candidate.seed())

    def batch_size(self, method: str, config: SessionConfig) -> int | None:
        """Serial GEPA's fixed minibatch; the batched methods' ``gepa.combee_minibatch``, None
        (the planner) when it or ``train.batch_size`` is ``"auto"``."""
        settings = own(config)
        if method == "sequential":
            return settings.minibatch
        minibatch = settings.combee_minibatch  # "auto" is read as None
        return minibatch if config.train.batch_size is not None and isinstance(minibatch, int) else None

    def live_plan(self, method: str, config: SessionConfig, run_dir: RunDir | None) -> GepaPlan:
        """GEPA's own planner (:mod:`.planner`): minibatch, reflection groups and, for
        ``async-gepa``, proposals in flight."""
        ceiling = own(config).pipeline.proposals if method == "async" else 1
        return GepaPlan(GepaPlanner(config.controller, config.combee, in_flight_ceiling=ceiling), run_dir)

    def build_method(self, method: str, context: LearnContext) -> GepaIteration | AsyncGepa:
        if context.from_traces:
            raise ConfigError("learner gepa grades its own answers; it cannot learn from collected traces")
        config = context.config
        settings = own(config)
        check_budget_pays_one_step(config, len(context.val_examples), self.batch_size(method, config))
        combee = method == "combee" or (method == "async" and settings.pipeline.reflection == "combee")
        reflection: Reflection = CombeeReflection(config.combee, seed=config.seed) if combee else SerialReflection()
        calls = self.calls(context)
        if method == "async":
            work = StageWork(calls, reflection, context.val_examples, workers=config.map.workers,
                             skip_perfect=settings.skip_perfect)
            return AsyncGepa(self.methods[method], calls, work, config=settings, seed=config.seed)
        return GepaIteration(self.methods[method], calls, reflection, context.val_examples, config=settings,
                             seed=config.seed, workers=config.map.workers)

    def calls(self, context: LearnContext) -> GepaCalls:
        """The role calls a run's search and evaluation grade and reflect with: the task's
        solves (or agent episodes) and the proposer's and aggregator's calls."""
        return GepaCalls(context.task, context.calls, context.attempts)

    def stop_rules(self, config: SessionConfig) -> list[StopRule]:
        settings = own(config)
        rules: list[StopRule] = [MetricCallBudget(settings.max_metric_calls)]
        if settings.max_epochs is not None:
            rules.append(EpochsDone(settings.max_epochs))
        return rules

    def deployable(self, artifact: GepaState) -> Candidate:
        return artifact.best()

    def load(self, path: str | Path) -> Candidate | None:
        return Candidate.load(path) if is_candidate_file(path) else None

    async def evaluate(self, context: LearnContext, deployable: Candidate, examples: Sequence[Example]) -> EvalResult:
        """``deployable``'s solves of ``examples`` (seeded as in the search), over the answered ones."""
        graded = await grade(self.calls(context), deployable, examples,
                             workers=context.config.eval.parallel)
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
            outcomes=tuple(outcome for e in graded.evaluations for outcome in e.call_outcomes()),
            predictions=tuple(Prediction.of(e.example, e.answer, e.score, e.feedback, e.error)
                              for e in graded.evaluations),
        )

    def version_files(self, artifact: GepaState) -> list[tuple[str, bytes]]:
        """Every candidate the latest step added (``candidates/c*.json``) and which candidate is
        best in each version it made (``pool/v*.json``)."""
        first = artifact.version - 1 if artifact.step_from is None else artifact.step_from
        files = []
        for version in range(first + 1, artifact.version + 1):
            best = msgspec.json.encode({"best": artifact.best_index(version)})
            files += [(f"candidates/c{version - 1:05d}.json", artifact.candidates[version - 1].to_bytes()),
                      (f"pool/v{version:05d}.json", best)]
        return files

    def load_version(self, root: Path, version: int, config: SessionConfig) -> Candidate:
        if not version:
            return self.initial(config).best()
        best = msgspec.json.decode((root / f"pool/v{version:05d}.json").read_bytes(), type=dict[str, int])["best"]
        return Candidate.load(root / f"candidates/c{best:05d}.json")

    def summary(self, artifact: GepaState) -> dict[str, Any]:
        return {"metric_calls": artifact.metric_calls, "candidates": len(artifact.candidates),
                "accepted": max(0, len(artifact.candidates) - 1), "instruction_chars": len(artifact.best().render())}

    def improvements(self, report: PoolChange) -> tuple[int, int]:
        """A child candidate proposed (accepted, rejected, or dropped as stale) is explored, one
        accepted into the pool accepted; the seed, a perfect parent and an empty reflection are neither."""
        return int(report.outcome in PROPOSED), int(report.outcome == "accepted")

    def online_learner(self, calls: RoleCalls) -> GepaOnline:
        """The learner of submitted rollouts: their rows reflected on and aggregated, never solved
        again; it learns an :class:`~combee_fast.gepa.online.OnlineCandidate`."""
        return GepaOnline(calls)


GEPA = GepaKind()
"""The registered GEPA learner."""
