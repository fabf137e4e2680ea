"""How many requests and keys a release decision needs: a planning figure for the release gate.

The gate (:mod:`.release`) decides when its confidence sequence's interval crosses a threshold,
so how soon it decides depends on the rewards it sees. :func:`release_plan` answers the question
a host sizes its traffic by: for a candidate exactly as good as the incumbent (both with mean
reward ``accuracy``), after how many requests would each of the gate's decisions come?

The rewards are fed to the gate's own statistics (:func:`combee_fast.native.sequential.first_crossing`)
in a balanced pattern: each version's rewards have mean ``accuracy`` over every prefix, as
closely as whole rewards allow; under ``staged`` the candidate serves its stage's share of the
requests, spread evenly, and the incumbent's rewards count from the candidate's first on, as in
the gate; under ``shadow``, ``shadow_share`` of the requests are re-run, and a pair's difference
is +1 or -1 as often as two independent draws of that accuracy differ. The figure is what a
typical run of that variance needs, not a bound: real rewards scatter around it, a better
candidate is promoted sooner and a worse one rolled back instead.

Mid-release: :func:`next_decision` continues the same balanced rewards from where a release
stands (the gate's statistics so far, :class:`ReleaseProgress`), so the gate can say about how
many more requests its next decision needs (:meth:`ReleaseGate.next_decision
<combee_fast.embedded.release.ReleaseGate.next_decision>`): an estimate for an equal candidate at
the accuracy observed, on the evidence already in.

Keys: the staged share is a hash of the host's key, so at share ``s`` about ``keys * s`` keys
reach the candidate; below ``1 / s`` keys, the first stage may reach none, and nothing is
decided at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import msgspec
import numpy as np

from combee_fast.config import ReleaseConfig
from combee_fast.native import sequential

CHUNK = 8192
"""Requests fed to the statistics at a time."""
LIMIT = 10_000_000
"""The most requests a plan looks at; a decision later than that is reported as None."""
ACCURACY_DECIMALS = 2
"""Decimals an observed accuracy is rounded to for :func:`next_decision` (:func:`on_grid`)."""


class PlannedDecision(msgspec.Struct, frozen=True):
    """One decision of the plan: ``decision`` (``widen`` to ``share``, or ``promote``) after
    ``requests`` requests since the candidate's release (None: not within :data:`LIMIT`), with
    ``candidate_rewards`` of them the candidate's (``shadow``: re-run pairs)."""

    decision: str
    share: float
    requests: int | None
    candidate_rewards: int | None


@dataclass(frozen=True)
class ReleaseProgress:
    """Where a candidate's release stands, in the gate's own terms: ``state``, the statistics of
    its test so far (:mod:`combee_fast.native.sequential`; left unchanged by :func:`next_decision`),
    ``requests`` since the candidate's release (staged: rewards of either version; shadow: the
    incumbent's), ``candidate_rewards`` of them the candidate's (staged), and the ``stage``
    (staged: the index of the share served now) and whether the candidate's first reward has
    come (``opened``; the incumbent's count as evidence from then on)."""

    state: np.ndarray
    requests: int = 0
    candidate_rewards: int = 0
    stage: int = 0
    opened: bool = False


class ReleasePlan(msgspec.Struct, frozen=True):
    """The decisions of one release of an equal candidate under ``policy`` at ``accuracy``, in
    order, and ``keys``: the fewest distinct keys for which the first stage's share expects one
    key on the candidate (``shadow``: 1, any key is re-run)."""

    policy: str
    accuracy: float
    decisions: tuple[PlannedDecision, ...]
    keys: int

    def line(self) -> str:
        """The plan in one line, e.g. ``staged at accuracy 0.60: widen to 10% after 41,800 requests, ...``."""
        steps = [f"{d.decision}{'' if d.decision == 'promote' else f' to {d.share:.0%}'} after "
                 f"{f'{d.requests:,}' if d.requests is not None else f'more than {LIMIT:,}'} requests"
                 for d in self.decisions]
        return f"{self.policy} at accuracy {self.accuracy:.2f}: {', '.join(steps)} (at least {self.keys:,} keys)"


def release_plan(config: ReleaseConfig, accuracy: float) -> ReleasePlan:
    """The decisions an equal candidate's release under ``config`` comes to, with both versions'
    mean reward ``accuracy`` in (0, 1) (module docstring); ValueError for a policy that decides
    nothing by itself (``none``, ``hold``)."""
    _check_accuracy(accuracy)
    fresh = ReleaseProgress(sequential.new_state())
    if config.policy == "staged":
        return ReleasePlan("staged", accuracy, _staged(config, accuracy, fresh), math.ceil(1.0 / config.stages[0]))
    if config.policy == "shadow":
        return ReleasePlan("shadow", accuracy, (_shadow(config, accuracy, fresh),), 1)
    raise ValueError(f"release policy {config.policy!r} decides nothing by itself: no plan")


