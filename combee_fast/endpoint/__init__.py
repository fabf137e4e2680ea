"""Talking to inference servers: the async client and the record/replay cache.

- :mod:`.client`: :class:`EndpointClient` for OpenAI-compatible ``/chat/completions``.
- :mod:`.cache`: :class:`ReplayCache` (off / record / replay / record-missing).
- :mod:`.wire`: the request and response records on the wire; :mod:`.structured`: JSON replies
  and the repair request; :mod:`.retry`: backoff and Retry-After.

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
