"""Several replicas of one endpoint behind one role: least-outstanding routing and fail-over.

An :class:`EndpointPool` holds one :class:`~combee_fast.endpoint.client.EndpointClient` per base
URL (so each replica has its own connection pool, concurrency cap, structured-output form and
usage totals, keyed by its URL) and offers the client's interface (``chat``, ``check``,
``detect``, ``usage_totals``, ``count_tokens``, ``aclose``).

Routing: each call goes to the healthy replica with the fewest calls outstanding (ties: the one
used least recently). A call that fails for a reason a replica can cause (connection refused or
dropped, timeout, HTTP 5xx, after the client's own retries) takes that replica out for
``transport.replica_down_s`` seconds and is sent to the next replica, so
stopping one replica loses no call while another is up; after ``down_s`` one call probes the
replica back in. A reply the model got wrong (malformed JSON, schema mismatch, truncation) is
the model's answer, not the replica's fault: it is returned as it is.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from combee_fast.endpoint.calls import ChatRequest, ChatResult
from combee_fast.endpoint.capabilities import Capabilities
from combee_fast.endpoint.client import EndpointClient, EndpointConfig, UsageTotals
from combee_fast.schema import CallError

def replica_fault(error: CallError | None) -> bool:
    """True when ``error`` says the replica (not the model's reply) failed."""
    if error is None:
        return False
    if error.kind in ("connection", "timeout"):
        return True
    return error.kind == "http_status" and error.status is not None and error.status >= 500


class EndpointPool:
    """``async with EndpointPool(clients) as pool``: one role's replicas (see the module doc)."""

    def __init__(self, clients: Sequence[EndpointClient]) -> None:
        if not clients:
            raise ValueError("an endpoint pool needs at least one replica")
        self.replicas = tuple(clients)
        self.config: EndpointConfig = clients[0].config
        self._down_s = self.config.transport.replica_down_s
        self._outstanding = [0] * len(clients)
        self._down_until = [0.0] * len(clients)
        self._last_used = [0] * len(clients)
        self._calls = 0
        self.routed = [0] * len(clients)  # calls sent to each replica (fail-overs included)
        self.failovers = 0

    async def __aenter__(self) -> EndpointPool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @property
    def in_flight(self) -> int:
        return sum(client.in_flight for client in self.replicas)

    @property
    def capabilities(self) -> Capabilities:
        """The first replica's capabilities (every replica's are in :attr:`replicas`)."""
        return self.replicas[0].capabilities

    async def check(self) -> None:
        for client in self.replicas:
            await client.check()

    async def detect(self) -> list[Capabilities]:
        return [await client.detect() for client in self.replicas]

    async def aclose(self) -> None:
        for client in self.replicas:
            await client.aclose()

    def usage_totals(self) -> dict[tuple[str, str, str], UsageTotals]:
        """Totals keyed by (role, model, endpoint): one row per replica."""
        merged: dict[tuple[str, str, str], UsageTotals] = {}
        for client in self.replicas:
            merged.update(client.usage_totals())
        return merged

    async def count_tokens(self, text: str) -> int | None:
        """Tokens in ``text`` by the first healthy replica's tokenizer
        (:meth:`EndpointClient.count_tokens`; replicas serve one model); ``None`` when every
        replica is out or that one cannot count."""
        now = time.monotonic()
        for client, down_until in zip(self.replicas, self._down_until):
            if down_until <= now:
                return await client.count_tokens(text)
        return None

    def _pick(self, tried: set[int]) -> int | None:
        now = time.monotonic()
        candidates = [i for i in range(len(self.replicas)) if i not in tried and self._down_until[i] <= now]
        if not candidates:  # every untried replica is out: try the one back soonest rather than fail
            candidates = [i for i in range(len(self.replicas)) if i not in tried]
        if not candidates:
            return None
        return min(candidates, key=lambda i: (self._outstanding[i], self._last_used[i]))

    async def chat(self, request: ChatRequest) -> ChatResult:
        """The call on the least-loaded healthy replica; on a replica fault, on the next one."""
        tried: set[int] = set()
        result: ChatResult | None = None
        while (index := self._pick(tried)) is not None:
            tried.add(index)
            self._calls += 1
            self._last_used[index] = self._calls
            self._outstanding[index] += 1
            self.routed[index] += 1
            try:
                result = await self.replicas[index].chat(request)
            finally:
                self._outstanding[index] -= 1
            if not replica_fault(result.error):
                self._down_until[index] = 0.0
                return result
            self._down_until[index] = time.monotonic() + self._down_s
            self.failovers += 1
        assert result is not None
        return result
