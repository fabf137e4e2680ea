"""Anytime-valid confidence sequences for mean rewards and for the difference of two versions.

These are the statistics of the release gate (:mod:`combee_fast.embedded.release`), which checks
a candidate version against the incumbent after every reward. A fixed-sample interval checked
that often would cross a threshold by chance sooner or later; a *confidence sequence* is an
interval for every time at once, so it may be checked after every reward, forever.

Method: the predictable plug-in empirical-Bernstein confidence sequence (PrPl-EB) of
Waudby-Smith and Ramdas, "Estimating means of bounded random variables by betting" (JRSS-B,
2023, Theorem 2). For rewards ``x_1, x_2, ...`` in [0, 1], with ``mu_0 = 1/2``, ``s2_0 = 1/4``:

    lambda_t = min(1/2, sqrt(2 log(2/a) / (s2_{t-1} t log(1 + t))))        (bets, fixed before x_t)
    v_t      = 4 (x_t - mu_{t-1})**2
    psi(l)   = (-log(1 - l) - l) / 4
    mu_t     = (1/2 + sum_{i<=t} x_i) / (t + 1)
    s2_t     = (1/4 + sum_{i<=t} (x_i - mu_i)**2) / (t + 1)
    C_t      = sum(lambda_i x_i) / sum(lambda_i)  +-  (log(2/a) + sum(v_i psi(lambda_i))) / sum(lambda_i)

and the interval kept is the running intersection of the ``C_t`` with [0, 1].

Guarantee: if every reward lies in [0, 1] and has conditional mean ``mu`` given the rewards
before it (independent draws of one version's reward suffice), then
``P(there is a t with mu outside [lower_t, upper_t]) <= a``. The width adapts to the rewards'
variance (empirical Bernstein) and shrinks like ``sqrt(log(t) / t)``.

Two versions (:data:`TWO_SAMPLE`): rows ``INCUMBENT`` and ``CANDIDATE`` each hold the sequence of
one version's rewards at level ``a/2``; with probability at least ``1 - a``, at every time at
once, the difference of means ``mu_candidate - mu_incumbent`` lies in
``[lower_c - upper_i, upper_c - lower_i]`` (a union bound). Paired (:data:`PAIRED`): row
``PAIRED`` holds ``(d + 1) / 2`` for each difference ``d`` in [-1, 1] of the two versions'
rewards on one task, at level ``a``; the difference lies in ``[2 lower - 1, 2 upper - 1]``.
"""

from __future__ import annotations

import math

import msgspec
import numpy as np

from ._jit import helper, kernel

INCUMBENT, CANDIDATE, PAIRED = 0, 1, 2
"""Rows of a test's state: each version's rewards, and the paired differences."""
TWO_SAMPLE, PAIRED_TEST = False, True
"""The two kinds of test (the ``paired`` argument)."""
STATE_SIZE = 8
"""Numbers one sequence keeps: count, sum, squared deviations, the bets' three sums, bounds."""
BET_CAP = 0.5
"""The largest bet ``lambda_t`` (the method's ``c``)."""

_COUNT, _SUM, _SQUARES, _BETS, _BET_X, _PENALTY, _LOWER, _UPPER = range(STATE_SIZE)
NO_CROSSING, ROLLBACK, WIDEN = -1, 0, 1
"""What :func:`first_crossing` found: no threshold crossed, the upper bound below its threshold,
the lower bound above its threshold."""


class ArmInterval(msgspec.Struct, frozen=True):
    """One sequence: ``count`` rewards, their mean and the interval at this time."""

    count: int
    mean: float
    lower: float
    upper: float


class Crossing(msgspec.Struct, frozen=True):
    """Where :func:`first_crossing` stopped: ``index`` of the reward that crossed a threshold (or
    the last one), what it crossed (:data:`ROLLBACK`, :data:`WIDEN`, :data:`NO_CROSSING`) and the
    difference's interval after it."""

    index: int
    decision: int
    lower: float
    upper: float


