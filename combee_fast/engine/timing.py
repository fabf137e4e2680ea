"""Critical-path time: when would each item finish if a pool of workers ran them in order.

Times in this project are the critical path of the calls' latencies (simulated seconds on the
simulated endpoint), never wall time, so Python overhead cannot flatter or inflate a comparison.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence


def finish_times(durations: Sequence[float], workers: int) -> list[float]:
    """Finish time of each item when ``workers`` run them in index order (list scheduling),
    as the engine's worker pool does."""
    free_at = [0.0] * max(1, min(workers, len(durations)))
    finished: list[float] = []
    for duration in durations:
        start = heapq.heappop(free_at)
        finished.append(start + duration)
        heapq.heappush(free_at, start + duration)
    return finished
