"""What a request given up on costs the next one, on the local llama.cpp server (``--local``).

A long request (``--max-tokens``, default 600, on a story prompt) is sent with a 1 s timeout and
no retry; the moment it times out, a one-token request is sent and its wait is timed. Against
llama-cpp-python's server, which serves one request at a time, a non-streamed request it was
given up on keeps generating, and the next waits behind it; a streamed one stops when its
connection closes. Each mode runs ``--repeats`` times, the server idle in between.

    python bench/abandoned.py

Needs the ``local`` extra. The last line is ``next_wait_streamed_s=<median> next_wait_plain_s=<median>
ratio=<plain/streamed> server=<kind: llama-server or xllamacpp>``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from combee_fast.config import LocalConfig, TransportConfig
from combee_fast.endpoint.calls import ChatRequest
from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.endpoint.local import LocalServer
from combee_fast.schema import Message

LONG_PROMPT = "Write a very long story about a dragon who learns to cook, at least 2000 words."


def _client(url: str, model: str, transport: TransportConfig) -> EndpointClient:
    return EndpointClient(EndpointConfig(name="local", base_url=url, model=model, json_schema=False,
                                         transport=transport))


async def next_wait_after_timeout(url: str, model: str, *, stream: bool, max_tokens: int) -> float:
    """Seconds a one-token request waits when sent the moment a ``max_tokens`` request times out
    after 1 s (streamed or not) on the server at ``url`` serving ``model``; raises
    ``AssertionError`` if the long request did not time out."""
    abandoned = _client(url, model, TransportConfig(stream=stream, timeout_s=1.0, max_retries=0))
    follower = _client(url, model, TransportConfig(timeout_s=120.0, max_retries=0))
    try:
        long = await abandoned.chat(ChatRequest(role="generator", messages=(Message(role="user", content=LONG_PROMPT),),
                                                max_tokens=max_tokens, temperature=0.0, seed=1))
        assert long.error is not None and long.error.kind == "timeout", f"the long request did not time out: {long.error}"
        started = time.perf_counter()
        short = await follower.chat(ChatRequest(role="generator", messages=(Message(role="user", content="Say hi."),),
                                                max_tokens=1, temperature=0.0, seed=1))
        waited = time.perf_counter() - started
        assert short.text, f"the one-token request failed: {short.error}"
        return waited
    finally:
        await abandoned.aclose()
        await follower.aclose()


async def _measure(repeats: int, max_tokens: int, settle_s: float) -> tuple[str, list[float], list[float]]:
    streamed: list[float] = []
    plain: list[float] = []
    async with LocalServer(LocalConfig()) as server:
        for _ in range(repeats):
            for stream, waits in ((True, streamed), (False, plain)):
                waits.append(await next_wait_after_timeout(server.url, server.alias, stream=stream,
                                                           max_tokens=max_tokens))
                print(f"stream={stream} next_wait_s={waits[-1]:.2f}", flush=True)
                await asyncio.sleep(settle_s)  # let a ghost finish before the next measurement
        return server.kind, streamed, plain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=600)
    parser.add_argument("--settle", type=float, default=12.0, help="seconds idle between measurements")
    args = parser.parse_args()
    kind, streamed, plain = asyncio.run(_measure(args.repeats, args.max_tokens, args.settle))
    median_streamed, median_plain = statistics.median(streamed), statistics.median(plain)
    print(f"next_wait_streamed_s={median_streamed:.2f} next_wait_plain_s={median_plain:.2f} "
          f"ratio={median_plain / median_streamed:.1f} server={kind.split()[0]}")


if __name__ == "__main__":
    main()
