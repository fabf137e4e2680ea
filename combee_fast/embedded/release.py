"""The release gate: how an online learner's new versions reach requests, written once for every
embedded learner. The core (:class:`~combee_fast.embedded.online.OnlineLearner`) holds a
:class:`ReleaseGate`; the threaded and process learners mirror its :class:`Release` on the host
(``context_for`` never leaves the host's thread) and forward ``approve``, ``reject`` and
``propose`` to it, so the same submissions give the same decisions wherever the learner runs.

Versions. Every version has a number that is never reused: the starting artifact's, then one
more for each learned or proposed version, including after a rollback (learning on from an older
version renumbers its base first, :meth:`Releasable.renumbered
<combee_fast.protocols.Releasable.renumbered>`). The gate reads nothing else of an artifact than
that protocol declares: its ``version``, its text (``render()``) and ``renumbered``, so every
online learner's artifact goes through it alike (ACE's playbook, GEPA's candidate, TextGrad's
prompt variable). The *incumbent* serves requests; at most one
*candidate* is under release at a time; the *head* is the newest version, the one learning
builds on (the candidate, or newer versions learned on top of it, which wait their turn).

Policies (:class:`~combee_fast.config.ReleaseConfig`, from the online config or an experiment
card's ``failure_cost.canary_policy``, :func:`combee_fast.verify.card.release_config`):

- ``none``: every new version is the incumbent at once (the learner without a gate).
- ``shadow``: for ``shadow_share`` of the submitted rollouts served by the incumbent (chosen by a
  hash of the rollout id), the learner runs the same task again with the candidate's context and
  scores it; the candidate serves nothing. Evidence: the paired reward differences, in submission
  order. Re-runs are counted apart (``shadow_calls``, ``shadow_tokens``); beyond
  ``shadow_in_flight`` at once a sampled task is skipped (counted), so only under that overload
  does the evidence depend on timing.
- ``staged``: the candidate serves the share ``stages[k]`` of requests, chosen by a keyed hash of
  the host's key (sticky: a key on the candidate stays on it as the share grows). Evidence: the
  rewards of rollouts carrying the candidate's version against those carrying the incumbent's,
  counted from the candidate's first reward on (two samples).
- ``hold``: the candidate serves nothing until ``approve(version)`` (promote) or
  ``reject(version)`` (roll back). ``approve``/``reject`` also decide at once under the others.

Decisions, checked after every reward with an anytime-valid interval ``[lower, upper]`` of the
candidate's mean reward minus the incumbent's (:mod:`combee_fast.native.sequential`: a confidence
sequence at level ``alpha``, valid however often it is looked at):

- roll back when ``upper < 0`` (the candidate is worse);
- staged: widen to the next share ``s`` when ``lower > -margin / s`` (serving the candidate to
  ``s`` of the traffic costs it at most ``margin`` of accuracy), promote when the next share is
  1.0 (``lower > -margin``); shadow: promote when ``lower > -margin``.

Guarantee: if each version's rewards are independent draws with a fixed mean (for staged: the
hash split gives both versions the same mix of tasks), then with probability at least
``1 - alpha`` over one candidate's whole release, a candidate at least as good as the incumbent
is never rolled back, a candidate worse by more than ``margin`` is never promoted, and at every
stage ``share * (accuracy lost)`` stays within ``margin``. Rollouts that failed (an ``error``),
carry no version, or carry a version that is neither (a late reward, after a decision the host had
not seen yet) are attributed to their version only, never used as evidence.

Rollback: the incumbent serves again at once. The candidate's number and rendered text are
remembered (the last ``keep_versions``): approving it, or a later version with the same text,
is refused, so a rolled-back version is never published again by accident. Its edits are
dropped, and so is whatever was learned on top of it while it was under release (those batches'
rollouts are not learned again: they taught that version); learning continues from the
incumbent, and a batch that was learning on the abandoned line when the decision came is
discarded (its :class:`~combee_fast.embedded.online.AppliedBatch` says so).

A candidate from outside (:meth:`ReleaseGate.propose`, e.g. an artifact learned offline) takes the
next number, becomes the head (what the learner had learned and not released is dropped, and
learning continues on top of it) and goes through the same policy: at once if no candidate is
under release, otherwise after the current one's decision.

Every decision is a :class:`~combee_fast.embedded.events.ReleaseDecision` with its evidence, and every
``status_every`` rewards (and after each decision) a :class:`~combee_fast.embedded.events.ReleaseStatus`,
which says what the release waits for (:meth:`ReleaseGate.next_decision`: the requests seen
towards the next decision and about how many more it needs, an estimate for an equal candidate).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from combee_fast.config import ReleaseConfig
from combee_fast.embedded.events import EmbeddedEvent, NextDecision, ReleaseDecision, ReleaseStatus, VersionRewards
from combee_fast.embedded.release_plan import ReleaseProgress, next_decision, on_grid
from combee_fast.engine.rng import derive_seed
from combee_fast.errors import ReleaseError
from combee_fast.native import sequential
from combee_fast.protocols.learning import Releasable
from combee_fast.schema import Example, Rollout

STATUS_HORIZON = 25_000
"""The most requests ahead a status's :meth:`ReleaseGate.next_decision` looks (farther: ``more``
None). It runs where rewards are observed, on the host's event loop for the asyncio learner, and
its cost grows with the requests it looks at: at most about 6 ms here with this horizon."""


class Context(msgspec.Struct, frozen=True):
    """What a request should run with: the version's number and its rendered text."""

    version: int
    text: str


