"""The online learner's batching: batches follow the queue, publish latency stays bounded,
history stays bounded."""

from __future__ import annotations

import asyncio
import statistics

import msgspec

from combee_fast.ace.calls import AceCalls
from combee_fast.config import OnlineConfig, SessionConfig, SimConfig, TaskConfig
from combee_fast.ace.playbook import Playbook
from combee_fast.embedded.online import OnlineLearner
from combee_fast.session import open_session
from combee_fast.sim.latency import LatencyPreset


def _config(preset: str = "flat", time_scale: float = 1e-4) -> SessionConfig:
    return SessionConfig(task=TaskConfig(train_split="train", val_split="val[0:10]"), sim=SimConfig(preset, time_scale))


async def _rollouts(session, count: int) -> list:
    seeds = [await AceCalls(session.calls).generate(e, "", epoch=0) for e in session.train_split.examples[:50]]
    return [msgspec.structs.replace(seeds[i % 50], round=i // 50) for i in range(count)]


async def test_batches_follow_the_queue_under_a_burst_then_a_trickle() -> None:
    config = OnlineConfig(batch_size=64, max_wait_s=0.01, max_publish_s=5.0, keep_batches=10)
    async with open_session(_config()) as session:
        rollouts = await _rollouts(session, 420)
        async with OnlineLearner(session.calls, Playbook.empty(), config) as learner:
            burst = await asyncio.gather(*(learner.submit(r) for r in rollouts[:400]))
            burst_batches = {b.number: b for b in await asyncio.gather(*burst)}
            trickled = []
            for rollout in rollouts[400:]:
                trickled.append(await learner.submit(rollout))
                await asyncio.sleep(0.05)  # slower than the learner: each batch finds 1 waiting
            trickle_batches = {b.number: b for b in await asyncio.gather(*trickled)}
    burst_sizes = [len(b.rollout_ids) for _, b in sorted(burst_batches.items())]
    trickle_sizes = [len(b.rollout_ids) for _, b in sorted(trickle_batches.items())]
    assert sum(burst_sizes) == 400 and max(burst_sizes) == 64  # under load: up to the planned ceiling
    assert sum(size == 64 for size in burst_sizes) >= 5
    assert sum(trickle_sizes) == 20 and max(trickle_sizes) <= 2 and len(trickle_sizes) >= 10
    every = [*burst_batches.values(), *trickle_batches.values()]
    assert max(b.publish_latency_s for b in every) <= config.max_publish_s
    first_trickle = min(trickle_batches)
    assert burst_batches[min(burst_batches)].arrival_per_s > 100 * trickle_batches[first_trickle + 1].arrival_per_s
    assert len(learner.batches) == 10  # bounded history: only the last keep_batches


SATURATED = LatencyPreset(name="saturated", overhead_s=0.4, decode_s_per_token=0.025, max_running=8,
                          full_batch_slowdown=2.0)


async def test_a_publish_latency_bound_lowers_the_ceiling_when_batches_take_too_long() -> None:
    """On an endpoint that runs 8 requests at once, a batch of 64 takes ~8x longer than a batch
    of 8: the ceiling comes down until batches publish within the bound."""
    config = OnlineConfig(batch_size=64, max_wait_s=0.0, max_publish_s=0.25, keep_batches=100)
    async with open_session(_config("flat", 2e-3)) as session:
        session.server.set_preset(SATURATED)
        rollouts = await _rollouts(session, 600)
        async with OnlineLearner(session.calls, Playbook.empty(), config) as learner:
            tickets = await asyncio.gather(*(learner.submit(r) for r in rollouts))
            await asyncio.gather(*tickets)
    batches = list(learner.batches)
    assert batches[0].ceiling == 64 and batches[0].publish_latency_s > config.max_publish_s
    assert min(b.ceiling for b in batches) < 64
    settled = batches[len(batches) // 2 :]  # real seconds on a shared machine: judged on the median
    assert statistics.median(len(b.rollout_ids) for b in settled) < 64
    assert statistics.median(b.publish_latency_s for b in settled) <= config.max_publish_s
