"""What ``optimize`` returns: :class:`OptimizeResult`, named as gepa's ``GEPAResult`` where the two
say the same thing (``best_candidate``, ``best_idx``, ``candidates``, ``parents``,
``val_aggregate_scores``, ``total_metric_calls``, ``run_dir``), with what a Combee run also
counts: what each accepted improvement cost, in tokens and dollars."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from combee_fast.gepa.candidate import Candidate
from combee_fast.gepa.pool import GepaState
from combee_fast.run.train import TrainResult


class OptimizeResult(msgspec.Struct, frozen=True):
    """The search's outcome.

    ``candidates``: every candidate of the pool, in the order they joined (the seed first), each
    as its components, with ``parents`` (pool indices) and ``val_aggregate_scores`` (its mean
    score on the valset). ``best_idx`` is the best of them (the first on ties) and
    ``best_candidate`` its components (its one text when the seed was a plain string);
    ``best_score`` its validation score. ``total_metric_calls``: the metric calls made.
    ``explored``/``accepted``: children proposed and children that joined the pool;
    ``tokens``, ``dollars`` (None: a role without a price), and both per accepted improvement
    (None: none accepted, or the cost unknown) count the engine's model calls (reflection, and
    a ``task_lm`` given as an endpoint), not what the user's own code spent. ``wall_seconds``:
    the search's wall time; ``stopped_by``: the limit that ended it early (None: its budget was
    spent); ``method`` the learning method; ``run_dir`` the run folder (None: none was asked for).
    """

    best_candidate: dict[str, str] | str
    best_idx: int
    best_score: float
    candidates: tuple[dict[str, str], ...]
    parents: tuple[tuple[int, ...], ...]
    val_aggregate_scores: tuple[float, ...]
    total_metric_calls: int
    explored: int
    accepted: int
    tokens: int
    tokens_per_improvement: float | None
    dollars: float | None
    dollars_per_improvement: float | None
    wall_seconds: float
    stopped_by: str | None
    method: str
    run_dir: str | None = None


def optimize_result(result: TrainResult, *, plain: bool, run_dir: str | Path | None) -> OptimizeResult:
    """The :class:`OptimizeResult` of a finished run's ``result`` (its artifact a GEPA pool);
    ``plain``: the seed was a string, so is ``best_candidate``."""
    pool: GepaState = result.artifact
    means = tuple(sum(scores) / len(scores) for scores in pool.scores)
    return _result(result, tuple(c.components for c in pool.candidates), tuple(c.parents for c in pool.candidates),
                   means, pool.best_index(), pool.metric_calls, plain=plain, run_dir=run_dir)


def playbook_result(result: TrainResult, seed: Candidate, seed_score: float, metric_calls: int, *, plain: bool,
                    run_dir: str | Path | None) -> OptimizeResult:
    """The :class:`OptimizeResult` of a finished ``combee-ace`` run: the seed (scored
    ``seed_score``) and the seed with the best playbook after its one component, the best of the
    two by validation score (the seed on a tie)."""
    name = seed.names()[0]
    learned = {name: f"{seed.components[name]}\n\n{result.best.render()}"}
    scores = (seed_score, seed_score if result.best_val_accuracy is None else result.best_val_accuracy)
    return _result(result, (seed.components, learned), ((), (0,)), scores, int(scores[1] > scores[0]), metric_calls,
                   plain=plain, run_dir=run_dir)


def _result(result: TrainResult, candidates: Sequence[dict[str, str]], parents: Sequence[tuple[int, ...]],
            scores: tuple[float, ...], best: int, metric_calls: int, *, plain: bool,
            run_dir: str | Path | None) -> OptimizeResult:
    summary: dict[str, Any] = result.summary
    components = candidates[best]
    return OptimizeResult(
        best_candidate=next(iter(components.values())) if plain else dict(components), best_idx=best,
        best_score=scores[best], candidates=tuple(dict(c) for c in candidates), parents=tuple(parents),
        val_aggregate_scores=scores, total_metric_calls=metric_calls,
        explored=int(summary.get("candidates_explored", 0)), accepted=int(summary.get("candidates_accepted", 0)),
        tokens=result.tokens, tokens_per_improvement=summary.get("tokens_per_improvement"),
        dollars=summary.get("dollars"), dollars_per_improvement=summary.get("dollars_per_improvement"),
        wall_seconds=result.train_wall_seconds, stopped_by=result.stopped_by, method=result.method,
        run_dir=None if run_dir is None else str(run_dir),
    )
