"""A line on stderr while a long step or evaluation runs and nothing else is said:
``[working] ...`` with the calls done, in flight and failed, the tokens per second since the last
line and what the work waits for (the roles with calls in flight).

A slow endpoint (a local model on a CPU takes minutes per call) otherwise leaves a run silent
between its steps' lines. :class:`Heartbeat` is a consumer of the run's events (a finished step
is a line of its own, so it restarts the quiet clock) and, while :meth:`Heartbeat.running`, a
task on the run's loop that wakes when ``every_s`` seconds have passed without a line. It reads
the figures from the run's role calls and their clients' running totals, never blocking.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import AsyncIterator
from typing import IO

from combee_fast.readout.progress import clock
from combee_fast.roles.calls import RoleCalls
from combee_fast.run.events import (EndpointsProbed, EpisodeRerun, Event, KernelsCompiling, Overloaded, RetryAfter,
                                    StepDone)

HEARTBEAT_S = 30.0
"""Most seconds a working run stays silent on stderr."""
_SAID = (KernelsCompiling, EndpointsProbed, RetryAfter, Overloaded, EpisodeRerun)
"""Events that print a line of their own (:mod:`~combee_fast.readout.notices`)."""


class Heartbeat:
    """Says what a run's calls are doing every ``every_s`` seconds without another line (module
    docstring). ``calls``: the run's role calls; ``work``: what runs when it is not a run's steps
    (``evaluation``); ``stream``: default stderr."""

    def __init__(self, calls: RoleCalls, *, every_s: float = HEARTBEAT_S, work: str | None = None,
                 stream: IO[str] | None = None) -> None:
        if not every_s > 0:
            raise ValueError(f"heartbeat: every_s must be > 0, got {every_s}")
        self.calls, self.every_s, self.work, self.stream = calls, every_s, work, stream
        self._said = self._step_began = time.monotonic()
        self._tokens = self._completion_tokens()
        self._done = 0  # calls done at the last line
        self._step = 1

    def __call__(self, event: Event) -> None:
        if isinstance(event, StepDone):
            self._said = self._step_began = time.monotonic()
            self._step = event.row.step + 2
        elif isinstance(event, _SAID):
            self._said = time.monotonic()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Heartbeat]:
        """Beats on the running loop inside the block."""
        task = asyncio.create_task(self._beat())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(max(self.every_s - (time.monotonic() - self._said), 0.05))
            if time.monotonic() - self._said >= self.every_s and (line := self.line()) is not None:
                print(line, file=self.stream if self.stream is not None else sys.stderr, flush=True)

    def line(self) -> str | None:
        """The heartbeat as of now (and the start of the next line's tokens per second); None
        when no call is on the wire and none ended since the last line (the run is not waiting
        for a model: compiling, writing its files...)."""
        now = time.monotonic()
        tokens = self._completion_tokens()
        rate = (tokens - self._tokens) / max(now - self._said, 1e-9)
        clients = self.calls.clients
        done = sum(totals.calls for replica in clients.every_replica() for totals in replica.usage_totals().values())
        waiting = {role: clients.in_flight(role).now for role in clients}
        waiting = {role: count for role, count in waiting.items() if count}
        self._said, self._tokens = now, tokens
        if not waiting and done == self._done:
            return None
        self._done = done
        waits = ", ".join(f"{role} ({count})" for role, count in waiting.items()) or "nothing on the wire"
        doing = self.work or f"step {self._step}"
        return (f"[working] {doing}, {clock(now - self._step_began)} in: {done:,} calls done "
                f"({self.calls.failures_total:,} failed), {sum(waiting.values())} in flight, {rate:,.1f} tokens/s "
                f"since the last line; waiting for {waits}")

    def _completion_tokens(self) -> int:
        return sum(totals.completion_tokens for replica in self.calls.clients.every_replica()
                   for totals in replica.usage_totals().values())
