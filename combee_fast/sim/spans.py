"""Shape of a set of requests in time, from the simulated server's ``(arrival, finish)`` spans.

- :func:`chain_depth`: the longest chain of requests each of which arrived after the previous one
  finished. For calls that depend on each other (each sent when the last answered) it is their
  number; for waves of concurrent calls it is the number of waves: the critical path's depth.
- :func:`peak_overlap`: the most requests in flight at one instant.
- :func:`chain_seconds`: the longest total duration of such a chain: the critical path's
  simulated seconds, without the client's own time between calls (for a client whose calls the
  engine cannot time itself, e.g. a peer library's own HTTP client).

Both are pure functions of the spans (simulated seconds), so they hold for any time scale as long
as the client's own overhead between dependent calls stays above zero, which it always does.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence


def chain_depth(spans: Sequence[tuple[float, float]]) -> int:
    """The length of the longest chain of spans, each starting at or after the previous one's end.

    Greedy by earliest finish, which is optimal for interval chains (the classic activity
    selection argument): O(n log n). Empty spans give 0."""
    depth, last_end = 0, float("-inf")
    for start, end in sorted(spans, key=lambda span: (span[1], span[0])):
        if start >= last_end:
            depth, last_end = depth + 1, end
    return depth


def peak_overlap(spans: Sequence[tuple[float, float]]) -> int:
    """The largest number of spans open at one instant (a span ending when another starts does
    not overlap it). Empty spans give 0."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    peak = open_now = 0
    for _, step in events:
        open_now += step
        peak = max(peak, open_now)
    return peak


def chain_seconds(spans: Sequence[tuple[float, float]]) -> float:
    """The largest summed duration of a chain of spans, each starting at or after the previous
    one's end (weighted interval scheduling: O(n log n)). Calls sent one after another give the
    sum of their latencies; waves of concurrent calls, the sum of each wave's longest. Empty
    spans give 0."""
    ordered = sorted(spans, key=lambda span: (span[1], span[0]))
    ends = [end for _, end in ordered]
    best = [0.0]  # best[i]: the longest chain among the first i spans
    for start, end in ordered:
        before = bisect_right(ends, start, hi=len(best) - 1)  # spans ending at or before this one starts
        best.append(max(best[-1], best[before] + end - start))
    return best[-1]