class Release(msgspec.Struct, frozen=True):
    """Which versions serve requests now: immutable, swapped whole on every change (the host's
    copy of the gate's state; :meth:`context_for` is all a request needs)."""

    policy: str
    incumbent: Context
    candidate: Context | None = None
    share: float = 0.0
    salt: int = 0

    def context_for(self, key: str) -> Context:
        """The context for the request keyed ``key``: the candidate's for the keys whose hash
        falls in its share, else the incumbent's. Never blocks."""
        if self.candidate is not None and self.share > 0.0 and bucket(key, self.salt) < self.share:
            return self.candidate
        return self.incumbent


def bucket(key: str, salt: int) -> float:
    """Where ``key`` falls in [0, 1) for ``salt``: a keyed hash, the same on every process."""
    digest = hashlib.blake2b(key.encode(), digest_size=8, key=salt.to_bytes(8, "little")).digest()
    return int.from_bytes(digest, "little") / 2**64


class ShadowRun(msgspec.Struct, frozen=True):
    """A task to run again with the candidate's context (``epoch`` names the seed path: the
    candidate and the rollout re-run, so two re-runs of one task are two draws)."""

    candidate: int
    example: Example
    text: str
    epoch: str
    incumbent_reward: float


@dataclass(frozen=True, slots=True)
class _Version:
    number: int
    artifact: Releasable
    text: str
    digest: bytes
    batch: Any  # the AppliedBatch that learned it (None: the start or a proposal)
    source: str  # start, learned or proposed

    @property
    def context(self) -> Context:
        return Context(self.number, self.text)


def _version(number: int, artifact: Releasable, batch: Any, source: str) -> _Version:
    text = artifact.render()
    return _Version(number, artifact, text, hashlib.blake2b(text.encode(), digest_size=16).digest(), batch, source)


