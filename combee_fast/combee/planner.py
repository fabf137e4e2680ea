"""Batch shape re-planned every iteration from live statistics (``--batch-size auto``).

The paper's rule (:mod:`combee_fast.combee.controller`) profiles trial batch sizes and fits one
curve of epoch time. :class:`ShapePlanner` pays for no trial: every step is a real step, and
before each one it re-plans the batch size *and* the curators' group shape from what the last
steps measured (:class:`StepSignals`, built by ``combee_fast.run.step_signals`` from usage
records only, so a replayed run decides the same):

* **Start.** The start-up probe's batching curve (:meth:`ShapePlanner.seed`,
  :mod:`combee_fast.endpoint.batching`), measured with the rollout role's own prompts: its calls
  join the latency fit, and the first step is planned on the waves the probe implies instead of
  the cold ``1/start_steps`` of the queue. A step's chains run in waves of the level of the
  endpoint's peak tokens/s (``k``), and its curate-and-reduce tail waits for the map, once per
  step: taken as ``start_tail_waves`` waves until a step measures it, the queue of ``R`` items
  takes ``ceil(R / b) * (ceil(b / k) + start_tail_waves)`` waves at batch ``b``, and the first
  step is the smallest ``b`` (at least ``k``, at most ``growth`` times the largest level probed)
  within ``time_slack`` of the fewest. A short queue is one step (its tail paid once, its slots
  refilled as chains finish); a long one starts at a few waves and is re-planned from what that
  step measured. The curve is recorded with the run, so a replayed or resumed run starts the same.
* **No-go.** When the hardware cannot make parallelism pay, the run says so and runs one item a
  step, the sequential schedule, instead of running slower: a probe whose requests sent at once
  generate no more than ``1 + RISE`` times one request's tokens/s at every level (a CPU server whose
  prompts are as compute-bound as its decoding) leaves nothing a batch could gain. The decision's
  reason begins with ``no-go:`` (``controller.jsonl``, the ledger's batch reason) and holds for
  the rest of the run: steps of one item measure nothing that would lift it.
* **Queue.** ``remaining`` items of the epoch (offline) or waiting rollouts (online).
* **Hardware class.** The endpoint's latency against requests in flight
  (:class:`~combee_fast.combee.latency_curve.LatencyCurve`). A step at batch ``b`` is predicted
  to take ``S(b) = c * depth * L(rho * b) + tail``: ``depth`` calls on the slowest chain, each at
  the in-flight level a batch of ``b`` produces (``rho * b``), plus the curate-and-reduce tail;
  ``c`` anchors the prediction to the last measured map time. The epoch's remaining time is
  ``T(b) = ceil(remaining / b) * S(b)``; the plan is the smallest ``b`` within ``time_slack`` of
  the fastest (more, smaller steps learn from each other). Batches beyond ``growth`` times the
  largest in-flight level measured are not trusted: the curve there is extrapolation.
* **Prompt size.** The generator's prompt carries the playbook: prefill cost grows with it.
* **Quality.** Retention below ``retention_floor`` makes curators read fewer records
  (``max_group`` halves, down to ``min_group``; at the floor ``p`` rises); a validation drop
  caps the batch at ``shrink_factor`` times the one that produced it. ``recover_after`` healthy
  steps undo one notch.
* **Diversity.** When most of a step's lessons, or of the edits its curators proposed, are
  near-duplicates of each other (distinct fraction below ``collapse_below``), diversity is
  injected before any growth: first the
  reflections' sampling temperature rises to ``diversity_temperature``, then the shuffle takes a
  new seed path. The batch does not grow while collapsed.
* **Rewards.** Mean, variance and the Beta posterior of success of the batch's first attempts
  (native kernels) are logged; while the lower bound of the success rate stays below
  ``learned_success`` the run is still learning and the quality cap holds.

Every decision keeps its inputs and reason (``controller.jsonl``); the history is bounded.
"""

from __future__ import annotations

import math
from collections import deque

import msgspec

from combee_fast.combee.latency_curve import CallSample, CurveState, LatencyCurve, fit_line
from combee_fast.config import CombeeConfig, ControllerConfig
from combee_fast.endpoint.batching import RISE, BatchingCurve
from combee_fast.engine.kept import capture, restore_into