def new_state(rows: int = 3) -> np.ndarray:
    """An empty state of ``rows`` sequences (bounds [0, 1])."""
    state = np.zeros((rows, STATE_SIZE))
    state[:, _UPPER] = 1.0
    return state


def log_term(alpha: float) -> float:
    """``log(2 / alpha)``, the method's confidence term; ValueError outside (0, 1)."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    return math.log(2.0 / alpha)


def observe(state: np.ndarray, row: int, value: float, alpha: float) -> None:
    """Add reward ``value`` (in [0, 1]) to sequence ``row`` of ``state`` at level ``alpha``."""
    _check_value(value)
    _observe(state, row, float(value), log_term(alpha))


def interval(state: np.ndarray, row: int) -> ArmInterval:
    """Sequence ``row``'s count, mean and interval."""
    count = int(state[row, _COUNT])
    mean = state[row, _SUM] / count if count else math.nan
    return ArmInterval(count, float(mean), float(state[row, _LOWER]), float(state[row, _UPPER]))


def difference(state: np.ndarray, paired: bool) -> tuple[float, float]:
    """The interval of ``mu_candidate - mu_incumbent`` (module docstring)."""
    lower, upper = _difference(state, paired)
    return float(lower), float(upper)


def step(state: np.ndarray, row: int, value: float, alpha: float, paired: bool) -> tuple[float, float]:
    """Add one reward (a paired difference in [-1, 1] when ``row`` is :data:`PAIRED`) at the
    test's level ``alpha`` and return the difference's interval after it."""
    if row == PAIRED:
        _check_difference(value)
    else:
        _check_value(value)
    lower, upper = _step(state, row, float(value), log_term(alpha), paired)
    return float(lower), float(upper)


def first_crossing(state: np.ndarray, rows: np.ndarray, values: np.ndarray, alpha: float, paired: bool,
                   rollback_below: float, widen_above: float) -> Crossing:
    """Add the rewards in order (``rows[i]`` says whose ``values[i]`` is) and stop at the first
    after which the difference's upper bound is below ``rollback_below`` or its lower bound above
    ``widen_above`` (checked in that order); ``state`` keeps the rewards added."""
    row_array = np.ascontiguousarray(rows, dtype=np.int64).reshape(-1)
    value_array = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
    if len(row_array) != len(value_array):
        raise ValueError(f"first_crossing: {len(row_array)} rows for {len(value_array)} values")
    if len(value_array) == 0:
        raise ValueError("first_crossing: no rewards")
    if row_array.min() < 0 or row_array.max() > PAIRED:
        raise ValueError(f"first_crossing: rows must be {INCUMBENT}, {CANDIDATE} or {PAIRED}")
    for row, value in zip(row_array.tolist(), value_array.tolist()):
        (_check_difference if row == PAIRED else _check_value)(value)
    index, decision, lower, upper = _first_crossing(state, row_array, value_array, log_term(alpha), paired,
                                                    rollback_below, widen_above)
    return Crossing(int(index), int(decision), float(lower), float(upper))


