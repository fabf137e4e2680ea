"""A streamed request the client gives up on stops generating on a real llama.cpp server.

Needs the ``local`` extra (xllamacpp and the default local model); skipped, saying so, otherwise.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from combee_fast.config import LocalConfig
from combee_fast.endpoint.local import LocalServer
from tests.local_models import LOCAL_MODEL_MARKS

# bench/ is not put on sys.path: its gepa.py would hide the gepa package from every later test.
_BENCH = importlib.util.spec_from_file_location("bench_abandoned",
                                                Path(__file__).resolve().parents[2] / "bench" / "abandoned.py")
assert _BENCH is not None and _BENCH.loader is not None
abandoned = importlib.util.module_from_spec(_BENCH)
_BENCH.loader.exec_module(abandoned)

pytestmark = LOCAL_MODEL_MARKS


async def test_a_streamed_request_given_up_on_does_not_hold_up_the_next() -> None:
    async with LocalServer(LocalConfig()) as server:
        streamed = await abandoned.next_wait_after_timeout(server.url, server.alias, stream=True, max_tokens=1000)
    # 1,000 tokens take ~90 s on the 0.5B here (on SmolLM2-135M a non-streamed ghost of 600 held the next call
    # 4.3-4.5 s: bench/abandoned.py).
    assert streamed < 3.0, f"the next request waited {streamed:.2f} s behind the abandoned one"