def next_decision(config: ReleaseConfig, accuracy: float, progress: ReleaseProgress, *,
                  horizon: int = LIMIT) -> PlannedDecision:
    """The next decision of a release standing at ``progress`` if the rewards from now on are an
    equal candidate's at ``accuracy`` in (0, 1) (module docstring): its ``requests`` count from the
    candidate's release, as ``progress.requests`` does; None when it comes more than ``horizon``
    requests from now (the cost grows with the requests looked at). ValueError for a policy that
    decides nothing by itself (``none``, ``hold``) and for a staged release past its last stage."""
    _check_accuracy(accuracy)
    progress = replace(progress, state=progress.state.copy())
    limit = min(progress.requests + horizon, LIMIT)
    if config.policy == "staged":
        if progress.stage + 1 >= len(config.stages):
            raise ValueError(f"stage {progress.stage} is the last of {len(config.stages)}: no decision comes")
        return _staged(config, accuracy, progress, limit)[0]
    if config.policy == "shadow":
        return _shadow(config, accuracy, progress, limit)
    raise ValueError(f"release policy {config.policy!r} decides nothing by itself: no plan")


def _check_accuracy(accuracy: float) -> None:
    if not 0.0 < accuracy < 1.0:
        raise ValueError(f"accuracy must be in (0, 1), got {accuracy}")


def on_grid(mean: float) -> float:
    """An observed mean reward as :func:`next_decision` takes it: rounded to
    :data:`ACCURACY_DECIMALS` and kept inside (0, 1) (versions that always or never succeeded
    so far are taken as one step from certain)."""
    step = 10.0 ** -ACCURACY_DECIMALS
    return min(max(round(mean, ACCURACY_DECIMALS), step), 1.0 - step)


def _balanced(start: int, count: int, rate: float) -> np.ndarray:
    """Events ``start`` .. ``start + count - 1`` of a sequence with ``rate`` of them 1 over every
    prefix (as closely as whole events allow), as 0/1."""
    k = np.arange(start, start + count, dtype=np.float64)
    return (np.floor((k + 1) * rate) - np.floor(k * rate)).astype(np.float64)


def _staged(config: ReleaseConfig, accuracy: float, start: ReleaseProgress,
            limit: int = LIMIT) -> tuple[PlannedDecision, ...]:
    """The staged release's decisions from ``start`` on, up to request ``limit`` (its ``state``
    is added to)."""
    state, stages, decisions = start.state, config.stages, []
    served = {sequential.INCUMBENT: start.requests - start.candidate_rewards,  # rewards each version has had
              sequential.CANDIDATE: start.candidate_rewards}  # (evidence or not)
    request, stage, opened = start.requests, start.stage, start.opened
    while stage + 1 < len(stages):
        threshold = -config.margin / stages[stage + 1]
        # as the gate, a stage whose threshold the interval is already beyond is passed at once
        found = request if opened and sequential.difference(state, False)[0] > threshold else None
        while found is None and request < limit:
            on_candidate = _balanced(request, CHUNK, stages[stage]).astype(bool)
            if not opened:  # the incumbent's rewards count from the candidate's first on
                first = int(np.argmax(on_candidate)) if on_candidate.any() else CHUNK
                opened = first < CHUNK
                on_candidate, request = on_candidate[first:], request + first
                served[sequential.INCUMBENT] += first
                if not opened:
                    continue
            rows = np.where(on_candidate, sequential.CANDIDATE, sequential.INCUMBENT)
            values = np.empty(len(rows))
            for row in (sequential.INCUMBENT, sequential.CANDIDATE):
                mine = rows == row
                values[mine] = _balanced(served[row], int(mine.sum()), accuracy)
            crossing = sequential.first_crossing(state, rows, values, config.alpha, sequential.TWO_SAMPLE,
                                                 -math.inf, threshold)
            used = rows[: crossing.index + 1]
            for row in served:
                served[row] += int((used == row).sum())
            request += crossing.index + 1
            if crossing.decision == sequential.WIDEN:
                found = request
        stage += 1
        decision = "promote" if stage == len(stages) - 1 else "widen"
        reached = found is not None
        decisions.append(PlannedDecision(decision, stages[stage], found, served[sequential.CANDIDATE] if reached else None))
        if not reached:
            break
    return tuple(decisions)


def _shadow(config: ReleaseConfig, accuracy: float, start: ReleaseProgress, limit: int = LIMIT) -> PlannedDecision:
    """The shadow release's promotion from ``start`` on, up to request ``limit`` (its ``state``
    is added to)."""
    state = start.state
    differ = 2.0 * accuracy * (1.0 - accuracy)  # two independent draws differ this often
    pairs = sequential.interval(state, sequential.PAIRED).count
    while pairs < int(limit * config.shadow_share):
        nonzero = _balanced(pairs, CHUNK, differ)
        signs = np.where(np.cumsum(nonzero) % 2 == 1, -1.0, 1.0)  # the first difference against the candidate
        values = nonzero * signs
        rows = np.full(CHUNK, sequential.PAIRED)
        crossing = sequential.first_crossing(state, rows, values, config.alpha, sequential.PAIRED_TEST,
                                             -math.inf, -config.margin)
        pairs += crossing.index + 1
        if crossing.decision == sequential.WIDEN:
            return PlannedDecision("promote", 1.0, math.ceil(pairs / config.shadow_share), pairs)
    return PlannedDecision("promote", 1.0, None, None)
