"""The release gate on its own: what each policy serves, when it promotes and rolls back, and that
a rolled-back version is never published again. Real playbooks; rewards drawn from seeded coins."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest

from combee_fast.config import ReleaseConfig
from combee_fast.embedded.events import ReleaseDecision, ReleaseStatus
from combee_fast.embedded.release import ReleaseGate, bucket
from combee_fast.errors import ConfigError, ReleaseError
from combee_fast.ace.playbook import Playbook
from combee_fast.run.events import Event
from combee_fast.schema import CallError, Example, Rollout, Usage
from combee_fast.ace.records import Delta, Op, OpKind
from combee_fast.verify.card import load_card, release_config
from tests.verify.small_card import CARD

EXAMPLE = Example(0, "What is 2 + 2?", "4", "train")


def _grown(playbook: Playbook, lesson: str) -> Playbook:
    return playbook.apply(Delta((Op(OpKind.ADD, section="strategies_and_hard_rules", content=lesson),)))[0]


def _rollout(index: int, version: int | None, score: float, *, error: bool = False) -> Rollout:
    return Rollout(EXAMPLE, index, (), "4", "", (), score, "", Usage(prompt_tokens=10, completion_tokens=2),
                   error=CallError("timeout", "slow") if error else None, version=version)


class Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.releases: list = []

    def decisions(self) -> list[tuple[str, int, int]]:
        return [(e.decision, e.candidate, e.incumbent) for e in self.events if isinstance(e, ReleaseDecision)]


def _gate(policy: str, **options) -> tuple[ReleaseGate, Recorder]:
    recorder = Recorder()
    gate = ReleaseGate(Playbook.empty(), ReleaseConfig(policy=policy, **options), seed=3,
                       emit=recorder.events.append, on_release=recorder.releases.append)
    return gate, recorder


def _serve(gate: ReleaseGate, requests: int, accuracy: dict[int, float], *, seed: int = 0, start: int = 0) -> int:
    """``requests`` host requests: context by key, a coin with the served version's accuracy, the
    rollout submitted with its version. Returns how many the candidate served."""
    rng = np.random.default_rng(seed)
    on_candidate = 0
    for i in range(start, start + requests):
        release = gate.release
        context = release.context_for(f"user-{rng.integers(0, 10_000)}")
        on_candidate += release.candidate is not None and context.version == release.candidate.version
        gate.observe(_rollout(i, context.version, float(rng.random() < accuracy[context.version])))
    return on_candidate


def test_no_policy_publishes_every_learned_version_at_once() -> None:
    gate, recorder = _gate("none")
    v1 = _grown(Playbook.empty(), "Check the units.")
    base, lineage = gate.base()
    assert base.version == 0 and lineage == 0
    assert gate.learned(v1, None, lineage)
    assert gate.release.incumbent.version == 1 and gate.release.candidate is None
    assert gate.context_for("anyone").text == v1.render() and gate.incumbent.artifact is v1
    assert recorder.decisions() == [("promote", 1, 0)]


def test_staged_rolls_a_harmful_candidate_back_and_the_incumbent_serves_again() -> None:
    gate, recorder = _gate("staged", stages=(0.05, 0.25, 0.5, 1.0), margin=0.05)
    gate.learned(_grown(Playbook.empty(), "A wrong rule."), None, 0)
    assert gate.release.candidate is not None and gate.release.share == 0.05
    served = _serve(gate, 20_000, {0: 0.8, 1: 0.4})
    assert recorder.decisions()[-1] == ("rollback", 1, 0)
    rollback = [e for e in recorder.events if isinstance(e, ReleaseDecision)][-1]
    assert rollback.evidence["upper"] < 0 and rollback.evidence["method"] == "two-sample"
    assert 0 < rollback.evidence["candidate_rewards"] < 400 and served == rollback.evidence["candidate_rewards"]
    assert gate.release.candidate is None and gate.release.incumbent.version == 0
    assert {gate.context_for(f"user-{k}").version for k in range(1_000)} == {0}  # every key on the incumbent
    assert recorder.releases[-1] == gate.release
    with pytest.raises(ReleaseError, match="version 1 was rolled back; it is never published again"):
        gate.approve(1)


def test_staged_widens_a_good_candidate_stage_by_stage_then_promotes_it() -> None:
    gate, recorder = _gate("staged", stages=(0.05, 0.25, 0.5, 1.0), margin=0.05)
    gate.learned(_grown(Playbook.empty(), "A good rule."), None, 0)
    shares = []
    rng = np.random.default_rng(1)
    for i in range(40_000):
        release = gate.release
        if release.candidate is None:
            break
        shares.append(release.share)
        context = release.context_for(f"user-{i}")
        gate.observe(_rollout(i, context.version, float(rng.random() < (0.9 if context.version == 1 else 0.8))))
    assert [d[0] for d in recorder.decisions()] == ["candidate", "widen", "widen", "promote"]
    assert sorted(set(shares)) == [0.05, 0.25, 0.5] and shares == sorted(shares)
    assert gate.release.incumbent.version == 1 and gate.release.candidate is None
    widen = [e for e in recorder.events if isinstance(e, ReleaseDecision) and e.decision == "widen"]
    assert [e.evidence["next_share"] for e in widen] == [0.25, 0.5]
    assert all(e.evidence["lower"] > e.evidence["threshold"] for e in widen)


def test_keys_stay_on_the_candidate_as_its_share_grows() -> None:
    salt = 12345
    buckets = {f"user-{k}": bucket(f"user-{k}", salt) for k in range(5_000)}
    on_small = {key for key, b in buckets.items() if b < 0.05}
    on_large = {key for key, b in buckets.items() if b < 0.25}
    assert on_small <= on_large and 150 < len(on_small) < 350 and 1_100 < len(on_large) < 1_400
    assert bucket("user-1", salt) == bucket("user-1", salt) != bucket("user-1", salt + 1)


def test_hold_publishes_nothing_until_approved_and_learning_waits_behind_it() -> None:
    gate, recorder = _gate("hold")
    v1 = _grown(Playbook.empty(), "Rule one.")
    gate.learned(v1, None, 0)
    assert gate.release.candidate.version == 1 and gate.release.share == 0.0
    _serve(gate, 500, {0: 0.5, 1: 0.9})
    assert {gate.context_for(f"k{i}").version for i in range(200)} == {0}  # nothing served but the incumbent
    assert gate.incumbent.number == 0
    base, lineage = gate.base()
    assert base is v1  # learning goes on on top of the held candidate
    v2 = _grown(v1, "Rule two.")
    gate.learned(v2, None, lineage)
    assert gate.release.candidate.version == 1 and gate.head_version == 2
    with pytest.raises(ReleaseError, match=r"version 2 is not the candidate \(the candidate is version 1\)"):
        gate.approve(2)
    gate.approve(1)
    assert gate.release.incumbent.version == 1 and gate.release.candidate.version == 2  # the next one waits
    gate.reject(2)
    assert gate.release.incumbent.version == 1 and gate.release.candidate is None
    assert recorder.decisions() == [("candidate", 1, 0), ("approve", 1, 0), ("candidate", 2, 1), ("reject", 2, 1)]
    with pytest.raises(ReleaseError, match="no candidate is under release"):
        gate.reject(3)


def test_after_a_rollback_learning_goes_on_from_the_incumbent_with_new_numbers_and_old_work_is_discarded() -> None:
    gate, recorder = _gate("hold")
    v1 = _grown(Playbook.empty(), "Rule one.")
    gate.learned(v1, None, 0)
    in_flight, lineage = gate.base()  # a batch starts on the candidate ...
    gate.reject(1)  # ... and the candidate is rolled back while it learns
    assert not gate.learned(_grown(in_flight, "Rule two."), None, lineage)  # its work is discarded
    base, lineage = gate.base()
    assert base.render() == Playbook.empty().render() and base.version == 1  # the incumbent, renumbered
    v2 = _grown(base, "Rule three.")
    assert v2.version == 2 and gate.learned(v2, None, lineage)
    assert gate.release.candidate.version == 2  # never number 1 again
    gate.reject(2)
    assert gate.learned(_grown(gate.base()[0], "Rule one."), None, gate.base()[1]) is True
    # the same text as rolled-back version 1: refused, never published again
    assert recorder.decisions()[-1] == ("refuse", 3, 0)
    assert [e for e in recorder.events if isinstance(e, ReleaseDecision)][-1].evidence["same_text_as"] == 1
    assert gate.release.incumbent.version == 0 and gate.release.candidate is None


def test_a_candidate_from_outside_goes_through_the_same_policy_and_learning_builds_on_it() -> None:
    gate, recorder = _gate("staged", stages=(0.5, 1.0), margin=0.1)
    offline = _grown(_grown(Playbook.empty(), "Offline rule one."), "Offline rule two.")  # version 2 of its own run
    assert gate.propose(offline) == 2
    assert gate.release.candidate.version == 2 and gate.release.candidate.text == offline.render()
    base, _ = gate.base()
    assert base.render() == offline.render()
    _serve(gate, 3_000, {0: 0.5, 2: 0.95})
    assert recorder.decisions()[-1] == ("promote", 2, 0) and gate.release.incumbent.version == 2
    decision = [e for e in recorder.events if isinstance(e, ReleaseDecision)][0]
    assert decision.evidence["source"] == "proposed"


def test_a_proposal_waits_behind_a_candidate_and_survives_its_rollback() -> None:
    gate, recorder = _gate("hold")
    gate.learned(_grown(Playbook.empty(), "Learned rule."), None, 0)
    number = gate.propose(_grown(Playbook.empty(), "Offline rule."))
    assert number == 2 and gate.release.candidate.version == 1
    gate.reject(1)
    assert gate.release.candidate.version == 2  # the proposal is not on the rejected line
    assert recorder.decisions() == [("candidate", 1, 0), ("reject", 1, 0), ("candidate", 2, 0)]


def test_rewards_are_attributed_per_version_and_unusable_ones_are_only_counted() -> None:
    gate, recorder = _gate("none", status_every=4)
    gate.learned(_grown(Playbook.empty(), "Rule."), None, 0)
    for i, (version, score) in enumerate([(0, 1.0), (1, 0.0), (1, 1.0), (None, 1.0), (7, 1.0), (1, 1.0), (0, 0.0)]):
        gate.observe(_rollout(i, version, score))
    gate.observe(_rollout(9, 1, 1.0, error=True))
    statuses = [e for e in recorder.events if isinstance(e, ReleaseStatus)]
    rewards = {r.version: r for r in statuses[-1].rewards}
    assert (rewards[0].count, rewards[0].mean) == (2, 0.5) and (rewards[1].count, rewards[1].mean) == (3, 2 / 3)
    assert 0 <= rewards[1].lower < rewards[1].mean < rewards[1].upper <= 1
    assert gate.unattributed == 3 and gate.observed == 8  # no version, a version never issued, a failed call
    assert statuses[-1].incumbent == 1 and statuses[-1].policy == "none"


def test_shadow_serves_nothing_and_decides_on_paired_reruns_in_submission_order() -> None:
    gate, recorder = _gate("shadow", shadow_share=0.5, margin=0.05)
    gate.learned(_grown(Playbook.empty(), "A wrong rule."), None, 0)
    runs, started = [], []
    rng = np.random.default_rng(2)
    for i in range(2_000):
        context = gate.context_for(f"user-{i}")
        assert context.version == 0  # a shadow candidate is never served
        run = gate.observe(_rollout(i, context.version, float(rng.random() < 0.8)))
        if run is not None:
            runs.append(run)
            started.append(run)
        while runs and (len(runs) > 8 or i % 7 == 0):  # re-runs finish later, a few at a time, in order
            done = runs.pop(0)
            gate.shadow_done(done, _rollout(i, None, float(rng.random() < 0.3)))
        if gate.release.candidate is None:
            break
    assert recorder.decisions()[-1] == ("rollback", 1, 0)
    rollback = [e for e in recorder.events if isinstance(e, ReleaseDecision)][-1]
    assert rollback.evidence["method"] == "paired" and rollback.evidence["pairs"] > 0
    assert gate.shadow_calls > 0 and gate.shadow_tokens == 12 * gate.shadow_calls
    assert len({run.epoch for run in started}) == len(started)  # each re-run its own seed path: its own draw


def test_the_card_selects_the_policy_and_the_margin() -> None:
    card = load_card(CARD)
    config = release_config(card)
    assert (config.policy, config.margin) == (card.failure_cost.canary_policy, card.claim.margin) == ("shadow", 0.02)
    staged = msgspec.structs.replace(card, failure_cost=msgspec.structs.replace(card.failure_cost, canary_policy="staged"))
    assert release_config(staged, ReleaseConfig(stages=(0.2, 1.0))).stages == (0.2, 1.0)
    with pytest.raises(ConfigError, match="release.stages must rise strictly from above 0 to 1.0"):
        ReleaseConfig(stages=(0.5, 0.2, 1.0))
    with pytest.raises(ConfigError, match="unknown policy 'canary'"):
        ReleaseConfig(policy="canary")
