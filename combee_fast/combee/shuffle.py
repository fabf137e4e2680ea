"""Augmented shuffle: duplicate each record p times, shuffle, cut into groups.

Each group becomes one curator call. Duplication gives every record two chances to be noticed
by a curator that is not overloaded; the cut keeps every call small (``k = floor(sqrt(n))``
groups, or more when ``max_group`` bounds the records one curator reads).
"""

from __future__ import annotations

import math

import numpy as np


def augmented_groups(
    n: int, duplicates: int, rng: np.random.Generator, *, max_group: int | None = None
) -> list[tuple[int, ...]]:
    """Augmented shuffle: ``duplicates`` copies of each of ``n`` records, shuffled, cut into
    ``k = floor(sqrt(n))`` groups of near-equal size (the paper's rule), or into more groups when
    that is needed to keep every group at most ``max_group`` records. A copy landing twice in one
    group is kept once (it would tell that curator nothing new). Members keep their shuffled order."""
    if n == 0:
        return []
    records = np.repeat(np.arange(n), duplicates)
    rng.shuffle(records)
    k = max(1, math.isqrt(n))
    if max_group is not None:
        k = max(k, -(-len(records) // max_group))
    return [tuple(dict.fromkeys(int(i) for i in chunk)) for chunk in np.array_split(records, k)]
