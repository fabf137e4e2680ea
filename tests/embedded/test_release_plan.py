"""The release plan (how many requests a decision needs) against the release gate itself: the gate,
fed the plan's balanced rewards request by request, decides exactly where the plan says."""

from __future__ import annotations

import math

import pytest

from combee_fast.config import ReleaseConfig
from combee_fast.embedded.events import NextDecision, ReleaseDecision, ReleaseStatus
from combee_fast.embedded.release import STATUS_HORIZON, ReleaseGate
from combee_fast.embedded.release_plan import ReleaseProgress, next_decision, release_plan
from combee_fast.native import sequential
from combee_fast.ace.playbook import Playbook
from combee_fast.run.events import Event
from tests.embedded.test_release import _grown, _rollout


def _bit(k: int, rate: float) -> int:
    """Event ``k`` of a sequence with ``rate`` of its events 1 over every prefix."""
    return math.floor((k + 1) * rate) - math.floor(k * rate)


def _decisions(config: ReleaseConfig, accuracy: float, requests: int) -> list[tuple[str, int]]:
    """The gate's widenings and promotion, each with the request count after which it came, when
    the candidate serves its share of requests evenly and each version's rewards have mean
    ``accuracy`` (every prefix, as closely as whole rewards allow)."""
    events: list[Event] = []
    gate = ReleaseGate(Playbook.empty(), config, seed=1, emit=events.append)
    gate.learned(_grown(Playbook.empty(), "Check the units."), None, 0)
    served = {0: 0, 1: 0}
    decided: list[tuple[str, int]] = []
    for request in range(requests):
        release = gate.release
        if release.candidate is None:
            break
        version = release.candidate.version if _bit(request, release.share) else release.incumbent.version
        seen = len(events)
        gate.observe(_rollout(request, version, float(_bit(served[version], accuracy))))
        served[version] += 1
        decided += [(e.decision, request + 1) for e in events[seen:]
                    if isinstance(e, ReleaseDecision) and e.decision in ("widen", "promote")]
    return decided


@pytest.mark.parametrize("accuracy", [0.6, 0.9])
def test_the_gate_fed_the_plans_rewards_decides_where_the_plan_says(accuracy: float) -> None:
    config = ReleaseConfig(policy="staged", margin=0.05, stages=(0.05, 0.25, 0.5, 1.0))
    plan = release_plan(config, accuracy)
    assert [d.decision for d in plan.decisions] == ["widen", "widen", "promote"]
    assert [d.share for d in plan.decisions] == [0.25, 0.5, 1.0]
    last = plan.decisions[-1].requests
    assert last is not None
    assert _decisions(config, accuracy, last + 10) == [(d.decision, d.requests) for d in plan.decisions]
    assert plan.keys == 20 and "promote after" in plan.line()


def test_a_smaller_margin_or_first_share_needs_more_requests_and_shadow_counts_its_re_runs() -> None:
    wide = release_plan(ReleaseConfig(policy="staged", margin=0.05), 0.7).decisions[-1].requests
    narrow = release_plan(ReleaseConfig(policy="staged", margin=0.02), 0.7).decisions[-1].requests
    assert wide is not None and narrow is not None and narrow > 2 * wide
    shadow = release_plan(ReleaseConfig(policy="shadow", margin=0.05, shadow_share=0.2), 0.7).decisions
    half = release_plan(ReleaseConfig(policy="shadow", margin=0.05, shadow_share=0.1), 0.7).decisions
    assert shadow[0].candidate_rewards == half[0].candidate_rewards  # the same pairs, from half the re-runs
    assert half[0].requests == pytest.approx(2 * shadow[0].requests, abs=10)
    with pytest.raises(ValueError, match="decides nothing by itself"):
        release_plan(ReleaseConfig(policy="hold"), 0.7)


def test_the_gate_says_how_many_more_requests_its_next_decision_needs_counting_down_to_it() -> None:
    accuracy = 0.6
    config = ReleaseConfig(policy="staged", margin=0.05, stages=(0.05, 0.25, 0.5, 1.0), status_every=50)
    planned = [(d.decision, d.share, d.requests) for d in release_plan(config, accuracy).decisions]
    events: list[Event] = []
    gate = ReleaseGate(Playbook.empty(), config, seed=1, emit=events.append)
    gate.learned(_grown(Playbook.empty(), "Check the units."), None, 0)
    served = {0: 0, 1: 0}
    waits: list[tuple[int, NextDecision]] = []  # after each request: what the gate said it waits for
    for request in range(1, planned[-1][2] + 1):
        release = gate.release
        version = release.candidate.version if _bit(request - 1, release.share) else release.incumbent.version
        seen = len(events)
        gate.observe(_rollout(request, version, float(_bit(served[version], accuracy))))
        served[version] += 1
        waits += [(request, e.next_decision) for e in events[seen:]
                  if isinstance(e, ReleaseStatus) and e.next_decision is not None][-1:]
    assert gate.candidate is None and gate.incumbent.number == 1  # promoted where the plan says
    assert all(wait.requests == request for request, wait in waits)
    stable = [(request, wait) for request, wait in waits if request > 400]  # the observed mean is 0.60 from here
    assert all(wait.accuracy == accuracy for _, wait in stable)
    for decision, share, at in planned:  # each counts down a request a request, to the one the gate decides at
        towards = [(request, wait.more) for request, wait in stable if (wait.decision, wait.share) == (decision, share)]
        assert len(towards) > 2 and towards == [(request, at - request) for request, _ in towards]
    assert all(wait.more is not None and wait.more > 0 for _, wait in waits)  # an estimate from the first reward
    assert waits[-1][0] < planned[-1][2]  # after the promotion nothing is waited for


def test_the_next_decision_looks_no_farther_than_its_horizon() -> None:
    """A decision past the horizon is None (the status's estimate stays cheap on the host's loop);
    within it, the horizon changes nothing."""
    fresh = ReleaseProgress(sequential.new_state())
    far = ReleaseConfig(policy="staged", margin=0.0005)  # an equal candidate widens after millions
    assert next_decision(far, 0.7, fresh, horizon=STATUS_HORIZON).requests is None
    near = ReleaseConfig(policy="staged", margin=0.05)
    within = next_decision(near, 0.7, fresh, horizon=STATUS_HORIZON)
    assert within.requests is not None and within.requests < STATUS_HORIZON
    assert within == next_decision(near, 0.7, fresh)
