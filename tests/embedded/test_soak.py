"""Soak: the online learner takes many submissions (``COMBEE_SOAK_SUBMISSIONS``, default 30,000)
through injected faults (429, 500, dropped connections, malformed and truncated replies) from a
``combee sim-server --world echo`` process on loopback (its own memory is not ours; echoed replies
exercise the transport, the faults and the learner's bookkeeping, not a playbook that keeps
learning). Every rollout lands in exactly one applied batch or is reported failed (its ticket
fails); the learner's in-memory history stays bounded; and memory is flat over the second half:
fewer than :data:`SECOND_HALF_OBJECTS` more live Python objects, and the resident set grows by
less than :data:`SECOND_HALF_RSS_BYTES` (what grew before, found with
``python bench/online_memory.py --tracemalloc``, was the applied-batch history: now
``OnlineConfig.keep_batches`` batches).

The history kept here, :data:`KEPT_BATCHES`, is full well before the first half ends, so the
second half measures what a long-lived host keeps growing, not the history filling up.
CI runs it as it stands; ``COMBEE_SOAK_SUBMISSIONS=100000`` is the long soak."""

from __future__ import annotations

import asyncio
import gc
import os
import resource
import subprocess
import sys
import time

import msgspec
import pytest

from combee_fast.config import FaultConfig, OnlineConfig
from combee_fast.embedded.online import AppliedBatch, OnlineLearner
from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.ace.playbook import Playbook
from combee_fast.ace.calls import AceCalls
from combee_fast.tasks.registry import get_task

SUBMISSIONS = int(os.environ.get("COMBEE_SOAK_SUBMISSIONS", "30000"))
FAULTS = FaultConfig(rate_429=0.02, rate_500=0.02, rate_drop=0.02, rate_malformed=0.02, rate_truncated=0.02,
                     retry_after_s=0.0)
EXAMPLES = 50
SAMPLES = 20  # RSS samples over the run
TOKEN_BUDGET = 4000  # the playbook itself stays bounded
SECOND_HALF_RSS_BYTES = 4 * 2**20
"""RSS grows in steps of about 2 MB as the allocator takes memory from the system (a single step
has been seen with every object count flat), so the bound is two steps: over the second half's
15,000 submissions a leak of 300 bytes a submission crosses it."""
SECOND_HALF_OBJECTS = 5000
"""Live Python objects the second half may add (a leak of one object a submission adds 15,000)."""
KEPT_BATCHES = 20  # of 256 rollouts: full after 5,120 submissions


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def _sim_server() -> subprocess.Popen[str]:
    rates = [arg for kind, rate in (("429", FAULTS.rate_429), ("500", FAULTS.rate_500), ("drop", FAULTS.rate_drop),
                                    ("malformed", FAULTS.rate_malformed), ("truncated", FAULTS.rate_truncated))
             for arg in (f"--rate-{kind}", str(rate))]
    return subprocess.Popen([sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0", "--world", "echo",
                             "--preset", "flat",
                             "--time-scale", "1e-5", "--seed", "3", "--retry-after", "0", *rates],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_online_learner_soak_loses_nothing_and_memory_stays_flat() -> None:
    server = _sim_server()
    try:
        line = await asyncio.wait_for(asyncio.to_thread(server.stdout.readline), 60)  # type: ignore[union-attr]
        assert line.startswith("listening on "), server.stderr.read()  # type: ignore[union-attr]
        await _soak(line.split()[-1])
    finally:
        server.terminate()
        server.wait(timeout=30)


async def _soak(url: str) -> None:
    task = get_task("formula")
    examples = task.load("train").examples[:EXAMPLES]
    async with EndpointClient(EndpointConfig(name="sim", base_url=url, model="sim")) as client:
        agents = AceCalls.on_client(task, client, seed=0)
        answers = [await agents.generate(e, "", epoch=0) for e in examples]
        landed = bytearray(SUBMISSIONS)  # times each submission landed in an applied batch or failed
        number_of = {answer.example.id: i for i, answer in enumerate(answers)}

        def index(rollout_id: str) -> int:
            example_id, round_ = rollout_id.rsplit("#r", 1)
            return int(round_) * EXAMPLES + number_of[example_id]

        async def on_publish(playbook: Playbook, batch: AppliedBatch) -> None:
            for rollout_id in batch.rollout_ids:
                landed[index(rollout_id)] += 1

        failed = 0

        def settled(i: int, ticket: asyncio.Future[AppliedBatch]) -> None:
            nonlocal failed
            if ticket.exception() is not None:
                failed += 1
                landed[i] += 1

        config = OnlineConfig(batch_size=256, max_wait_s=0.05, queue_size=1024, workers=128, keep_batches=KEPT_BATCHES)
        rss: list[int] = []
        started = time.monotonic()
        async with OnlineLearner(agents.calls, Playbook.empty(token_budget=TOKEN_BUDGET), config,
                                 on_publish=on_publish) as learner:
            for i in range(SUBMISSIONS):
                rollout = msgspec.structs.replace(answers[i % EXAMPLES], round=i // EXAMPLES)
                ticket = await learner.submit(rollout)
                ticket.add_done_callback(lambda t, i=i: settled(i, t))
                if i % (SUBMISSIONS // SAMPLES) == 0:
                    if i == SUBMISSIONS // 2:
                        gc.collect()
                        half, half_objects = _rss_bytes(), len(gc.get_objects())
                    rss.append(_rss_bytes())
            gc.collect()
            end, end_objects = _rss_bytes(), len(gc.get_objects())
        elapsed = time.monotonic() - started
        history = len(learner.batches)
        retries = sum(totals.retries for totals in client.usage_totals().values())
    print(f"soak: {SUBMISSIONS} submissions in {elapsed:.0f} s, {failed} failed, {retries} retries, "
          f"RSS MB {[r >> 20 for r in rss]}, second half {(end - half) / 2**20:+.2f} MB, "
          f"{end_objects - half_objects:+,} objects")
    assert all(n == 1 for n in landed), (
        f"{sum(1 for n in landed if n == 0)} submissions lost, {sum(1 for n in landed if n > 1)} counted twice")
    assert retries > 0  # the faults were injected, and retried
    assert history <= config.keep_batches
    assert end - half < SECOND_HALF_RSS_BYTES, f"RSS grew from {half} to {end} bytes over the second half ({rss})"
    assert end_objects - half_objects < SECOND_HALF_OBJECTS, f"{end_objects - half_objects} more live objects"
