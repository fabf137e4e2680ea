"""GEPA's live planner, decision by decision, from the measures proposals report."""

from __future__ import annotations

import math

from combee_fast.config import CombeeConfig, ControllerConfig
from combee_fast.gepa.candidate import Candidate
from combee_fast.gepa.measure import ProposalMeasure
from combee_fast.gepa.planner import GepaPlanner, reflection_groups
from combee_fast.gepa.pool import GepaState
from combee_fast.schema import Example, GradedAnswer, Usage

SEED = Candidate.seed()


def _pool(best: str) -> GepaState:
    """A pool of the seed and ``best``, the better of the two on its one validation example."""
    state = GepaState(seed=SEED)
    for score, candidate in ((0.0, SEED), (1.0, Candidate({"system_prompt": best}))):
        graded = GradedAnswer(Example(0, "q", "1"), "1", score, "", Usage("gepa_solver"))
        state = state.with_candidate(candidate, [graded])
    return state


def _measure(minibatch: int = 80, *, latency: float = 30.0, outcome: str = "accepted", proposed: int = 10,
             kept: int = 6, added: tuple[str, ...] = (), loads: dict[str, int] | None = None,
             grade_s: float = 4.0) -> ProposalMeasure:
    return ProposalMeasure(iteration=0, minibatch=minibatch, outcome=outcome, proposed=proposed, kept=kept,
                           spans={"grade": (0.0, grade_s)}, latency=latency, added=added,
                           loads=loads if loads is not None else {"grade": minibatch})


def test_the_minibatch_starts_at_the_largest_one_aggregation_call_merges() -> None:
    planner = GepaPlanner(ControllerConfig(), CombeeConfig(), in_flight_ceiling=4)
    assert planner.tree_bound() == 80 and reflection_groups(80, 2, None) == 8 and reflection_groups(81, 2, None) == 9
    first = planner.decide(500)
    assert (first.batch_size, first.in_flight) == (80, 2) and first.reason.startswith("start: nothing measured")
    bounded = GepaPlanner(ControllerConfig(), CombeeConfig(max_group=8), in_flight_ceiling=1)
    assert bounded.tree_bound() == 32 and bounded.decide(500).in_flight == 1


def test_the_endpoints_capacity_bounds_the_minibatch_and_the_proposals_in_flight() -> None:
    flat = GepaPlanner(ControllerConfig(), CombeeConfig(), in_flight_ceiling=4)
    flat.record([_measure(loads={"grade": load}, grade_s=4.0) for load in (80, 160, 240)], _pool("a"))
    assert math.isinf(flat.capacity())
    full = GepaPlanner(ControllerConfig(), CombeeConfig(), in_flight_ceiling=4)
    full.record([_measure(loads={"grade": load}, grade_s=4.0 + 0.1 * load) for load in (40, 80, 120)], _pool("a"))
    assert math.isclose(full.capacity(), 0.8 / 0.2 * 4.0 / 0.1)  # throughput at 80% of its ceiling: 160 in flight
    decision = full.decide(500)
    assert (decision.batch_size, decision.in_flight) == (80, 2)  # 2 x 80 fill the 160
    assert decision.inputs["capacity_in_flight"] == full.capacity()
    fuller = GepaPlanner(ControllerConfig(), CombeeConfig(), in_flight_ceiling=4)
    fuller.record([_measure(loads={"grade": load}, grade_s=4.0 + 0.4 * load) for load in (10, 20, 30)], _pool("a"))
    squeezed = fuller.decide(500)
    assert (squeezed.batch_size, squeezed.in_flight) == (40, 1) and "the endpoint fills at ~40" in squeezed.reason


def test_poor_merges_cap_the_minibatch_and_healthy_ones_lift_the_cap() -> None:
    planner = GepaPlanner(ControllerConfig(recover_after=2), CombeeConfig(), in_flight_ceiling=1)
    planner.record([_measure(proposed=10, kept=2)], _pool("a"))
    capped = planner.decide(500)
    assert capped.batch_size == 40 and "merge-quality guard" in capped.reason and "kept 0.20" in capped.reason
    for _ in range(6):
        planner.record([_measure(40, proposed=10, kept=9)], _pool("a"))
    lifted = planner.decide(500)
    assert lifted.inputs["cap"] >= 80 and lifted.batch_size == 73  # the knee: within 10% of 80's seconds per example


def test_work_on_branches_the_search_left_behind_lowers_the_proposals_in_flight() -> None:
    planner = GepaPlanner(ControllerConfig(recover_after=2), CombeeConfig(), in_flight_ceiling=4)
    planner.record([_measure(added=("- a1", "- a2")), _measure(added=("- b1", "- b2"))], _pool("x\n- a1\n- a2"))
    assert planner.decide(500).in_flight == 3  # the best holds half of what was accepted: healthy
    for _ in range(3):
        planner.record([_measure(added=(f"- lost{n}",)) for n in range(4)], _pool("x\n- a1\n- a2"))
    decision = planner.decide(500)
    assert decision.in_flight == 1 and "branches left behind" in decision.reason
    assert decision.inputs["pool_retention"] < ControllerConfig().retention_floor


def test_a_minibatch_past_the_knee_of_seconds_per_example_is_not_chosen() -> None:
    planner = GepaPlanner(ControllerConfig(), CombeeConfig(), in_flight_ceiling=1)
    planner.record([_measure(40, latency=10.0 + 0.5 * 40), _measure(80, latency=10.0 + 0.5 * 80)], _pool("a"))
    decision = planner.decide(500)
    per_example = {b: (10.0 + 0.5 * b) / b for b in range(1, 81)}
    assert per_example[decision.batch_size] <= 1.1 * per_example[80] < per_example[decision.batch_size - 1] * 1.1
    assert decision.batch_size < 80 and "within 10% of the fastest seconds per example" in decision.reason
