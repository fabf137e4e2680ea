"""Dynamic batch size: the paper's profile-and-fit rule, re-planned live, with a quality guard.

The paper (Combee, section on dynamic batch size) runs one trial iteration per candidate
batch size, turns each into an epoch time ``T(bs) = iteration_seconds * N / bs``, fits
``T(bs) = A * bs**-alpha`` by least squares in log space, sets ``tau`` to ``tau_fraction`` of
the steepest slope ``|dT/dbs|`` among the candidates and picks
``bs* = (alpha * A / tau) ** (1 / (alpha + 1))``: the batch size where one more sample per
batch stops saving at least ``tau`` seconds per epoch.

:class:`BatchSizeController` does that, then keeps going:

* **Live re-planning.** After profiling, every measured iteration updates the scale ``A``
  (a recency-weighted mean of ``log T + alpha * log bs``; a measurement one iteration older
  weighs ``recency_decay`` times as much), so a slower or faster endpoint moves ``bs*`` within
  a few iterations. ``alpha`` and ``tau`` stay as profiled: ``tau`` is the marginal saving the
  run decided is worth a larger batch, in seconds per sample.
* **Quality guard.** When an iteration's retention is below ``retention_floor``, or its
  validation score falls more than ``validation_drop`` below the best seen, the batch is capped
  at ``shrink_factor`` times the batch that produced it. After ``recover_after`` consecutive
  healthy iterations the cap is lifted one step (divided by ``shrink_factor``).
* **Bounds.** Every decision lies in ``[min_batch, min(max_batch, capacity, max_fan_in)]``;
  candidates outside are clamped (and profiled once). Profiling runs every candidate once
  whatever the quality cap; the cap applies from the first plan on.
* **Hysteresis.** A re-plan changes the batch only if it moves by more than ``hysteresis``
  (relative); shrinking and bounds are never delayed.

The latest decisions (:data:`~combee_fast.config.HISTORY_KEPT`) are kept in
:attr:`BatchSizeController.decisions` with their reasons and inputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec

from combee_fast.config import HISTORY_KEPT, ControllerConfig
from combee_fast.engine.kept import capture, restore_into
from combee_fast.errors import ConfigError


class IterationMeasurement(msgspec.Struct, frozen=True):
    """One finished iteration: its batch size, wall seconds, and the epoch size ``N``.

    ``retention`` (fraction of distinct insights kept, see ``native.retention``) and
    ``validation`` (any higher-is-better quality proxy) feed the quality guard when given.
    """

    batch_size: int
    seconds: float
    samples_in_epoch: int
    retention: float | None = None
    validation: float | None = None

    @property
    def epoch_seconds(self) -> float:
        """The epoch time this iteration implies: ``seconds * samples_in_epoch / batch_size``."""
        return self.seconds * self.samples_in_epoch / self.batch_size


class Decision(msgspec.Struct, frozen=True):
    """A batch size, why it was chosen, and the numbers it was chosen from."""

    batch_size: int
    reason: str
    inputs: dict[str, float]


class PowerLawFit(msgspec.Struct, frozen=True):
    """The profiled curve ``T(bs) = A * bs**-alpha`` and threshold ``tau``, kept as logarithms
    so that extreme profiles (two close candidates, wild timings) cannot overflow."""

    log_A: float
    alpha: float
    log_tau: float

    @property
    def A(self) -> float:
        return _exp(self.log_A)

    @property
    def tau(self) -> float:
        return _exp(self.log_tau)


def fit_power_law(
    batch_sizes: Sequence[float], epoch_times: Sequence[float], weights: Sequence[float] | None = None
) -> tuple[float, float]:
    """``(A, alpha)`` of ``T = A * bs**-alpha`` by (weighted) least squares on ``log T``.

    Needs at least two distinct batch sizes and positive values.
    """
    log_A, alpha = fit_log_power_law(batch_sizes, epoch_times, weights)
    if log_A > _MAX_LOG:
        raise ValueError(f"fit_power_law: A = exp({log_A:.4g}) overflows (alpha = {alpha:.4g})")
    return math.exp(log_A), alpha


def fit_log_power_law(
    batch_sizes: Sequence[float], epoch_times: Sequence[float], weights: Sequence[float] | None = None
) -> tuple[float, float]:
    """``(log A, alpha)``: :func:`fit_power_law` without leaving log space."""
    if len(batch_sizes) != len(epoch_times):
        raise ValueError(f"fit_power_law: {len(batch_sizes)} batch sizes but {len(epoch_times)} times")
    if len(set(batch_sizes)) < 2:
        raise ValueError("fit_power_law: needs at least two distinct batch sizes")
    if min(batch_sizes) <= 0 or min(epoch_times) <= 0:
        raise ValueError("fit_power_law: batch sizes and epoch times must be > 0")
    w = [1.0] * len(batch_sizes) if weights is None else list(weights)
    xs = [math.log(b) for b in batch_sizes]
    ys = [math.log(t) for t in epoch_times]
    total = math.fsum(w)
    x_mean = math.fsum(wi * x for wi, x in zip(w, xs)) / total
    y_mean = math.fsum(wi * y for wi, y in zip(w, ys)) / total
    sxx = math.fsum(wi * (x - x_mean) ** 2 for wi, x in zip(w, xs))
    sxy = math.fsum(wi * (x - x_mean) * (y - y_mean) for wi, x, y in zip(w, xs, ys))
    slope = sxy / sxx
    return y_mean - slope * x_mean, -slope


def optimal_batch_size(A: float, alpha: float, tau: float) -> float:
    """``(alpha * A / tau) ** (1 / (alpha + 1))``: where ``|dT/dbs|`` falls to ``tau``."""
    if not (A > 0 and alpha > 0 and tau > 0):
        raise ValueError(f"optimal_batch_size: needs A, alpha, tau > 0, got {A}, {alpha}, {tau}")
    return _exp(_log_optimal_batch_size(math.log(A), alpha, math.log(tau)))


def steepest_slope(A: float, alpha: float, batch_sizes: Sequence[float]) -> float:
    """``max |dT/dbs| = alpha * A * bs**-(alpha + 1)`` over ``batch_sizes`` (``alpha > 0``)."""
    return _exp(_log_steepest_slope(math.log(A), alpha, batch_sizes))


_MAX_LOG = math.log(1.7e308)


def _exp(x: float) -> float:
    return math.exp(x) if x < _MAX_LOG else math.inf


def _log_optimal_batch_size(log_A: float, alpha: float, log_tau: float) -> float:
    return (math.log(alpha) + log_A - log_tau) / (alpha + 1.0)


def _log_steepest_slope(log_A: float, alpha: float, batch_sizes: Sequence[float]) -> float:
    # |dT/dbs| falls with bs when alpha > 0: the steepest is at the smallest batch size.
    return math.log(alpha) + log_A - (alpha + 1.0) * math.log(min(batch_sizes))


class ControllerState(msgspec.Struct, frozen=True):
    """What a checkpoint keeps of a :class:`BatchSizeController` (everything not derived from its configuration)."""

    decisions: tuple[Decision, ...]
    measurements: tuple[IterationMeasurement, ...]
    fit: PowerLawFit | None
    _profiled: int
    _pending: Decision | None
    _current: int | None
    _cap: int
    _healthy_streak: int
    _best_validation: float
    _quality_problem: str | None
    _level_sum: float
    _level_weight: float


class BatchSizeController:
    """Chooses each iteration's batch size; call :meth:`next_batch_size`, run, :meth:`record`.

    ``capacity`` (the endpoint's running-sequence capacity) and ``max_fan_in`` (the largest
    batch the reduce stage accepts, derived by the caller from its duplication factor and group
    count) lower the upper bound when given.
    """

    def __init__(self, config: ControllerConfig, *, capacity: int | None = None, max_fan_in: int | None = None) -> None:
        self.config = config
        self.lower = config.min_batch
        self.upper = min(b for b in (config.max_batch, capacity, max_fan_in) if b is not None)
        if self.upper < self.lower:
            raise ConfigError(
                f"no batch size fits: min_batch {config.min_batch} > bound {self.upper} "
                f"(max_batch {config.max_batch}, capacity {capacity}, max_fan_in {max_fan_in})"
            )
        self.profile = sorted({self._clamp(c, self.upper) for c in config.candidates})
        self.decisions: list[Decision] = []
        self.measurements: list[IterationMeasurement] = []
        self.fit: PowerLawFit | None = None
        self._profiled = 0
        self._pending: Decision | None = None
        self._current: int | None = None
        self._cap = self.upper
        self._healthy_streak = 0
        self._best_validation = -math.inf
        self._quality_problem: str | None = None
        self._level_sum = 0.0  # recency-weighted sums for log A
        self._level_weight = 0.0

    def state(self) -> ControllerState:
        """What the controller measured, fitted and decided so far, for a checkpoint."""
        return capture(self, ControllerState)

    def restore(self, state: ControllerState) -> None:
        """Continue from :meth:`state` (on a controller of the same configuration and bounds)."""
        restore_into(self, state)

    @property
    def profiling(self) -> bool:
        """True while candidates remain to be profiled."""
        return self._profiled < len(self.profile)

    def next_batch_size(self) -> Decision:
        """The batch size for the next iteration (the same decision until :meth:`record`)."""
        if self._pending is None:
            self._pending = self._decide()
            self.decisions.append(self._pending)
            del self.decisions[:-HISTORY_KEPT]  # the latest only (controller.jsonl holds all)
        return self._pending

    def record(self, m: IterationMeasurement) -> None:
        """Learn from a finished iteration (normally one run at the last decided batch size)."""
        _check_measurement(m)
        self.measurements.append(m)
        del self.measurements[:-HISTORY_KEPT]  # the fit needs only the profile's, the level the latest
        self._pending = None
        self._guard_quality(m)
        if self.profiling:
            self._profiled += 1
            if not self.profiling and len({m.batch_size for m in self.measurements}) >= 2:
                self._fit_profile()
        elif self.fit is not None:
            self._add_to_level(m)

    def _decide(self) -> Decision:
        ceiling = min(self.upper, self._cap)
        inputs: dict[str, float] = {"lower": self.lower, "upper": self.upper, "cap": self._cap}
        if self._current is not None:
            inputs["current"] = self._current
        if self.measurements:
            last = self.measurements[-1]
            inputs["last_epoch_seconds"] = last.epoch_seconds
            if last.retention is not None:
                inputs["retention"] = last.retention
            if last.validation is not None:
                inputs["validation"] = last.validation
        if self.profiling:
            return self._choose(self.profile[self._profiled], "profile", inputs, commit=False)
        if self.fit is None:
            reason = "fixed: fewer than two distinct batch sizes were measured, nothing to fit"
            return self._choose(self._clamp(self.profile[0], ceiling), reason, inputs)
        log_A = self._level_sum / self._level_weight
        inputs.update(A=_exp(log_A), log_A=log_A, alpha=self.fit.alpha, tau=self.fit.tau)
        if self.fit.alpha > 0:
            log_bs_star = _log_optimal_batch_size(log_A, self.fit.alpha, self.fit.log_tau)
            inputs["bs_star"] = _exp(log_bs_star)
            target = self._clamp(round(min(inputs["bs_star"], self.upper)), ceiling)
        else:  # epoch time does not fall with batch size: bigger batches buy nothing
            target = self._clamp(self.profile[0], ceiling)
        problem, self._quality_problem = self._quality_problem, None
        current = self._current
        if problem is not None and current is not None:
            return self._choose(min(target, self._clamp(current, ceiling)), f"shrink: {problem}", inputs)
        if current is None:
            return self._choose(target, "plan" if self.fit.alpha > 0 else "plan: no speed-up from larger batches", inputs)
        if current > ceiling:
            return self._choose(ceiling, "bound", inputs)
        if abs(target - current) <= self.config.hysteresis * current:
            return self._choose(current, "hold", inputs)
        return self._choose(target, "replan", inputs)

    def _choose(self, batch_size: int, reason: str, inputs: dict[str, float], *, commit: bool = True) -> Decision:
        if commit:
            self._current = batch_size
        return Decision(batch_size, reason, inputs)

    def _clamp(self, batch_size: int, ceiling: int) -> int:
        return max(self.lower, min(ceiling, int(batch_size)))

    def _fit_profile(self) -> None:
        sizes = [float(m.batch_size) for m in self.measurements]
        times = [m.epoch_seconds for m in self.measurements]
        log_A, alpha = fit_log_power_law(sizes, times)
        log_tau = (
            math.log(self.config.tau_fraction) + _log_steepest_slope(log_A, alpha, self.profile)
            if alpha > 0
            else -math.inf
        )
        self.fit = PowerLawFit(log_A, alpha, log_tau)
        # Start the live scale at the fitted A, weighted like the profile measurements it came from.
        weight = sum(self.config.recency_decay**age for age in range(len(self.measurements)))
        self._level_sum = weight * log_A
        self._level_weight = weight

    def _add_to_level(self, m: IterationMeasurement) -> None:
        assert self.fit is not None
        decay = self.config.recency_decay
        self._level_sum = decay * self._level_sum + math.log(m.epoch_seconds) + self.fit.alpha * math.log(m.batch_size)
        self._level_weight = decay * self._level_weight + 1.0

    def _guard_quality(self, m: IterationMeasurement) -> None:
        problem = None
        if m.retention is not None and m.retention < self.config.retention_floor:
            problem = f"retention {m.retention:.3g} < floor {self.config.retention_floor:.3g}"
        if m.validation is not None:
            if m.validation < self._best_validation - self.config.validation_drop:
                problem = problem or (
                    f"validation {m.validation:.3g} fell more than {self.config.validation_drop:.3g} "
                    f"below best {self._best_validation:.3g}"
                )
            self._best_validation = max(self._best_validation, m.validation)
        if problem is not None:
            self._quality_problem = problem
            self._healthy_streak = 0
            self._cap = max(self.lower, min(self._cap, math.floor(m.batch_size * self.config.shrink_factor)))
            return
        self._healthy_streak += 1
        if self._cap < self.upper and self._healthy_streak >= self.config.recover_after:
            self._cap = min(self.upper, math.ceil(self._cap / self.config.shrink_factor))
            self._healthy_streak = 0


def _check_measurement(m: IterationMeasurement) -> None:
    if m.batch_size < 1:
        raise ValueError(f"IterationMeasurement.batch_size must be >= 1, got {m.batch_size}")
    if not (m.seconds > 0 and math.isfinite(m.seconds)):
        raise ValueError(f"IterationMeasurement.seconds must be finite and > 0, got {m.seconds}")
    if m.samples_in_epoch < 1:
        raise ValueError(f"IterationMeasurement.samples_in_epoch must be >= 1, got {m.samples_in_epoch}")
    for name in ("retention", "validation"):
        value = getattr(m, name)
        if value is not None and not math.isfinite(value):
            raise ValueError(f"IterationMeasurement.{name} must be finite, got {value}")
