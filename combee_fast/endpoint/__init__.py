"""Talking to inference servers.

- :mod:`.client`: :class:`~.client.EndpointClient` for OpenAI-compatible ``/chat/completions``.
- :mod:`.http1`: the keep-alive HTTP/1.1 pool of ``http://`` endpoints; :mod:`.capped`: reply
  bodies read up to a size cap; :mod:`.streamed`: streamed replies joined into one completion.
- :mod:`.inflight`: each role's attempts on the wire, counted (most at once, time-weighted mean).
- :mod:`.gate`: requests let onto the wire at once, lowered on overload; :mod:`.retry`: backoff
  and Retry-After; :mod:`.pool`: replicas of one model behind one role.
- :mod:`.calls`: one call as the engine sees it; :mod:`.wire`: the records on the wire;
  :mod:`.structured`: JSON replies and the repair request; :mod:`.capabilities`: what an
  endpoint can do, found at start-up; :mod:`.batching`: its latency and tokens/s against
  requests at once, measured at start-up for the live planner.
- :mod:`.cache`: :class:`~.cache.ReplayCache` (off / record / replay / record-missing).
- :mod:`.blocking`: a blocking chat callable for synchronous libraries.
- :mod:`.local`: the llama.cpp server ``--local`` starts (its start-up self-test included);
  :mod:`.models`: the models it can start by name, split ones assembled into the cache;
  :mod:`.llama_host`: llama.cpp's native server hosted by the xllamacpp wheel; :mod:`.tether`: a
  command that dies with the process that started it; :mod:`.server_work`: a llama.cpp server's
  own count of the time it spent reading prompts and generating.

The simulated server is in :mod:`combee_fast.sim`.
"""

from combee_fast.endpoint.cache import CacheMode, ReplayCache
from combee_fast.endpoint.calls import ChatRequest, ChatResult
from combee_fast.endpoint.client import EndpointClient, EndpointConfig, UsageTotals

__all__ = [
    "CacheMode",
    "ChatRequest",
    "ChatResult",
    "EndpointClient",
    "EndpointConfig",
    "ReplayCache",
    "UsageTotals",
]
