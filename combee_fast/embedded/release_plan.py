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

Keys: the staged share is a hash of the host's key, so at share ``s`` about ``keys * s`` keys
reach the candidate; below ``1 / s`` keys, the first stage may reach none, and nothing is
decided at all.
"""

from __future__ import annotations

import math

import msgspec
import numpy as np

from combee_fast.config import ReleaseConfig
from combee_fast.native import sequential

CHUNK = 8192
"""Requests fed to the statistics at a time."""
LIMIT = 10_000_000
"""The most requests a plan looks at; a decision later than that is reported as None."""


class PlannedDecision(msgspec.Struct, frozen=True):
    """One decision of the plan: ``decision`` (``widen`` to ``share``, or ``promote``) after
    ``requests`` requests since the candidate's release (None: not within :data:`LIMIT`), with
    ``candidate_rewards`` of them the candidate's (``shadow``: re-run pairs)."""

    decision: str
    share: float
    requests: int | None
    candidate_rewards: int | None


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
    if not 0.0 < accuracy < 1.0:
        raise ValueError(f"accuracy must be in (0, 1), got {accuracy}")
    if config.policy == "staged":
        return ReleasePlan("staged", accuracy, _staged(config, accuracy), math.ceil(1.0 / config.stages[0]))
    if config.policy == "shadow":
        return ReleasePlan("shadow", accuracy, (_shadow(config, accuracy),), 1)
    raise ValueError(f"release policy {config.policy!r} decides nothing by itself: no plan")


def _balanced(start: int, count: int, rate: float) -> np.ndarray:
    """Events ``start`` .. ``start + count - 1`` of a sequence with ``rate`` of them 1 over every
    prefix (as closely as whole events allow), as 0/1."""
    k = np.arange(start, start + count, dtype=np.float64)
    return (np.floor((k + 1) * rate) - np.floor(k * rate)).astype(np.float64)


def _staged(config: ReleaseConfig, accuracy: float) -> tuple[PlannedDecision, ...]:
    state = sequential.new_state()
    stages, decisions = config.stages, []
    served = {sequential.INCUMBENT: 0, sequential.CANDIDATE: 0}  # rewards each version has had (evidence or not)
    request, stage, opened = 0, 0, False
    while stage + 1 < len(stages):
        threshold = -config.margin / stages[stage + 1]
        # as the gate, a stage whose threshold the interval is already beyond is passed at once
        found = request if opened and sequential.difference(state, False)[0] > threshold else None
        while found is None and request < LIMIT:
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


def _shadow(config: ReleaseConfig, accuracy: float) -> PlannedDecision:
    state = sequential.new_state()
    differ = 2.0 * accuracy * (1.0 - accuracy)  # two independent draws differ this often
    pairs, limit = 0, int(LIMIT * config.shadow_share)
    while pairs < limit:
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
