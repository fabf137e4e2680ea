"""What a bench's figure assumes about the world, measured before the figure is printed.

A figure command divides what it measured by an ideal: ``bench/throughput.py`` by ``concurrency
/ latency`` (the server answers after the latency asked for), ``bench/ray_scaling.py`` by ``n x``
one node's throughput (Ray sees ``n`` live nodes), ``bench/agents.py``'s sandbox overhead by the
sandbox-free run of the same chores (that run did the chores). When a default moves under a bench
(the sim-server's time scale, say), the formula still divides by the old ideal and prints a figure
that means nothing. Each check here measures one such assumption and raises :class:`WrongWorld`
(one line: what was measured, against what the formula assumes) when the world is not the one the
formula divides by; :func:`guarded` turns that into that line on stderr and exit code
:data:`EXIT_WRONG_WORLD`, with no figure printed.

A ratio to a physical limit cannot exceed 1: :func:`physical_ratio` refuses one above ``1 +`` its
noise (a measurement that beat the limit measured something else) and reports one within the
noise as 1. The noise is :data:`RATIO_NOISE` (the timer's), or more when the bench measured how
far runs of the same thing differ on this machine now (:func:`repeat_noise`).
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence

import httpx

EXIT_WRONG_WORLD = 6
"""Exit code of a figure command that refused to print its figure (the world is not its formula's)."""

FASTER_TOLERANCE = 0.05
"""The server may answer at most this fraction sooner than the latency asked for (timer resolution)."""

SLOWER_FACTOR = 1.5
"""The fastest of the probe's requests may take at most this multiple of the latency asked for
(more: the server does not answer after that latency, e.g. a time scale above 1)."""

PROBE_REQUESTS = 5
"""Requests, one at a time after one warm-up, that measure a server's single-request latency."""

RATIO_NOISE = 0.005
"""How far above 1 a ratio to a physical limit may come out by measurement noise (reported as 1)."""


class WrongWorld(Exception):
    """The world is not the one a figure's formula assumes; the message says what was measured."""


def single_request_latency(url: str, body: bytes, headers: dict[str, str], *,
                           requests: int = PROBE_REQUESTS) -> list[float]:
    """Seconds of each of ``requests`` chat requests sent one at a time (after one warm-up) to the
    OpenAI-compatible ``url`` (its ``/chat/completions``); WrongWorld when one is not answered 200."""
    seconds = []
    with httpx.Client(timeout=60.0) as client:
        for index in range(requests + 1):
            started = time.perf_counter()
            response = client.post(f"{url}/chat/completions", content=body, headers=headers)
            elapsed = time.perf_counter() - started
            if response.status_code != 200:
                raise WrongWorld(f"the server at {url} answered a single request with HTTP {response.status_code}, "
                                 f"not 200: {response.text[:200]!r}")
            if index:
                seconds.append(elapsed)
    return seconds


def check_latency(seconds: list[float], asked_s: float, *, where: str) -> float:
    """The median of the single-request ``seconds`` measured at ``where``; WrongWorld when one
    answered sooner than ``asked_s`` (less :data:`FASTER_TOLERANCE`: load only ever slows a
    request) or even the fastest took more than :data:`SLOWER_FACTOR` times it: an ideal of
    ``1 / asked_s`` per request in flight is then not this server's."""
    if not asked_s > 0:
        raise WrongWorld(f"the latency asked for must be > 0 s, got {asked_s}")
    fastest = min(seconds)
    if fastest < asked_s * (1 - FASTER_TOLERANCE):
        raise WrongWorld(f"the server at {where} answered a single request in {1e3 * fastest:.1f} ms, "
                         f"sooner than the {1e3 * asked_s:.1f} ms the ideal divides by (is its time scale 1?)")
    if fastest > asked_s * SLOWER_FACTOR:
        raise WrongWorld(f"the server at {where} answers a single request in {1e3 * fastest:.1f} ms at least, "
                         f"over {SLOWER_FACTOR}x the {1e3 * asked_s:.1f} ms the ideal divides by")
    return statistics.median(seconds)


def physical_ratio(name: str, value: float, *, noise: float = RATIO_NOISE) -> float:
    """``value``, a measured ratio to a physical limit, checked: WrongWorld above ``1 +`` the
    larger of ``noise`` and :data:`RATIO_NOISE` (or not a number), 1.0 when within the noise above 1."""
    if not value >= 0:
        raise WrongWorld(f"{name}={value}: a ratio to a physical limit must be a number >= 0")
    allowed = max(noise, RATIO_NOISE)
    if value > 1 + allowed:
        raise WrongWorld(f"{name}={value:.3f} exceeds its physical limit 1 by more than the measurement's noise "
                         f"({allowed:.3f}): the measurement does not measure what its ideal assumes")
    return min(value, 1.0)


T_99 = (63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169)
"""Student's t at 0.995 for 1, 2, ... 10 degrees of freedom (two-sided 99 %)."""


def repeat_noise(seconds: Sequence[float]) -> float:
    """How far one more timing of the same work may fall from the mean of ``seconds`` (two or more
    timings of it on this machine now, its load moving each), as a fraction of that mean: the 99 %
    prediction interval's half-width, Student's t over the timings' spread. A few timings say little
    of their spread, so the bound is wide: the spread of two alone, taken as the bound, is beaten by
    chance about one time in four (their difference over a third's is Cauchy-distributed)."""
    if len(seconds) < 2 or not all(s > 0 for s in seconds):
        raise WrongWorld(f"two or more timings of the same work, each > 0 s, make a noise; got {list(seconds)}")
    mean = statistics.fmean(seconds)
    t = T_99[min(len(seconds) - 1, len(T_99)) - 1]
    return t * statistics.stdev(seconds) * math.sqrt(1 + 1 / len(seconds)) / mean


def figures_line(figures: Mapping[str, str]) -> str:
    """A figure command's last line: its figures as ``key=value`` pairs, in order."""
    return " ".join(f"{key}={value}" for key, value in figures.items())


def check_nodes(seen: int, expected: int) -> None:
    """WrongWorld unless the cluster counts ``expected`` live nodes (``seen``)."""
    if seen != expected:
        raise WrongWorld(f"Ray counts {seen} live node(s), not the {expected} the efficiency divides by")


def check_baseline(name: str, value: float, *, done: int, expected: int) -> None:
    """WrongWorld unless the baseline ``name`` did its ``expected`` units of work (``done``) and
    took a positive time (``value``)."""
    if done != expected or not value > 0:
        raise WrongWorld(f"the baseline {name} did {done} of its {expected} units of work in {value:.4f} s: "
                         "there is nothing to measure the difference from")


def guarded(main: Callable[[], int | None], command: str) -> int:
    """Run a figure command's ``main``; on WrongWorld print ``<command>: refused: <why>`` on
    stderr and return :data:`EXIT_WRONG_WORLD` (no figure is printed)."""
    try:
        return main() or 0
    except WrongWorld as exc:
        print(f"{command}: refused: {exc}", file=sys.stderr, flush=True)
        return EXIT_WRONG_WORLD


def check_range(name: str, value: float, low: float, high: float) -> float:
    """``value`` checked to lie in ``[low, high]`` (a share in [0, 1], seconds to a run's best
    within the run's own seconds, ...): WrongWorld outside it or when not a number."""
    if not low <= value <= high:
        raise WrongWorld(f"{name}={value} is outside [{low}, {high}]: it cannot be, so the measurement does not "
                         "measure what it says")
    return value
