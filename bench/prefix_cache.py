"""Which requests of a wave read a shared system prompt cold, on the local llama.cpp server.

``python bench/prefix_cache.py [--slots 4] [--threads 2]``

Combee sends its calls in waves: a step's generators at once, then its reflectors as the
generators end, then its curators at once, all of one role sharing one system prompt (~500 to
~600 tokens). Sequential ACE sends the same prompts one at a time to one slot. This command
measures what the server's prompt cache does with such waves, with the ACE roles' own system
prompts and a one-token reply per request (so only prompt reading is timed), on a fresh server:

1. ``cold``: four generator requests at once (no slot has read the prompt yet);
2. ``switch``: four reflector requests at once (each slot takes another role);
3. ``back``: four generator requests at once again (each slot's generator prompt was put aside
   when it took a reflector, in the server's host-memory cache, ``cache_ram``);
4. ``warm``: one curator request alone, then, once it is answered, four curator requests at once.

Each request reports the prompt tokens its slot's cache held (``cached_tokens``). It prints a
row per wave: how many of its requests found the system prompt cached and the tokens they read;
the last line is ``key=value`` pairs: ``<wave>_cached`` (requests of the wave that found the
prompt, of ``slots``), ``<wave>_read`` (prompt tokens the wave read) for each wave, ``prompt_tokens``
(the generator's system prompt, as the server counts it) and ``slots``.

What it measured on this project's 2-core host (xllamacpp 2026.10, 4 slots, 2026-12-08, two
runs): ``cold`` 1 of 4, ``switch`` 0 of 4, ``back`` 3 of 4, ``warm`` 2 and 1 of 4 (the
generator's system prompt: 479 tokens). A prompt one slot holds does not reach the other slots
while it holds it, and one request sent first does not warm the others: the first wave of each
role reads the role's system prompt in three or four slots, where one slot reads it once and
gets it back from its cache after each other role's call (sequential ACE's server).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass

import aiohttp

from combee_fast.ace.curator import CURATOR_SYSTEM_PROMPT
from combee_fast.ace.generator import GENERATOR_SYSTEM_PROMPT
from combee_fast.ace.reflector import REFLECTOR_SYSTEM_PROMPT
from combee_fast.config import LocalConfig
from combee_fast.endpoint.local import LocalServer
from combee_fast.errors import CombeeError
from physics import WrongWorld, figures_line, guarded


@dataclass(frozen=True)
class Answer:
    """One request's prompt tokens, and those its slot's cache held."""

    prompt_tokens: int
    cached_tokens: int


async def ask(http: aiohttp.ClientSession, url: str, system: str, question: str) -> Answer:
    """One chat request of one reply token; what the server says it read and reused."""
    body = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
            "max_tokens": 1, "temperature": 0}
    async with http.post(f"{url}/chat/completions", json=body) as response:
        if response.status != 200:
            raise CombeeError(f"the local server answered HTTP {response.status}: {(await response.text())[:200]}")
        usage = (await response.json())["usage"]
    return Answer(usage["prompt_tokens"], (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0))


async def wave(http: aiohttp.ClientSession, url: str, system: str, label: str, slots: int) -> list[Answer]:
    """``slots`` requests with ``system`` at once, each with its own question."""
    return list(await asyncio.gather(*(ask(http, url, system, f"{label} question {i}: what is {i} + {i}?")
                                       for i in range(slots))))


async def measure(slots: int, threads: int) -> tuple[dict[str, list[Answer]], int]:
    """The four waves (module doc) on a fresh local server; and the generator's system prompt's
    tokens (a lone request's prompt less its question)."""
    async with LocalServer(LocalConfig(slots=slots, threads=threads)) as server:
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            waves = {"cold": await wave(http, server.url, GENERATOR_SYSTEM_PROMPT, "cold", slots),
                     "switch": await wave(http, server.url, REFLECTOR_SYSTEM_PROMPT, "switch", slots),
                     "back": await wave(http, server.url, GENERATOR_SYSTEM_PROMPT, "back", slots)}
            await ask(http, server.url, CURATOR_SYSTEM_PROMPT, "warm-up question: what is 1 + 1?")
            waves["warm"] = await wave(http, server.url, CURATOR_SYSTEM_PROMPT, "warm", slots)
            bare = await ask(http, server.url, "", "cold question 0: what is 0 + 0?")
    return waves, waves["cold"][0].prompt_tokens - bare.prompt_tokens


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", type=int, default=4, help="the server's slots, and the requests of a wave")
    parser.add_argument("--threads", type=int, default=2, help="the server's CPU threads")
    args = parser.parse_args()
    if args.slots < 2 or args.threads < 1:
        print("bench/prefix_cache.py: --slots must be at least 2 and --threads at least 1", file=sys.stderr)
        return 2
    try:
        waves, prompt_tokens = asyncio.run(measure(args.slots, args.threads))
    except (CombeeError, aiohttp.ClientError) as exc:  # a server that died, refused or answered no JSON
        print(f"bench/prefix_cache.py: {exc}", file=sys.stderr)
        return 2
    if prompt_tokens < 100:
        raise WrongWorld(f"the server counted {prompt_tokens} tokens for the generator's system prompt: it does not "
                         "count prompt tokens as the figures assume")
    if all(a.cached_tokens for a in waves["cold"]):
        raise WrongWorld("every request of the first wave found a cached prompt: the server was not fresh")
    half = prompt_tokens // 2  # a request that found the system prompt reused at least half of it
    print("| wave | requests that found the system prompt cached | prompt tokens read |\n|---|---|---|")
    figures: dict[str, str] = {}
    for name, answers in waves.items():
        found = sum(a.cached_tokens >= half for a in answers)
        read = sum(a.prompt_tokens - a.cached_tokens for a in answers)
        print(f"| {name} | {found} of {len(answers)} | {read:,} |")
        figures |= {f"{name}_cached": str(found), f"{name}_read": str(read)}
    figures |= {"prompt_tokens": str(prompt_tokens), "slots": str(args.slots)}
    print(figures_line(figures))
    return 0


if __name__ == "__main__":
    sys.exit(guarded(main, "bench/prefix_cache.py"))