class ReleaseGate:
    """The release state machine of one online learner (module docstring). Synchronous and
    single-threaded: the learner's loop calls it; decisions depend only on the order of its
    calls. ``artifact``: the version to start from (a :class:`~combee_fast.protocols.Releasable`).
    ``emit``: where events go; ``on_release``: told each new :class:`Release`; ``queued``: the
    rollouts waiting to be learned (for status events)."""

    def __init__(self, artifact: Releasable, config: ReleaseConfig | None = None, *, seed: int = 0,
                 emit: Callable[[EmbeddedEvent], None] | None = None,
                 on_release: Callable[[Release], None] | None = None, queued: Callable[[], int] = lambda: 0) -> None:
        self.config = config or ReleaseConfig()
        self._seed = seed
        self._emit = emit
        self._on_release = on_release
        self._queued = queued
        self.incumbent = _version(artifact.version, artifact, None, "start")
        self.candidate: _Version | None = None
        self._head = self.incumbent
        self._head_has_candidate = False
        self.lineage = 0  # changes whenever the head is replaced other than by learning on it
        self._next_number = artifact.version + 1
        self._base: tuple[int, Releasable] | None = None  # (lineage, the head renumbered to learn on)
        self._stage = 0
        self._test = sequential.new_state()
        self._open = False  # staged: the candidate's first reward has come
        self._requests = 0  # rewards towards the candidate's decisions since its release (NextDecision.requests)
        self._rejected_numbers: deque[int] = deque(maxlen=self.config.keep_versions)
        self._rejected_texts: OrderedDict[bytes, int] = OrderedDict()
        self._rewards: OrderedDict[int, np.ndarray] = OrderedDict()  # version -> its reward sequence
        self.observed = 0  # rollouts seen by observe
        self.unattributed = 0  # rollouts without a usable version or reward
        self.shadow_calls = self.shadow_tokens = self.shadow_skipped = self._shadow_in_flight = 0
        self.release = self._make_release()

    # ------------------------------------------------------------------ what the host reads

    def context_for(self, key: str) -> Context:
        return self.release.context_for(key)

    @property
    def head(self) -> Releasable:
        """The newest version's artifact (what learning builds on)."""
        return self._head.artifact

    @property
    def head_version(self) -> int:
        """The newest version's number."""
        return self._head.number

    # -------------------------------------------------------------------------- learning

    def base(self) -> tuple[Releasable, int]:
        """What the next batch learns on and the lineage it belongs to: the head, numbered so
        that the version it learns takes the next number."""
        head, number = self._head, self._next_number - 1
        if head.number == number:
            return head.artifact, self.lineage
        if self._base is None or self._base[0] != self.lineage:
            self._base = (self.lineage, head.artifact.renumbered(number))
        return self._base[1], self.lineage

    def learned(self, artifact: Releasable, batch: Any, lineage: int) -> bool:
        """A batch learned ``artifact`` on :meth:`base` of ``lineage``: it becomes the head (and
        the candidate if none is under release); False when that line was abandoned meanwhile."""
        if lineage != self.lineage:
            return False
        number = self._next_number
        if artifact.version != number:
            artifact = artifact.renumbered(number)
        self._next_number += 1
        self._head = _version(number, artifact, batch, "learned")
        if self.candidate is None:
            self._begin(self._head)
        return True

    def propose(self, artifact: Releasable) -> int:
        """``artifact`` (e.g. learned offline) as the next version through the same policy; its number."""
        number = max(self._next_number, artifact.version)  # a proposal numbered beyond ours moves ours on
        self._next_number = number + 1
        self._head = _version(number, artifact.renumbered(number), None, "proposed")
        self.lineage += 1
        self._head_has_candidate = False
        if self.candidate is None:
            self._begin(self._head)
        return self._head.number

    # -------------------------------------------------------------------------- evidence

    def observe(self, rollout: Rollout) -> ShadowRun | None:
        """One submitted rollout's reward, attributed to its version and used as evidence; a
        shadow re-run to start when this one is sampled for it."""
        self.observed += 1
        version, reward = rollout.version, rollout.score
        shadow = None
        if version is None or reward is None or rollout.error is not None or not (
                0.0 <= reward <= 1.0 and 0 <= version < self._next_number):
            self.unattributed += 1
        else:
            sequential.observe(self._sequence(version), 0, reward, self.config.alpha)
            candidate = self.candidate
            if candidate is not None:
                if version == self.incumbent.number or (version == candidate.number and self.config.policy == "staged"):
                    self._requests += 1
                if self.config.policy == "staged":
                    self._staged_evidence(version, reward)
                elif self.config.policy == "shadow" and version == self.incumbent.number:
                    shadow = self._sample_shadow(rollout, reward, candidate)
        if self.observed % self.config.status_every == 0:
            self.emit_status()
        return shadow

    def shadow_done(self, run: ShadowRun, rollout: Rollout | None) -> None:
        """A shadow re-run finished (``rollout`` None: it raised); its cost is counted apart and
        its reward, paired with the incumbent's, is evidence if its candidate is still under release."""
        self._shadow_in_flight -= 1
        if rollout is not None:
            self.shadow_calls += 1
            self.shadow_tokens += rollout.usage.prompt_tokens + rollout.usage.completion_tokens
        candidate = self.candidate
        if (candidate is None or candidate.number != run.candidate or rollout is None or rollout.error is not None
                or rollout.score is None):
            return
        lower, upper = sequential.step(self._test, sequential.PAIRED, rollout.score - run.incumbent_reward,
                                       self.config.alpha, sequential.PAIRED_TEST)
        if upper < 0.0:
            self._rollback("rollback", self._evidence("paired", lower, upper, 0.0))
        elif lower > -self.config.margin:
            self._promote("promote", self._evidence("paired", lower, upper, -self.config.margin))

    # -------------------------------------------------------------------------- by hand

    def approve(self, version: int) -> None:
        """Promote candidate ``version`` now (ReleaseError if it is not the candidate)."""
        self._check_candidate(version, "approve")
        self._promote("approve", self._evidence("manual", *self._interval(), None))

    def reject(self, version: int) -> None:
        """Roll candidate ``version`` back now (ReleaseError if it is not the candidate)."""
        self._check_candidate(version, "reject")
        self._rollback("reject", self._evidence("manual", *self._interval(), None))

    def emit_status(self) -> None:
        """Emit where the release stands (a :class:`~combee_fast.embedded.events.ReleaseStatus`)."""
        if self._emit is None:
            return
        rewards = []
        for version, state in self._rewards.items():
            arm = sequential.interval(state, 0)
            if arm.count:
                rewards.append(VersionRewards(version, arm.count, arm.mean, arm.lower, arm.upper))
        release = self.release
        self._emit(ReleaseStatus(
            self.config.policy, release.incumbent.version, release.candidate.version if release.candidate else None,
            release.share, tuple(rewards), self._queued(), self.shadow_calls, self.shadow_tokens,
            self.next_decision()))

    def next_decision(self) -> NextDecision | None:
        """What the release waits for: its next decision, the requests seen towards it since the
        candidate's release, and about how many more it needs if the rewards from now on are an
        equal candidate's at the mean reward observed so far (both versions' rewards, on
        :func:`~combee_fast.embedded.release_plan.on_grid`), continuing the gate's own statistics
        (:func:`~combee_fast.embedded.release_plan.next_decision`). None without a candidate,
        under ``none`` or ``hold`` (nothing is decided by itself), or before any reward of
        either version to estimate from."""
        candidate = self.candidate
        if candidate is None or self.config.policy not in ("staged", "shadow"):
            return None
        counts = [sequential.interval(self._rewards[v.number], 0) for v in (self.incumbent, candidate)
                  if v.number in self._rewards]
        seen = sum(arm.count for arm in counts)
        if not seen:
            return None
        accuracy = on_grid(sum(arm.mean * arm.count for arm in counts) / seen)
        candidate_rewards = sequential.interval(self._test, sequential.CANDIDATE).count
        progress = ReleaseProgress(self._test, self._requests, candidate_rewards, self._stage, self._open)
        planned = next_decision(self.config, accuracy, progress, horizon=STATUS_HORIZON)
        # shadow: the plan's requests are its pairs over the re-run share, a figure the count seen may pass
        more = None if planned.requests is None else max(planned.requests - self._requests, 0)
        return NextDecision(planned.decision, planned.share, self._requests, more, accuracy)

    # ---------------------------------------------------------------------- the machine

    def _check_candidate(self, version: int, action: str) -> None:
        if version in self._rejected_numbers:
            raise ReleaseError(f"{action}: version {version} was rolled back; it is never published again")
        if self.candidate is None or self.candidate.number != version:
            current = "no candidate is under release" if self.candidate is None else \
                f"the candidate is version {self.candidate.number}"
            raise ReleaseError(f"{action}: version {version} is not the candidate ({current})")

    def _begin(self, version: _Version) -> None:
        """``version`` (the head) enters the release."""
        self._head_has_candidate = True
        if version.digest in self._rejected_texts:
            self.candidate = version
            self._rollback("refuse", {"policy": self.config.policy, "same_text_as": self._rejected_texts[version.digest]})
            return
        self.candidate = version
        if self.config.policy == "none":
            self._promote("promote", {"policy": "none"})
            return
        self._stage, self._open, self._requests = 0, False, 0
        self._test = sequential.new_state()
        self._decide("candidate", {"policy": self.config.policy, "share": self._share(), "source": version.source})

    def _promote(self, decision: str, evidence: dict[str, Any]) -> None:
        candidate = self.candidate
        assert candidate is not None
        previous = self.incumbent
        self.incumbent, self.candidate = candidate, None
        self._head_has_candidate = False
        self._decide(decision, evidence, candidate=candidate.number, incumbent=previous.number)
        if self._head is not self.incumbent:
            self._begin(self._head)

    def _rollback(self, decision: str, evidence: dict[str, Any]) -> None:
        candidate = self.candidate
        assert candidate is not None
        self.candidate = None
        self._rejected_numbers.append(candidate.number)
        self._rejected_texts[candidate.digest] = candidate.number
        while len(self._rejected_texts) > self.config.keep_versions:
            self._rejected_texts.popitem(last=False)
        if self._head_has_candidate:  # everything learned on top of it goes with it
            self._head, self._head_has_candidate = self.incumbent, False
            self.lineage += 1
        self._decide(decision, evidence, candidate=candidate.number)
        if self._head is not self.incumbent:  # a proposal was waiting behind it
            self._begin(self._head)

    def _decide(self, decision: str, evidence: dict[str, Any], *, candidate: int | None = None,
                incumbent: int | None = None) -> None:
        """Publish the new release and emit ``decision`` about ``candidate`` (default: the
        current one) against ``incumbent`` (default: the current one; a promotion names the one
        it replaced)."""
        self.release = self._make_release()
        if candidate is None:
            assert self.candidate is not None, "a decision without a candidate under release names one"
            candidate = self.candidate.number
        if self._emit is not None:
            against = incumbent if incumbent is not None else self.incumbent.number
            self._emit(ReleaseDecision(decision, candidate, against, {**evidence, "observed": self.observed}))
        if self._on_release is not None:
            self._on_release(self.release)
        if decision != "candidate":
            self.emit_status()

    def _make_release(self) -> Release:
        candidate = self.candidate
        if candidate is None:
            return Release(self.config.policy, self.incumbent.context)
        return Release(self.config.policy, self.incumbent.context, candidate.context, self._share(),
                       derive_seed(self._seed, "release", candidate.number))

    def _share(self) -> float:
        return self.config.stages[self._stage] if self.config.policy == "staged" and self.candidate else 0.0

    def _staged_evidence(self, version: int, reward: float) -> None:
        candidate = self.candidate
        assert candidate is not None
        if version == candidate.number:
            self._open = True
            row = sequential.CANDIDATE
        elif version == self.incumbent.number and self._open:
            row = sequential.INCUMBENT
        else:
            return
        lower, upper = sequential.step(self._test, row, reward, self.config.alpha, sequential.TWO_SAMPLE)
        if upper < 0.0:
            self._rollback("rollback", self._evidence("two-sample", lower, upper, 0.0))
            return
        stages, margin = self.config.stages, self.config.margin
        while self._stage + 1 < len(stages) and lower > -margin / stages[self._stage + 1]:
            evidence = self._evidence("two-sample", lower, upper, -margin / stages[self._stage + 1])
            self._stage += 1
            if self._stage == len(stages) - 1:
                self._promote("promote", evidence)
                return
            self._decide("widen", {**evidence, "next_share": stages[self._stage]})

    def _sample_shadow(self, rollout: Rollout, reward: float, candidate: _Version) -> ShadowRun | None:
        if bucket(rollout.id, derive_seed(self._seed, "shadow", candidate.number)) >= self.config.shadow_share:
            return None
        if self._shadow_in_flight >= self.config.shadow_in_flight:
            self.shadow_skipped += 1
            return None
        self._shadow_in_flight += 1
        # the seed path names the rollout re-run: each re-run is its own draw, as each request is
        return ShadowRun(candidate.number, rollout.example, candidate.text, f"shadow-v{candidate.number}:{rollout.id}",
                         reward)

    def _sequence(self, version: int) -> np.ndarray:
        """Version ``version``'s reward sequence (the oldest other than the two in release goes
        when more than ``keep_versions`` are kept)."""
        state = self._rewards.get(version)
        if state is None:
            state = self._rewards[version] = sequential.new_state(1)
            if len(self._rewards) > self.config.keep_versions:
                keep = {self.incumbent.number, self.candidate.number if self.candidate else -1, version}
                oldest = next(v for v in self._rewards if v not in keep)
                del self._rewards[oldest]
        return state

    def _interval(self) -> tuple[float, float]:
        return sequential.difference(self._test, self.config.policy == "shadow")

    def _evidence(self, method: str, lower: float, upper: float, threshold: float | None) -> dict[str, Any]:
        paired = method == "paired"
        evidence: dict[str, Any] = {
            "policy": self.config.policy, "method": method, "share": self._share(), "lower": lower, "upper": upper,
            "threshold": threshold, "margin": self.config.margin, "alpha": self.config.alpha,
        }
        if paired:
            pairs = sequential.interval(self._test, sequential.PAIRED)
            evidence.update(pairs=pairs.count, mean_difference=2 * pairs.mean - 1 if pairs.count else None)
        else:
            for name, row in (("candidate", sequential.CANDIDATE), ("incumbent", sequential.INCUMBENT)):
                arm = sequential.interval(self._test, row)
                evidence[f"{name}_rewards"] = arm.count
                evidence[f"{name}_mean"] = arm.mean if arm.count else None
        return evidence
