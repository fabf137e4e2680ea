"""What GEPA learns, as the run loop carries it: the Pareto pool of candidates, immutable.

:class:`GepaState` holds every accepted candidate with its score on each validation instance
(and how many of those solves failed, by kind), how many iterations made it and how many metric
calls they spent. Its :attr:`~GepaState.version` is the number of candidates (the seed, once
graded, is version 1); what users deploy of it is the best candidate (:meth:`GepaState.best`).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from combee_fast.gepa.candidate import Candidate
from combee_fast.gepa.measure import ProposalMeasure
from combee_fast.gepa.pareto import ParetoPool
from combee_fast.methods.base import EvalResult
from combee_fast.schema import GradedAnswer


class GepaState(msgspec.Struct, frozen=True):
    """The pool (``candidates`` with per-instance validation ``scores``, ``failures`` by kind and
    ``seconds``: each solve's model seconds, which order the next validation of a candidate made
    from it, :func:`~combee_fast.gepa.iteration.grade`), the ``seed`` it grew from,
    ``iterations`` run and ``metric_calls`` spent. ``budget_closed``:
    the asynchronous search can start no further proposal within its budget (what is left is
    less than the smallest proposal's reservation). ``step_from``: the version the latest step
    started from, when that step may have added several candidates (None: one at most).
    ``closing``: the asynchronous search's closing merge (the candidates validation could not
    tell apart from the best, merged into one), when it joined scoring as well as they did: the
    best on ties (None: none)."""

    seed: Candidate
    candidates: tuple[Candidate, ...] = ()
    scores: tuple[tuple[float, ...], ...] = ()
    failures: tuple[dict[str, int], ...] = ()
    seconds: tuple[tuple[float, ...], ...] = ()
    iterations: int = 0
    metric_calls: int = 0
    budget_closed: bool = False
    step_from: int | None = None
    closing: int | None = None

    @property
    def version(self) -> int:
        return len(self.candidates)

    def __len__(self) -> int:
        return len(self.candidates)

    def pool(self) -> ParetoPool[Candidate]:
        """The candidates as a :class:`~combee_fast.gepa.pareto.ParetoPool` (to draw a parent)."""
        pool: ParetoPool[Candidate] = ParetoPool(len(self.scores[0]))
        for candidate, scores in zip(self.candidates, self.scores):
            pool.add(candidate, scores)
        return pool

    def best_index(self, version: int | None = None) -> int:
        """The candidate with the best mean validation score (on ties the closing merge, else the
        first), in this pool or in its version ``version`` (its first ``version`` candidates)."""
        means = [sum(scores) / len(scores) for scores in self.scores[:version]]
        best = max(means)
        if self.closing is not None and self.closing < len(means) and means[self.closing] == best:
            return self.closing
        return means.index(best)

    def tied_best(self) -> tuple[int, ...]:
        """Every candidate whose mean validation score equals the best's, in pool order."""
        means = [sum(scores) / len(scores) for scores in self.scores]
        best = max(means)
        return tuple(i for i, mean in enumerate(means) if mean == best)

    def best_since(self, version: int) -> int | None:
        """The best of the candidates that joined after pool version ``version`` (the first on
        ties); None when none did."""
        newer = range(version, len(self.scores))
        return max(newer, key=lambda i: (sum(self.scores[i]) / len(self.scores[i]), -i), default=None)

    def candidate(self, index: int) -> Candidate:
        """Candidate ``index``; the seed is candidate 0 already while its validation runs (the
        asynchronous search proposes on it meanwhile)."""
        return self.candidates[index] if self.candidates or index else self.seed

    def best(self) -> Candidate:
        """The best candidate (the seed before it was graded)."""
        return self.candidates[self.best_index()] if self.candidates else self.seed

    def with_candidate(self, candidate: Candidate, graded: Sequence[GradedAnswer]) -> GepaState:
        """This pool with ``candidate`` added, graded on the validation set by ``graded``."""
        failed: dict[str, int] = {}
        for evaluation in graded:
            if evaluation.error is not None:
                failed[evaluation.error.label] = failed.get(evaluation.error.label, 0) + 1
        return msgspec.structs.replace(
            self, candidates=(*self.candidates, candidate), scores=(*self.scores, tuple(float(e.score) for e in graded)),
            failures=(*self.failures, dict(sorted(failed.items()))),
            seconds=(*self.seconds, model_seconds(graded)),
        )

    def seconds_of(self, index: int) -> tuple[float, ...] | None:
        """Candidate ``index``'s model seconds on each validation instance (None: not kept, as in
        a pool a checkpoint kept before they were)."""
        return self.seconds[index] if index < len(self.seconds) and len(self.seconds) == len(self.candidates) else None

    def spent(self, iterations: int, metric_calls: int) -> GepaState:
        """This pool after ``iterations`` more iterations and ``metric_calls`` more metric calls."""
        return msgspec.structs.replace(self, iterations=self.iterations + iterations,
                                       metric_calls=self.metric_calls + metric_calls)

    def validation(self) -> EvalResult:
        """The best candidate's validation, as the pool holds it (no call made). As in GEPA's own
        search, a failed solve scores 0 in the pool; it is counted unanswered too."""
        index = self.best_index()
        scores, failed = self.scores[index], self.failures[index]
        unanswered = sum(failed.values())
        return EvalResult(accuracy=sum(scores) / len(scores), examples=len(scores), answered=len(scores) - unanswered,
                          unanswered=unanswered, unanswered_by_kind=dict(failed), sim_seconds=0.0, scores=scores)


def model_seconds(graded: Sequence[GradedAnswer]) -> tuple[float, ...]:
    """Each solve's model seconds (what orders the next validation of a candidate made from the
    one ``graded`` are of)."""
    return tuple(e.usage.effective_latency_s for e in graded)


class PoolChange(msgspec.Struct, frozen=True):
    """What one GEPA iteration did to the pool: ``outcome`` (seeded, accepted, rejected, perfect:
    no reflection needed, no-proposal: the reflection changed nothing; in the asynchronous
    search also stale: dropped by the staleness policy), the candidate added (``added_ids``) or
    the child turned down (``rejected``). Nothing is ever evicted. ``measure``: what the
    iteration measured, for the live planner (None for the seed)."""

    outcome: str
    added_ids: tuple[int, ...] = ()
    rejected: tuple[int, ...] = ()
    evicted: tuple[int, ...] = ()
    measure: ProposalMeasure | None = None
