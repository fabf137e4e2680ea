"""No ``connection`` retries against the real ``--local`` llama.cpp server, which closes the
connection after each streamed reply although it says keep-alive, and idle ones after 5 s.

Needs the ``local`` extra (xllamacpp and the default local model); skipped, saying so, otherwise.
"""

from __future__ import annotations

import asyncio

from combee_fast.config import LocalConfig, TransportConfig
from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.endpoint.local import LocalServer
from tests.local_models import LOCAL_MODEL_MARKS, THREADS
from tests.endpoint.test_keepalive_close import ask

pytestmark = LOCAL_MODEL_MARKS


async def test_the_local_llama_cpp_server_sees_no_connection_retries() -> None:
    """llama.cpp closes the connection after each streamed reply although it says keep-alive:
    back-to-back streamed calls (the ``--local`` transport) on two slots, and calls past its 5 s
    keep-alive timeout, all answered without a retry."""
    async with LocalServer(LocalConfig(slots=2, threads=THREADS)) as server:
        config = EndpointConfig(name="local", base_url=server.url, model=server.alias, json_schema=False,
                                transport=TransportConfig(concurrency=2, stream=True))
        async with EndpointClient(config) as client:
            results = []
            for gap in (0.0, 0.0, 0.0, 0.0, 5.5, 0.0):
                await asyncio.sleep(gap)
                results += await asyncio.gather(*(client.chat(ask(f"Count to {i}.")) for i in range(8)))
    assert all(r.text for r in results), [r.error for r in results]  # answered (a reply may be cut at max_tokens)
    assert [r.usage.retry_kinds for r in results] == [()] * len(results)
