"""Visible concurrency: requested and achieved calls in flight per role, and a silent cap named.

*Requested* is what a role's endpoint may have in flight as configured (``transport.concurrency``
per replica; :meth:`~combee_fast.roles.clients.RoleClients.requested_in_flight`). *Achieved* is
measured by the endpoint client where attempts start and finish
(:mod:`combee_fast.endpoint.inflight`): the most calls of the role on the wire at once (``peak``)
and their time-weighted mean while at least one was (``mean``, over ``busy_s`` seconds).

:class:`Gauges` reads them around each learning step (a ledger row's ``concurrency``; the loop's
own validation between steps is not in them); :class:`ConcurrencyTotal` adds the steps up for
the run. A run is *below its cap* for a role (:func:`below_cap_lines`, said in the report and the
closing summary) when the role's mean stayed under :data:`BELOW_CAP_SHARE` of what was requested
while work was queued for it by a lower limit: some step had more items than that limit lets run
at once, each item making at least one of the role's calls, the limit is itself under
:data:`BELOW_CAP_SHARE` of the request, and the role's mean did not pass it. The limits looked at (:meth:`Gauges.likely_caps`): the
server's slots, a limit timeouts lowered, and the configured ones the session names
(``map.workers``, ``eval.parallel``). A role held back only by its own work's shape (reflections that follow their
items' answers, a curator per group) is not said to be capped.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import msgspec

from combee_fast.record.bounds import Count, NonNegative, Seconds
from combee_fast.roles.clients import RoleClients

BELOW_CAP_SHARE = 0.5
"""A role whose mean calls in flight stay under this share of the requested cap, with work queued, is said to be capped."""


class RoleConcurrency(msgspec.Struct, frozen=True):
    """One role's calls in flight over a step: ``requested`` (the configured cap), ``peak`` (the
    most at once), ``mean`` (time-weighted, while at least one was in flight) over ``busy_s``."""

    requested: int
    peak: int
    mean: float
    busy_s: float


class ConcurrencyTotal(msgspec.Struct):
    """One role's calls in flight over a run's steps; ``most_items``: the largest step whose
    items each made at least one of the role's calls (what a lower limit would have queued)."""

    requested: Count = 0
    peak: Count = 0
    area: NonNegative = 0.0  # calls in flight x seconds
    busy_s: Seconds = 0.0
    most_items: Count = 0

    @property
    def mean(self) -> float:
        """Time-weighted mean of calls in flight while at least one was."""
        return self.area / self.busy_s if self.busy_s > 0 else 0.0

    def add(self, step: RoleConcurrency, *, batch_size: int, calls: int) -> None:
        """Add one step of the role: its figures, a batch of ``batch_size`` items, ``calls`` of its calls."""
        self.requested = step.requested
        self.peak = max(self.peak, step.peak)
        self.area += step.mean * step.busy_s
        self.busy_s += step.busy_s
        if calls >= batch_size:
            self.most_items = max(self.most_items, batch_size)


def add_step(totals: dict[str, ConcurrencyTotal], concurrency: Mapping[str, RoleConcurrency], *, batch_size: int,
             calls: Mapping[str, int]) -> None:
    """Add a ledger row's ``concurrency`` (of a step of ``batch_size`` items and ``calls`` per role) to ``totals``."""
    for role, step in concurrency.items():
        totals.setdefault(role, ConcurrencyTotal()).add(step, batch_size=batch_size, calls=calls.get(role, 0))


class Gauges:
    """The calls in flight of ``roles`` on ``clients``, read step by step; ``limits``: configured
    limits other than the endpoint's that may cap a role's calls, as ``(value, what)``, ``what``
    saying where it is set (e.g. ``(8, "map.workers=8 (--workers)")``)."""

    def __init__(self, clients: RoleClients, roles: Sequence[str], limits: Sequence[tuple[int, str]]) -> None:
        self.clients, self.roles, self.limits = clients, tuple(roles), list(limits)
        self._opened: dict[str, tuple[float, float]] = {}

    def open_window(self) -> None:
        """A step begins: its figures count from now."""
        now = time.perf_counter()
        for role in self.roles:
            meter = self.clients.in_flight(role)
            self._opened[role] = meter.read(now)
            meter.open_window()

    def read(self) -> dict[str, RoleConcurrency]:
        """The figures of the roles that had a call in flight since :meth:`open_window`."""
        now = time.perf_counter()
        figures = {}
        for role in self.roles:
            meter = self.clients.in_flight(role)
            area_before, busy_before = self._opened.get(role, (0.0, 0.0))
            area, busy = meter.read(now)
            if busy > busy_before:
                figures[role] = RoleConcurrency(self.clients.requested_in_flight(role), meter.peak,
                                                round((area - area_before) / (busy - busy_before), 3),
                                                round(busy - busy_before, 6))
        return figures

    def likely_caps(self, role: str) -> list[tuple[int, str]]:
        """``(value, what)`` of each limit that may hold ``role``'s calls in flight below its
        endpoint's cap: its endpoint's gates (the server's slots, a limit timeouts lowered), then
        the configured limits; lowest first."""
        replicas = self.clients.replicas(role)
        found = list(self.limits)
        ceiling = sum(replica.gate.ceiling for replica in replicas)
        if ceiling < self.clients.requested_in_flight(role):
            found.append((ceiling, f"the server's slots ({ceiling}; transport.slots_cap)"))
        if any(replica.gate.overloads for replica in replicas):
            limit = sum(replica.gate.limit for replica in replicas)
            found.append((limit, f"timeouts lowering the in-flight limit (now {limit}; --timeout, --attempt-timeout)"))
        return sorted(found)


def concurrency_summary(totals: Mapping[str, ConcurrencyTotal]) -> dict[str, dict[str, float]]:
    """The summary's ``concurrency``: per role, ``requested``, ``peak`` and ``mean``."""
    return {role: {"requested": t.requested, "peak": t.peak, "mean": round(t.mean, 2)} for role, t in totals.items()}


def below_cap_lines(totals: Mapping[str, ConcurrencyTotal], gauges: Gauges | None) -> list[str]:
    """One line per role below its cap (module docstring), naming the likely cap."""
    lines = []
    for role, t in totals.items():
        floor = BELOW_CAP_SHARE * t.requested
        if gauges is None or not t.mean < floor:
            continue
        caps = [what for value, what in gauges.likely_caps(role)
                if t.mean <= value < min(t.most_items, floor)]
        if caps:
            lines.append(f"{role}: {t.mean:.1f} calls in flight on average (at most {t.peak}) of the {t.requested} "
                         f"its endpoint allows, while work was queued; likely capped by {caps[0]}")
    return lines
