"""How many calls of one role are on the wire at once, measured where attempts start and finish.

An :class:`InFlight` meter is told each attempt's start and end (the timestamps the client takes
anyway, inside its admission gate: so it counts requests on the wire, never calls waiting for a
slot or a backoff) and keeps, with no allocation per call: the calls in flight now, the most at
once since its window opened, and over its life the integral of calls in flight over time and
the time with at least one in flight (*busy* time). Their ratio is the time-weighted mean of calls
in flight while the role was working. The replicas of one role's pool share its meters, so a
role's figures are over every replica. One event loop updates a meter; reading it never blocks.
"""

from __future__ import annotations


class InFlight:
    """One role's calls in flight (module docstring). ``enter(t)``/``leave(t)`` around each
    attempt, ``t`` from :func:`time.perf_counter`."""

    __slots__ = ("now", "peak", "area", "busy_s", "_since")

    def __init__(self) -> None:
        self.now = 0  # calls in flight
        self.peak = 0  # the most at once since the window opened (:meth:`open_window`)
        self.area = 0.0  # calls-in-flight x seconds, over the meter's life
        self.busy_s = 0.0  # seconds with at least one call in flight
        self._since = 0.0

    def _advance(self, t: float) -> None:
        if self.now:
            elapsed = t - self._since
            self.area += self.now * elapsed
            self.busy_s += elapsed
        self._since = t

    def enter(self, t: float) -> None:
        """An attempt started at ``t``."""
        self._advance(t)
        self.now += 1
        if self.now > self.peak:
            self.peak = self.now

    def leave(self, t: float) -> None:
        """An attempt ended at ``t``."""
        self._advance(t)
        self.now -= 1

    def read(self, t: float) -> tuple[float, float]:
        """``(area, busy_s)`` up to ``t``."""
        self._advance(t)
        return self.area, self.busy_s

    def open_window(self) -> None:
        """Count :attr:`peak` from now on (from the calls in flight now)."""
        self.peak = self.now


Meters = dict[str, InFlight]
"""One endpoint's meters, by the role name its requests carry."""
