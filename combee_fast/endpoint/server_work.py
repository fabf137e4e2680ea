"""What a llama.cpp server says it spent its time on: reading prompts or generating tokens.

llama.cpp's server, started with its metrics endpoint on (``--metrics``; the ``--local`` server
always is, :mod:`.local`), counts on ``GET /metrics`` (Prometheus text) the prompt tokens it
processed and the seconds it spent on them, and the tokens it generated and the seconds that took.
:func:`read_server_work` reads those four counters; the difference of two readings
(:meth:`ServerWork.since`) is the work done between them.

The seconds are *slot* seconds: each slot's own processing time, summed over slots, so with
several slots busy at once they add up to more than the wall time. With one slot they are the
server's busy time. :attr:`ServerWork.prefill_share` is the share of them spent reading prompts:
on a GPU prompts are read in parallel and the share is small; on a CPU, where reading a prompt is
as compute-bound as generating, it bounds how much of a server's time any workload with those
prompts can spend generating.

A run counts the work of every llama.cpp server its roles use: the ``--local`` one and each
endpoint the start-up probe found to be one (:attr:`~.capabilities.Capabilities.server`), when it
serves its counters (``llama-server --metrics``). :func:`work_since` adds up the servers read
before and after; their slot seconds add up as one server's slots do.
"""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp
import msgspec

from combee_fast.endpoint.capabilities import root_url
from combee_fast.endpoint.capped import ACCEPT_ENCODING, BadEncoding, ReplyTooLarge, read_capped

COUNTERS = {
    "llamacpp:prompt_tokens_total": "prompt_tokens",
    "llamacpp:prompt_seconds_total": "prompt_s",
    "llamacpp:tokens_predicted_total": "generated_tokens",
    "llamacpp:tokens_predicted_seconds_total": "generate_s",
}
"""llama.cpp's Prometheus counters, by the :class:`ServerWork` field each becomes."""
CACHED_COUNTER = "llamacpp:prompt_tokens_cached_total"
"""Prompt tokens reused from the server's prompt cache (not in ``prompt_tokens``): newer servers only."""
READ_TIMEOUT_S = 5.0
"""Seconds a reading of a server's counters may take before it counts as not served."""
MAX_BYTES = 1 << 20
"""The most a ``/metrics`` reply may hold, decoded (llama.cpp's is a few kB)."""


class ServerWork(msgspec.Struct, frozen=True):
    """A llama.cpp server's work (module docstring): prompt tokens read and the slot seconds that
    took, tokens generated and the slot seconds that took; ``cached_tokens``, the prompt tokens it
    did not read because its prompt cache held them (None: the server does not count them);
    ``servers``: the root URLs of the servers whose work it is (several: summed; empty: not said)."""

    prompt_tokens: float
    prompt_s: float
    generated_tokens: float
    generate_s: float
    cached_tokens: float | None = None
    servers: tuple[str, ...] = ()

    def since(self, earlier: ServerWork) -> ServerWork:
        """The work done between ``earlier`` and this reading (of the same servers)."""
        cached = (None if self.cached_tokens is None or earlier.cached_tokens is None
                  else self.cached_tokens - earlier.cached_tokens)
        return ServerWork(self.prompt_tokens - earlier.prompt_tokens, self.prompt_s - earlier.prompt_s,
                          self.generated_tokens - earlier.generated_tokens, self.generate_s - earlier.generate_s,
                          cached, self.servers)

    def plus(self, other: ServerWork) -> ServerWork:
        """This work and ``other``'s (another server's) together; cached tokens only when both count them."""
        cached = None if self.cached_tokens is None or other.cached_tokens is None else self.cached_tokens + other.cached_tokens
        return ServerWork(self.prompt_tokens + other.prompt_tokens, self.prompt_s + other.prompt_s,
                          self.generated_tokens + other.generated_tokens, self.generate_s + other.generate_s,
                          cached, self.servers + other.servers)

    @property
    def prefill_share(self) -> float | None:
        """The share of the server's slot seconds spent reading prompts (None: it did nothing)."""
        busy = self.prompt_s + self.generate_s
        return self.prompt_s / busy if busy > 0 else None

    @property
    def cached_share(self) -> float | None:
        """The share of the prompt tokens the prompt cache spared reading (None: not counted, or none)."""
        if self.cached_tokens is None or self.cached_tokens + self.prompt_tokens <= 0:
            return None
        return self.cached_tokens / (self.cached_tokens + self.prompt_tokens)


def parse_server_work(text: str) -> ServerWork | None:
    """The :class:`ServerWork` in a ``/metrics`` reply (Prometheus text); None when any of its
    four :data:`COUNTERS` is missing or not a number (not a llama.cpp server, or one too old)."""
    fields = {**COUNTERS, CACHED_COUNTER: "cached_tokens"}
    found: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in fields:
            try:
                found[fields[name]] = float(value.strip())
            except ValueError:
                return None
    if not all(field in found for field in COUNTERS.values()):
        return None
    return ServerWork(found["prompt_tokens"], found["prompt_s"], found["generated_tokens"], found["generate_s"],
                      found.get("cached_tokens"))


async def read_server_work(base_url: str, *, headers: Mapping[str, str] | None = None,
                           timeout_s: float = READ_TIMEOUT_S) -> ServerWork | None:
    """The work counters of the llama.cpp server at ``base_url`` (its root or its ``/v1``), asked
    with ``headers`` (an endpoint's credentials: ``/metrics`` is not public on a server started with
    an API key); None when it does not serve them (no ``/metrics``, another kind of server, not
    answering within ``timeout_s``). Never raises for the server's failures."""
    root = root_url(base_url)
    asked = {**(headers or {}), "Accept-Encoding": ACCEPT_ENCODING}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s), auto_decompress=False) as http:
            async with http.get(root + "/metrics", headers=asked) as response:
                if response.status != 200:
                    return None
                work = parse_server_work((await read_capped(response, MAX_BYTES)).decode())
    except (aiohttp.ClientError, TimeoutError, UnicodeDecodeError, ReplyTooLarge, BadEncoding):
        return None
    return None if work is None else msgspec.structs.replace(work, servers=(root,))


def work_since(after: Mapping[str, ServerWork], before: Mapping[str, ServerWork]) -> ServerWork | None:
    """The work of several servers (by root URL) between two readings, summed over the servers read
    both times; None when none was."""
    done = [after[root].since(before[root]) for root in after if root in before]
    if not done:
        return None
    total = done[0]
    for work in done[1:]:
        total = total.plus(work)
    return total
