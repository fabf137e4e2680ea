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
"""

from __future__ import annotations

import aiohttp
import msgspec

COUNTERS = {
    "llamacpp:prompt_tokens_total": "prompt_tokens",
    "llamacpp:prompt_seconds_total": "prompt_s",
    "llamacpp:tokens_predicted_total": "generated_tokens",
    "llamacpp:tokens_predicted_seconds_total": "generate_s",
}
"""llama.cpp's Prometheus counters, by the :class:`ServerWork` field each becomes."""
CACHED_COUNTER = "llamacpp:prompt_tokens_cached_total"
"""Prompt tokens reused from the server's prompt cache (not in ``prompt_tokens``): newer servers only."""


class ServerWork(msgspec.Struct, frozen=True):
    """A llama.cpp server's work (module docstring): prompt tokens read and the slot seconds that
    took, tokens generated and the slot seconds that took; ``cached_tokens``, the prompt tokens it
    did not read because its prompt cache held them (None: the server does not count them)."""

    prompt_tokens: float
    prompt_s: float
    generated_tokens: float
    generate_s: float
    cached_tokens: float | None = None

    def since(self, earlier: ServerWork) -> ServerWork:
        """The work done between ``earlier`` and this reading."""
        cached = (None if self.cached_tokens is None or earlier.cached_tokens is None
                  else self.cached_tokens - earlier.cached_tokens)
        return ServerWork(self.prompt_tokens - earlier.prompt_tokens, self.prompt_s - earlier.prompt_s,
                          self.generated_tokens - earlier.generated_tokens, self.generate_s - earlier.generate_s,
                          cached)

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
    return ServerWork(**found) if all(field in found for field in COUNTERS.values()) else None


async def read_server_work(base_url: str, *, timeout_s: float = 10.0) -> ServerWork | None:
    """The work counters of the llama.cpp server at ``base_url`` (its root or its ``/v1``); None
    when it does not serve them (no ``/metrics``, another kind of server, not answering)."""
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as http:
            async with http.get(root + "/metrics") as response:
                if response.status != 200:
                    return None
                return parse_server_work(await response.text())
    except (aiohttp.ClientError, TimeoutError):
        return None