class StepSignals(msgspec.Struct, frozen=True):
    """What one finished step measured. ``seconds``: its critical path; ``map_seconds``: the
    slowest chain; ``chain_calls``: calls on that chain; ``calls``: the map's calls with their
    in-flight level; ``prefill_share``: fraction of those calls whose prompt carries the playbook."""

    batch_size: int
    seconds: float
    map_seconds: float
    chain_calls: float
    calls: tuple[CallSample, ...]
    playbook_tokens: int
    prefill_share: float = 0.5
    retention: float | None = None
    validation: float | None = None
    insights: int = 0
    distinct_insights: int = 0
    edits: int = 0
    distinct_edits: int = 0
    reward_mean: float | None = None
    reward_variance: float | None = None
    success_lower: float | None = None
    success_upper: float | None = None


class ShapeDecision(msgspec.Struct, frozen=True):
    """One step's shape: batch size, records per curator, copies per record, and any remedy."""

    batch_size: int
    max_group: int | None
    duplicates: int
    reason: str
    inputs: dict[str, float]
    remedy: str | None = None
    reflect_temperature: float | None = None
    shuffle_salt: int = 0


class PlannerState(msgspec.Struct, frozen=True):
    """What a checkpoint keeps of a :class:`ShapePlanner` (everything not derived from its configuration)."""

    curve: CurveState
    decisions: tuple[ShapeDecision, ...]
    max_group: int
    duplicates: int
    reflect_temperature: float | None
    shuffle_salt: int
    _last: StepSignals | None
    _anchor: float
    _maps: tuple[tuple[int, float], ...]
    _tail: float | None
    _cap: int
    _healthy: int
    _best_validation: float
    _problems: tuple[str, ...]
    _collapsed: int
    _collapse_why: str
    _predicted_map: float | None
    _planned_batch: int
    _surprise: float | None
    _probe: BatchingCurve | None = None
    _no_go: str | None = None


NO_GO = "no-go"
"""How a decision's reason begins when parallelism cannot pay on the endpoint (module docstring)."""


def no_gain(probe: BatchingCurve) -> str | None:
    """Why ``probe`` leaves a batch nothing to gain (its levels above one generate under ``1 +
    RISE`` times one request's tokens/s), or None when it shows a gain or measured one level only."""
    if len(probe.points) < 2 or probe.gain >= 1 + RISE:
        return None
    rates = ", ".join(f"{p.tokens_per_s:.1f} at {p.concurrency}" for p in probe.points)
    return (f"{NO_GO}: the start-up probe's requests, shaped as the rollout role's, generated {rates} tokens/s: "
            f"no level reached {1 + RISE:.2f}x one request's (gain {probe.gain:.2f}), so no batch can beat one item "
            "at a time here; every step takes one item (the sequential schedule)")


