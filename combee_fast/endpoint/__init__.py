"""Talking to inference servers: the async client, the record/replay cache, the simulated server.

- :mod:`.client`: :class:`EndpointClient` for OpenAI-compatible ``/chat/completions``.
- :mod:`.cache`: :class:`ReplayCache` (off / record / replay / record-missing).
- :mod:`.sim`: :class:`SimServer`, a loopback server with a continuous-batching latency model
  (:mod:`.sim_latency`), pluggable responders (:mod:`.sim_responders`) and fault injection.
- :mod:`.sim_cli`: the ``sim-server`` subcommand (runs on uvloop when available).
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
