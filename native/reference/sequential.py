"""Plain-Python reference for :mod:`native.sequential`: the same confidence sequences, written for clarity."""

from __future__ import annotations

import math
from collections.abc import Sequence


class ReferenceSequence:
    """The predictable plug-in empirical-Bernstein confidence sequence of one stream of rewards
    in [0, 1] at level ``alpha`` (the kernel module's docstring has the recursion)."""

    def __init__(self, alpha: float) -> None:
        self.log_level = math.log(2.0 / alpha)
        self.rewards: list[float] = []
        self.bets: list[float] = []
        self.penalties: list[float] = []
        self.lower, self.upper = 0.0, 1.0

    def _mean_after(self, t: int) -> float:
        return (0.5 + sum(self.rewards[:t])) / (t + 1)

    def _variance_after(self, t: int) -> float:
        squares = sum((self.rewards[i] - self._mean_after(i + 1)) ** 2 for i in range(t))
        return (0.25 + squares) / (t + 1)

    def add(self, value: float) -> None:
        t = len(self.rewards) + 1
        bet = min(0.5, math.sqrt(2 * self.log_level / (self._variance_after(t - 1) * t * math.log(1 + t))))
        v = 4 * (value - self._mean_after(t - 1)) ** 2
        psi = (-math.log(1 - bet) - bet) / 4
        self.rewards.append(value)
        self.bets.append(bet)
        self.penalties.append(v * psi)
        centre = sum(b * x for b, x in zip(self.bets, self.rewards)) / sum(self.bets)
        half = (self.log_level + sum(self.penalties)) / sum(self.bets)
        self.lower = max(self.lower, centre - half)
        self.upper = min(self.upper, centre + half)


def reference_confidence_sequence(values: Sequence[float], alpha: float) -> list[tuple[float, float]]:
    """The interval after each reward."""
    sequence = ReferenceSequence(alpha)
    bounds = []
    for value in values:
        sequence.add(value)
        bounds.append((sequence.lower, sequence.upper))
    return bounds


def reference_first_crossing(rows: Sequence[int], values: Sequence[float], alpha: float, paired: bool,
                             rollback_below: float, widen_above: float) -> tuple[int, int, float, float]:
    """``(index, decision, lower, upper)`` as :func:`native.sequential.first_crossing` returns them
    from an empty state: rows 0 and 1 are two versions at ``alpha / 2`` each, row 2 paired
    differences mapped to [0, 1] at ``alpha``; decision 0 rollback, 1 widen, -1 none."""
    arms = [ReferenceSequence(alpha / 2), ReferenceSequence(alpha / 2)]
    pairs = ReferenceSequence(alpha)
    lower, upper = (-1.0, 1.0)
    for index, (row, value) in enumerate(zip(rows, values)):
        if row == 2:
            pairs.add((value + 1) / 2)
        else:
            arms[row].add(value)
        if paired:
            lower, upper = 2 * pairs.lower - 1, 2 * pairs.upper - 1
        else:
            lower, upper = arms[1].lower - arms[0].upper, arms[1].upper - arms[0].lower
        if upper < rollback_below:
            return index, 0, lower, upper
        if lower > widen_above:
            return index, 1, lower, upper
    return len(values) - 1, -1, lower, upper
