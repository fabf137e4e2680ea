"""How many requests one client lets onto the wire at once, lowered when the server is overloaded.

A request that times out most likely waited in the server's queue behind too many others (or
behind the ghost of its own earlier attempt, on a server that keeps generating for a request
nobody waits for): sending the retry at once, with as many others in flight, would time out
again. So a timeout is treated as overload: :meth:`AdmissionGate.overloaded` halves the limit
(never below one) and the limit grows back by one after each ``limit`` answers in a row
(additive increase, multiplicative decrease, as TCP does with its window). Like TCP, the limit
is halved once per episode: requests that were already on the wire when it was last lowered
(many time out together when a server stalls) do not lower it again.

Contract: at most :attr:`AdmissionGate.limit` holders at once, admitted in arrival order; a
waiter cancelled while waiting leaves no trace; :attr:`ceiling` is never exceeded. Entering
the gate gives the holder's *episode*, which it passes to :meth:`overloaded`.
"""

from __future__ import annotations

import asyncio
import collections


class AdmissionGate:
    """``async with gate:`` around each attempt; see the module doc."""

    __slots__ = ("ceiling", "limit", "overloads", "_held", "_answers", "_waiters")
    # ``overloads`` is also the current episode: the number of times the limit went down

    def __init__(self, ceiling: int) -> None:
        if ceiling < 1:
            raise ValueError(f"an admission gate needs a ceiling of at least 1, got {ceiling}")
        self.ceiling = ceiling
        self.limit = ceiling
        self.overloads = 0  # times the limit was lowered
        self._held = 0
        self._answers = 0  # answers since the limit last changed
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def held(self) -> int:
        """Holders admitted and not yet released."""
        return self._held

    async def __aenter__(self) -> int:
        if self._held < self.limit and not self._waiters:
            self._held += 1
            return self.overloads
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # admitted just as it was cancelled
                self._release()
            elif waiter in self._waiters:  # (not already skipped by _admit)
                self._waiters.remove(waiter)
            raise
        return self.overloads

    async def __aexit__(self, *exc_info: object) -> None:
        self._release()

    def set_ceiling(self, ceiling: int) -> None:
        """Admit at most ``ceiling`` from now on (e.g. the slots the server reported)."""
        self.ceiling = max(1, ceiling)
        self.limit = min(self.limit, self.ceiling)

    def overloaded(self, episode: int) -> bool:
        """A holder admitted in ``episode`` timed out: halve the limit (not below one) unless it was
        already lowered since that holder was admitted; ``True`` if it went down."""
        if episode != self.overloads:
            return False
        lowered = max(1, self.limit // 2)
        self._answers = 0
        if lowered == self.limit:
            return False
        self.limit = lowered
        self.overloads += 1
        return True

    def answered(self) -> None:
        """One answer came back: after ``limit`` of them the limit grows by one (up to the ceiling)."""
        if self.limit >= self.ceiling:
            return
        self._answers += 1
        if self._answers >= self.limit:
            self._answers = 0
            self.limit += 1
            self._admit()

    def _release(self) -> None:
        self._held -= 1
        self._admit()

    def _admit(self) -> None:
        while self._waiters and self._held < self.limit:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._held += 1
