"""The Pareto candidate pool: every accepted candidate with its score on each validation
instance; parents are drawn in proportion to how many instances' fronts they are on.

- The *front* of a validation instance is the set of candidates with the best score on it.
- Candidate ``a`` *dominates* ``b`` when ``a`` scores at least as well on every instance and
  better on at least one. A dominated candidate is never drawn (a candidate dominating it is on
  every front it is on, so no front empties).
- A parent is drawn with probability proportional to the number of fronts it is on, among the
  non-dominated candidates (GEPA's ``pareto`` candidate selection).

Pure and deterministic given the generator passed in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

import numpy as np

T = TypeVar("T")


def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
    """``a`` is at least as good as ``b`` everywhere and better somewhere (same length)."""
    if len(a) != len(b):
        raise ValueError(f"score vectors differ in length: {len(a)} and {len(b)}")
    return all(x >= y for x, y in zip(a, b)) and any(x > y for x, y in zip(a, b))


class ParetoPool(Generic[T]):
    """Candidates and their per-instance validation scores, in the order they were added."""

    def __init__(self, instances: int) -> None:
        if instances < 1:
            raise ValueError("a Pareto pool needs at least one validation instance")
        self.instances = instances
        self.candidates: list[T] = []
        self.scores: list[tuple[float, ...]] = []

    def __len__(self) -> int:
        return len(self.candidates)

    def add(self, candidate: T, scores: Sequence[float]) -> int:
        """Add ``candidate`` with one score per validation instance; its index in the pool."""
        if len(scores) != self.instances:
            raise ValueError(f"expected {self.instances} scores, got {len(scores)}")
        self.candidates.append(candidate)
        self.scores.append(tuple(float(s) for s in scores))
        return len(self.candidates) - 1

    def mean(self, index: int) -> float:
        return sum(self.scores[index]) / self.instances

    def best(self) -> int:
        """The index of the candidate with the best mean validation score (first on ties)."""
        if not self.candidates:
            raise ValueError("the pool is empty")
        means = [self.mean(i) for i in range(len(self))]
        return means.index(max(means))

    def fronts(self) -> list[frozenset[int]]:
        """Per validation instance, the candidates with the best score on it."""
        columns = np.asarray(self.scores, dtype=np.float64)
        best = columns.max(axis=0)
        return [frozenset(int(i) for i in np.flatnonzero(columns[:, j] == best[j])) for j in range(self.instances)]

    def dominated(self) -> frozenset[int]:
        """Candidates some other candidate of the pool dominates."""
        scores = self.scores
        return frozenset(
            b for b in range(len(self)) if any(dominates(scores[a], scores[b]) for a in range(len(self)) if a != b)
        )

    def front_counts(self) -> list[int]:
        """Per candidate, the number of instance fronts it is on (0 for dominated candidates)."""
        dominated = self.dominated()
        counts = [0] * len(self)
        for front in self.fronts():
            for index in front - dominated:
                counts[index] += 1
        return counts

    def sample_parent(self, rng: np.random.Generator) -> int:
        """A parent index, drawn with probability proportional to :meth:`front_counts`."""
        counts = np.asarray(self.front_counts(), dtype=np.float64)
        if counts.sum() == 0:
            raise ValueError("the pool is empty")
        return int(rng.choice(len(counts), p=counts / counts.sum()))
