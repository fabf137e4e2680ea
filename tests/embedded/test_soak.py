"""Soak: the online learner takes 100,000 submissions through injected faults (429, 500, dropped
connections, malformed and truncated replies) on a real simulated server on loopback. Every
rollout lands in exactly one applied batch or is reported failed (its ticket fails); memory stays
flat (RSS sampled as it runs); the learner's in-memory history stays bounded.

It takes minutes (about 8 on a loaded 2-core machine), so it runs only when asked:
``COMBEE_SOAK=1 python -m pytest -m slow tests/run/test_soak.py``; ``COMBEE_SOAK_SUBMISSIONS`` sets
the number of submissions (default 100,000)."""

from __future__ import annotations

import asyncio
import os
import resource
import time

import msgspec
import pytest

from combee_fast.config import HISTORY_KEPT, FaultConfig, OnlineConfig
from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.playbook import Playbook
from combee_fast.roles.agents import Agents, RoleClients
from combee_fast.embedded.online import AppliedBatch, OnlineLearner
from combee_fast.tasks.registry import get_task
from tests.conftest import StartSimServer

SUBMISSIONS = int(os.environ.get("COMBEE_SOAK_SUBMISSIONS", "100000"))
FAULTS = FaultConfig(rate_429=0.02, rate_500=0.02, rate_drop=0.02, rate_malformed=0.02, rate_truncated=0.02,
                     retry_after_s=0.0)
EXAMPLES = 50
SAMPLES = 20  # RSS samples over the run
TOKEN_BUDGET = 4000  # the playbook itself stays bounded


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.skipif(not os.environ.get("COMBEE_SOAK"), reason="a soak of minutes: set COMBEE_SOAK=1 to run it")
async def test_online_learner_soak_loses_nothing_and_memory_stays_flat(start_sim_server: StartSimServer) -> None:
    server = await start_sim_server(preset="flat", time_scale=1e-5, faults=FAULTS, seed=3)
    task = get_task("formula")
    examples = task.load("train").examples[:EXAMPLES]
    async with EndpointClient(EndpointConfig(name="sim", base_url=server.url, model="sim")) as client:
        agents = Agents(task, RoleClients.single(client), seed=0)
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

        config = OnlineConfig(batch_size=256, max_wait_s=0.05, queue_size=1024, workers=128)
        rss: list[int] = []
        started = time.monotonic()
        async with OnlineLearner(agents, Playbook.empty(token_budget=TOKEN_BUDGET), config,
                                 on_publish=on_publish) as learner:
            for i in range(SUBMISSIONS):
                rollout = msgspec.structs.replace(answers[i % EXAMPLES], round=i // EXAMPLES)
                ticket = await learner.submit(rollout)
                ticket.add_done_callback(lambda t, i=i: settled(i, t))
                if i % (SUBMISSIONS // SAMPLES) == 0:
                    rss.append(_rss_bytes())
        rss.append(_rss_bytes())
        elapsed = time.monotonic() - started
    counters = server.counters()
    assert sum(counters.faults_injected.values()) > 0
    assert all(n == 1 for n in landed), (
        f"{sum(1 for n in landed if n == 0)} submissions lost, {sum(1 for n in landed if n > 1)} counted twice")
    assert len(learner.batches) <= HISTORY_KEPT
    warm = rss[len(rss) // 4]  # after the first quarter: caches, pools and the playbook have grown
    assert rss[-1] - warm < 64 * 2**20, f"RSS grew from {warm} to {rss[-1]} bytes ({rss})"
    print(f"soak: {SUBMISSIONS} submissions in {elapsed:.0f} s, {failed} failed, "
          f"{counters.requests} requests, faults {counters.faults_injected}, RSS MB {[r >> 20 for r in rss]}")