class ShapePlanner:
    """Decides each step's :class:`ShapeDecision`; call :meth:`decide`, run the step, :meth:`record`.
    ``in_flight_cap``: the most requests the rollout role's endpoint takes at once (its client's
    admission limit: a server's slots); a batch whose chains would put more in flight runs them in
    waves, and its map is predicted so."""

    def __init__(self, config: ControllerConfig, combee: CombeeConfig, *, upper: int,
                 in_flight_cap: float = math.inf) -> None:
        self.config = config
        self.in_flight_cap = max(1.0, in_flight_cap)
        self.lower = config.min_batch
        self.upper = max(self.lower, min(config.max_batch, upper))
        self.curve = LatencyCurve(config.history, config.recency_decay**2)
        self.decisions: deque[ShapeDecision] = deque(maxlen=config.history)
        self.max_group = config.group_records if combee.max_group is None else min(combee.max_group, config.group_records)
        self.duplicates = combee.duplicates
        self.reflect_temperature: float | None = None
        self.shuffle_salt = 0
        self._last: StepSignals | None = None
        self._anchor = 1.0  # measured / predicted map seconds (EMA)
        self._maps: deque[tuple[int, float]] = deque(maxlen=8)  # (batch, map seconds) since the endpoint last changed
        self._tail: float | None = None  # curate + reduce seconds after the map (EMA)
        self._cap = self.upper
        self._healthy = 0
        self._best_validation = -math.inf
        self._problems: list[str] = []
        self._collapsed = 0  # consecutive collapsed steps
        self._collapse_why = ""
        self._predicted_map: float | None = None  # map seconds predicted for the planned batch
        self._planned_batch = 0
        self._surprise: float | None = None  # measured / predicted map seconds of a surprising step
        self._probe: BatchingCurve | None = None  # the start-up probe's curve (None: not probed)
        self._no_go: str | None = None  # why parallelism cannot pay here (None: it may)

    def seed(self, probe: BatchingCurve) -> None:
        """Start from the start-up probe's curve: each of its levels joins the latency fit as
        ``concurrency`` calls at that in-flight level, and the first decision (nothing measured
        yet) is planned in waves of its best concurrency (:meth:`_start`). A curve without points
        changes nothing (cold start)."""
        if not probe.points:
            return
        self.curve.add(CallSample(float(p.concurrency), p.prompt_tokens, p.completion_tokens, p.latency_s)
                       for p in probe.points for _ in range(p.concurrency))
        self._probe = probe
        self._no_go = no_gain(probe)

    @property
    def no_go(self) -> str | None:
        """Why parallelism cannot pay on the endpoint (the no-go's reason), or None."""
        return self._no_go

    def state(self) -> PlannerState:
        """What the planner learned and decided so far, for a checkpoint."""
        return capture(self, PlannerState, curve=self.curve.state())

    def restore(self, state: PlannerState) -> None:
        """Continue from :meth:`state` (on a planner of the same configuration)."""
        restore_into(self, state, skip=("curve",))
        self.curve.restore(state.curve)

    # -- measuring -----------------------------------------------------------------------------

    def record(self, s: StepSignals) -> None:
        """Learn from a finished step. A step whose map took ``surprise`` times more (or less) than
        predicted means the endpoint changed: what was learned of its curve is dropped."""
        measuring, self._surprise = self._surprise is not None, None  # the step after a surprise measures
        predicted, self._predicted_map = self._predicted_map, None
        if predicted and s.map_seconds > 0 and s.batch_size == self._planned_batch and not measuring:
            ratio = s.map_seconds / predicted
            if not 1 / self.config.surprise <= ratio <= self.config.surprise:
                self._surprise = ratio
                self.curve.reset()
                self._maps.clear()
                self._tail = None
        fresh = self._surprise is not None or self._last is None or measuring
        self.curve.add(s.calls)
        if s.map_seconds > 0:
            self._maps.append((s.batch_size, s.map_seconds))
        decay = self.config.recency_decay
        tail = max(s.seconds - s.map_seconds, 0.0)
        self._tail = tail if self._tail is None else decay * self._tail + (1 - decay) * tail
        if self.curve.coef is not None and s.calls and s.map_seconds > 0:
            model = self._map_model(s, s.batch_size)
            if model > 0:
                ratio = s.map_seconds / model
                self._anchor = ratio if fresh else decay * self._anchor + (1 - decay) * ratio
        self._last = s
        self._guard_quality(s)
        self._watch_diversity(s)

    def _guard_quality(self, s: StepSignals) -> None:
        config = self.config
        problems = []
        if s.retention is not None and s.retention < config.retention_floor:
            problems.append(f"retention {s.retention:.3g} < floor {config.retention_floor:.3g}")
            if self.max_group is not None and self.max_group > config.min_group:
                self.max_group = max(config.min_group, self.max_group // 2)
            elif self.duplicates < config.max_duplicates:
                self.duplicates += 1
        if s.validation is not None:
            if s.validation < self._best_validation - config.validation_drop:
                problems.append(f"validation {s.validation:.3g} fell more than {config.validation_drop:.3g} "
                                f"below best {self._best_validation:.3g}")
                self._cap = max(self.lower, min(self._cap, math.floor(s.batch_size * config.shrink_factor)))
            self._best_validation = max(self._best_validation, s.validation)
        self._problems = problems
        learning = s.success_lower is None or s.success_lower < config.learned_success
        if problems:
            self._healthy = 0
        else:
            self._healthy += 1
            if self._healthy >= config.recover_after:
                self._healthy = 0
                self._cap = self.upper if not learning else min(self.upper, math.ceil(self._cap / config.shrink_factor))
                if self.max_group is not None and self.max_group < config.group_records:
                    self.max_group = min(config.group_records, self.max_group * 2)

    def _watch_diversity(self, s: StepSignals) -> None:
        self._collapse_why = ", ".join(
            f"{distinct} distinct {what} among {total}"
            for what, distinct, total in (("lessons", s.distinct_insights, s.insights),
                                          ("proposed edits", s.distinct_edits, s.edits))
            if total >= self.config.collapse_min_texts and distinct / total < self.config.collapse_below
        )
        self._collapsed = self._collapsed + 1 if self._collapse_why else 0

    # -- deciding ------------------------------------------------------------------------------

    def decide(self, remaining: int) -> ShapeDecision:
        """The shape of the next step, with ``remaining`` items waiting (>= 1)."""
        remaining = max(1, remaining)
        inputs = self._inputs(remaining)
        hi = max(self.lower, min(self.upper, self._cap, remaining))
        remedy, why_remedy = self._remedy(inputs)
        s = self._last
        if self._no_go is not None:
            batch, reason = self.lower, self._no_go
            if s is not None and self.curve.coef is not None:
                predicted = inputs["predicted_step_s"] = self._step_seconds(s, batch)
                self._predicted_map = predicted - (self._tail or 0.0)
        elif s is None and self._probe is not None:
            batch, reason = self._start(self._probe, remaining, hi, inputs)
        elif s is None or self.curve.coef is None:
            first = math.ceil(remaining / self.config.start_steps)
            batch = max(self.lower, min(hi, first))
            reason = (f"start: nothing measured yet; 1/{self.config.start_steps} of the {remaining} waiting items "
                      "(a real step, no trial batch)")
        else:
            trust = max(self.lower, math.floor(self.config.growth * max(self.curve.max_in_flight, s.batch_size)))
            capacity = self.capacity(s)
            full = self.upper
            if math.isfinite(capacity):
                inputs["capacity_in_flight"] = capacity
                full = max(self.lower, min(self.upper, math.floor(capacity * s.batch_size / max(_mean_in_flight(s), 1.0))))
            hi = min(hi, trust, full)
            if self._collapsed:
                hi = min(hi, max(self.lower, s.batch_size))
            batch, best_b, best_t = self._plan(s, remaining, hi)
            knee = self.knee(min(self.upper, self._cap, trust, full))
            inputs.update(bs_star=float(knee), predicted_remaining_s=self._remaining_seconds(s, remaining, batch),
                          fastest_batch=float(best_b), fastest_remaining_s=best_t, trust_bound=float(trust),
                          step_s_at_bs_star=self._step_seconds(s, knee))
            reason = self._reason(s, batch, best_b, hi, trust, full)
            if self._surprise is not None and self._surprise > 1:
                batch = max(self.lower, min(batch, math.floor(s.batch_size * self.config.shrink_factor)))
                inputs["surprise"] = self._surprise
                reason = (f"surprise: the last step's map took {self._surprise:.1f}x its predicted time at the same "
                          f"batch size, so the endpoint changed; its curve is re-learned from that step on and the "
                          f"batch shrinks to {batch} to measure it at a second load; model: " + reason)
            predicted = inputs["predicted_step_s"] = self._step_seconds(s, batch)
            self._predicted_map = predicted - (self._tail or 0.0)
        self._planned_batch = batch
        if self._problems:
            reason += "; quality: " + "; ".join(self._problems)
        if remedy is not None:
            reason += f"; diversity: {why_remedy}"
        decision = ShapeDecision(batch, self.max_group, self.duplicates, reason, inputs, remedy,
                                 self.reflect_temperature, self.shuffle_salt)
        self.decisions.append(decision)
        return decision

    def _start(self, probe: BatchingCurve, remaining: int, hi: int, inputs: dict[str, float]) -> tuple[int, str]:
        """The first step's size from the probe alone, and why (module docstring, Start); its
        numbers go into ``inputs``."""
        width = max(1, int(min(probe.best_concurrency, self.in_flight_cap)))
        top = max(self.lower, min(hi, math.floor(self.config.growth * self.curve.max_in_flight)))
        tail = self.config.start_tail_waves
        waves = {b: math.ceil(remaining / b) * (math.ceil(b / width) + tail)
                 for b in range(max(self.lower, min(top, width)), top + 1)}
        batch, _, fewest = self._near_least(waves)
        steps, per_step = math.ceil(remaining / batch), math.ceil(batch / width)
        inputs.update(probe_best_concurrency=float(probe.best_concurrency), probe_gain=probe.gain,
                      start_width=float(width), start_tail_waves=tail, start_waves=waves[batch],
                      fewest_waves=fewest, trust_bound=float(top))
        reason = (f"start: the start-up probe measured the endpoint's generated tokens/s peaking at "
                  f"{probe.best_concurrency} requests at once ({probe.gain:.2f}x one request's); in waves of "
                  f"{width} chains and a tail of {tail:g} wave per step, {batch} items/step ({steps} step(s) of "
                  f"{per_step} wave(s)) is within {self.config.time_slack:.0%} of the fewest waves for the "
                  f"{remaining} waiting")
        return batch, reason

    def _plan(self, s: StepSignals, remaining: int, hi: int) -> tuple[int, int, float]:
        return self._near_least({b: self._remaining_seconds(s, remaining, b) for b in range(self.lower, hi + 1)})

    def _near_least(self, costs: dict[int, float]) -> tuple[int, int, float]:
        """The planner's choice among batch sizes: the smallest whose cost is within ``time_slack``
        of the least, the size of the least (the smallest on a tie) and the least cost."""
        best = min(costs, key=lambda b: (costs[b], b))
        least = costs[best]
        return min(b for b, c in costs.items() if c <= (1 + self.config.time_slack) * least), best, least

    def knee(self, hi: int) -> int:
        """``bs*`` for a long queue: the smallest batch whose predicted seconds per item are within
        ``time_slack`` of the best up to ``hi``. Without a load effect it is ``hi``; a saturating
        endpoint (calls slower in proportion to the load) brings it down."""
        s = self._last
        if s is None or self.curve.coef is None:
            return hi
        per_item = {b: self._step_seconds(s, b) / b for b in range(self.lower, max(self.lower, hi) + 1)}
        return self._near_least(per_item)[0]

    def capacity(self, s: StepSignals) -> float:
        """Requests in flight at which the endpoint's throughput ``k / L(k)`` reaches ``saturation``
        of its ceiling: ``inf`` when calls do not slow with load (the throughput keeps growing)."""
        modelled = self._call_seconds(s, 1.0, s.playbook_tokens)
        slope = self._call_seconds(s, 2.0, s.playbook_tokens) - modelled  # seconds per extra request in flight
        alone = max(modelled, self.curve.fastest_per_token() * _mean_completion(s))
        if slope <= 1e-12 * max(alone, 1e-9):
            return math.inf
        saturation = self.config.saturation
        return 1.0 + saturation / (1.0 - saturation) * alone / slope

    def _reason(self, s: StepSignals, batch: int, best_b: int, hi: int, trust: int, full: int) -> str:
        rho = _mean_in_flight(s) / max(s.batch_size, 1)
        load = self.curve.load_factor(max(1.0, rho * batch), _mean_prompt(s), _mean_completion(s))
        why = "replan" if batch != s.batch_size else "hold"
        parts = [f"{why}: {batch} items/step is within {self.config.time_slack:.0%} of the fastest predicted "
                 f"remaining time (batch {best_b}); calls at this load are {load:.2f}x their unloaded latency"]
        if hi == full < self.upper and batch == hi:
            parts.append(f"bounded by the endpoint's measured capacity: throughput reaches "
                         f"{self.config.saturation:.0%} of its ceiling at ~{self.capacity(s):.0f} requests in flight")
        elif hi == trust and batch == hi:
            parts.append(f"bounded at {self.config.growth:g}x the largest in-flight level measured")
        if hi == self._cap and self._cap < self.upper and batch == hi:
            parts.append(f"capped at {self._cap} by the quality guard")
        return "; ".join(parts)

    def _remedy(self, inputs: dict[str, float]) -> tuple[str | None, str]:
        if not self._collapsed:
            return None, ""
        inputs["collapsed_steps"] = float(self._collapsed)
        why = f"{self._collapse_why} (below {self.config.collapse_below:.0%})"
        if self.reflect_temperature is None or self.reflect_temperature < self.config.diversity_temperature:
            self.reflect_temperature = self.config.diversity_temperature
            return "temperature", f"{why}: reflections now sampled at temperature {self.reflect_temperature:g}"
        self.shuffle_salt += 1
        return "reshuffle", f"{why} even at temperature {self.reflect_temperature:g}: shuffle on seed path {self.shuffle_salt}"

    # -- the model -----------------------------------------------------------------------------

    def _call_seconds(self, s: StepSignals, in_flight: float, playbook_tokens: int) -> float:
        prompt = _mean_prompt(s) + s.prefill_share * max(playbook_tokens - s.playbook_tokens, 0)
        return self.curve.predict(in_flight, prompt, _mean_completion(s))

    def _map_line(self) -> tuple[float, float] | None:
        """Map seconds against batch size over the steps since the endpoint last changed."""
        return fit_line(self._maps, self.config.recency_decay)

    def _step_seconds(self, s: StepSignals, batch: int) -> float:
        line = self._map_line()
        if line is not None:  # measured at two batch sizes: the steps themselves say how map time grows
            return line[0] + line[1] * batch + (self._tail or 0.0)
        return self._anchor * self._map_model(s, batch) + (self._tail or 0.0)

    def _map_model(self, s: StepSignals, batch: int) -> float:
        """The curve's map seconds for a step of ``batch`` items shaped as ``s`` was: the calls one
        after another on the longest chain, or, past the endpoint's ``in_flight_cap``, the batch's
        calls spread over its slots, whichever is longer; each call at the in-flight level the batch
        reaches (at most the cap). One model for the anchor a step measures and the steps it predicts."""
        rho = _mean_in_flight(s) / max(s.batch_size, 1)
        in_flight = min(max(1.0, rho * batch), self.in_flight_cap)
        calls_per_item = len(s.calls) / max(s.batch_size, 1)
        calls_in_line = max(s.chain_calls, batch * calls_per_item / self.in_flight_cap)
        return calls_in_line * self._call_seconds(s, in_flight, s.playbook_tokens)

    def _remaining_seconds(self, s: StepSignals, remaining: int, batch: int) -> float:
        return math.ceil(remaining / batch) * self._step_seconds(s, batch)

    def _inputs(self, remaining: int) -> dict[str, float]:
        inputs: dict[str, float] = {"remaining": float(remaining), "lower": float(self.lower),
                                    "upper": float(self.upper), "cap": float(self._cap)}
        s = self._last
        if s is None:
            return inputs
        inputs.update(last_batch=float(s.batch_size), last_seconds=s.seconds, last_map_seconds=s.map_seconds,
                      chain_calls=s.chain_calls, playbook_tokens=float(s.playbook_tokens),
                      insights=float(s.insights), distinct_insights=float(s.distinct_insights),
                      edits=float(s.edits), distinct_edits=float(s.distinct_edits),
                      tail_s=self._tail or 0.0, anchor=self._anchor)
        for name in ("retention", "validation", "reward_mean", "reward_variance", "success_lower", "success_upper"):
            value = getattr(s, name)
            if value is not None:
                inputs[name] = float(value)
        inputs.update(self.curve.summary())
        line = self._map_line()
        if line is not None:
            inputs.update(map_line_s=line[0], map_line_s_per_item=line[1])
        return inputs


def _mean_in_flight(s: StepSignals) -> float:
    return sum(c.in_flight for c in s.calls) / len(s.calls) if s.calls else float(s.batch_size)


def _mean_completion(s: StepSignals) -> float:
    return sum(c.completion_tokens for c in s.calls) / len(s.calls) if s.calls else 0.0


def _mean_prompt(s: StepSignals) -> float:
    return sum(c.prompt_tokens for c in s.calls) / len(s.calls) if s.calls else 0.0