def confidence_sequence(values: np.ndarray, *, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """The interval after every reward of ``values`` (in [0, 1]): two float64 arrays."""
    array = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
    if len(array) and not (np.isfinite(array).all() and array.min() >= 0.0 and array.max() <= 1.0):
        bad = int(np.flatnonzero(~(np.isfinite(array) & (array >= 0.0) & (array <= 1.0)))[0])
        raise ValueError(f"confidence_sequence: reward {array[bad]} at row {bad} is not in [0, 1]")
    return _sequence(array, log_term(alpha))


def warmup() -> None:
    """Compile (or load from cache) every kernel in this module for the dtypes the API uses."""
    state = new_state()
    observe(state, INCUMBENT, 1.0, 0.05)
    step(state, CANDIDATE, 0.0, 0.05, TWO_SAMPLE)
    step(state, PAIRED, 0.5, 0.05, PAIRED_TEST)
    difference(state, TWO_SAMPLE)
    first_crossing(new_state(), np.array([0, 1]), np.array([1.0, 0.0]), 0.05, TWO_SAMPLE, 0.0, -0.5)
    confidence_sequence(np.array([0.0, 1.0]), alpha=0.05)


def _check_value(value: float) -> None:
    if not 0.0 <= value <= 1.0:  # also refuses NaN
        raise ValueError(f"a reward must be in [0, 1], got {value}")


def _check_difference(value: float) -> None:
    if not -1.0 <= value <= 1.0:
        raise ValueError(f"a paired difference must be in [-1, 1], got {value}")


# --- kernels --------------------------------------------------------------------------------


@helper()
def _observe(state, row, value, log_level):  # type: ignore[no-untyped-def]
    """One reward into one sequence, in place (module docstring's recursion)."""
    t = state[row, _COUNT] + 1.0
    previous_mean = (0.5 + state[row, _SUM]) / t
    previous_variance = (0.25 + state[row, _SQUARES]) / t
    bet = math.sqrt(2.0 * log_level / (previous_variance * t * math.log(1.0 + t)))
    if bet > BET_CAP:
        bet = BET_CAP
    deviation = value - previous_mean
    state[row, _BETS] += bet
    state[row, _BET_X] += bet * value
    state[row, _PENALTY] += deviation * deviation * (-math.log(1.0 - bet) - bet)  # v_t psi(lambda_t)
    state[row, _COUNT] = t
    state[row, _SUM] += value
    mean = (0.5 + state[row, _SUM]) / (t + 1.0)
    state[row, _SQUARES] += (value - mean) * (value - mean)
    centre = state[row, _BET_X] / state[row, _BETS]
    half = (log_level + state[row, _PENALTY]) / state[row, _BETS]
    if centre - half > state[row, _LOWER]:
        state[row, _LOWER] = centre - half
    if centre + half < state[row, _UPPER]:
        state[row, _UPPER] = centre + half


@helper()
def _difference(state, paired):  # type: ignore[no-untyped-def]
    if paired:
        return 2.0 * state[PAIRED, _LOWER] - 1.0, 2.0 * state[PAIRED, _UPPER] - 1.0
    return (state[CANDIDATE, _LOWER] - state[INCUMBENT, _UPPER],
            state[CANDIDATE, _UPPER] - state[INCUMBENT, _LOWER])


@helper()
def _add(state, row, value, log_level, paired):  # type: ignore[no-untyped-def]
    """One reward of a test: a paired difference is mapped to [0, 1]; each version's sequence
    of a two-sample test runs at half the level (``log(2 / (a/2)) = log(2/a) + log(2)``)."""
    if row == PAIRED:
        _observe(state, row, (value + 1.0) / 2.0, log_level)
    else:
        _observe(state, row, value, log_level + math.log(2.0))


@kernel()
def _step(state, row, value, log_level, paired):  # type: ignore[no-untyped-def]
    _add(state, row, value, log_level, paired)
    return _difference(state, paired)


@kernel()
def _first_crossing(state, rows, values, log_level, paired, rollback_below, widen_above):  # type: ignore[no-untyped-def]
    lower, upper = _difference(state, paired)
    for i in range(len(values)):
        _add(state, rows[i], values[i], log_level, paired)
        lower, upper = _difference(state, paired)
        if upper < rollback_below:
            return i, ROLLBACK, lower, upper
        if lower > widen_above:
            return i, WIDEN, lower, upper
    return len(values) - 1, NO_CROSSING, lower, upper


@kernel()
def _sequence(values, log_level):  # type: ignore[no-untyped-def]
    state = np.zeros((1, STATE_SIZE))
    state[0, _UPPER] = 1.0
    lower = np.empty(len(values))
    upper = np.empty(len(values))
    for i in range(len(values)):
        _observe(state, 0, values[i], log_level)
        lower[i] = state[0, _LOWER]
        upper[i] = state[0, _UPPER]
    return lower, upper
