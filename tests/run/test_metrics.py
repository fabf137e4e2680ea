"""The Prometheus endpoint of an embedded learner, scraped over HTTP while the learner runs: the
version in service, the candidate and its share, rewards per version with their interval,
decisions, the requests seen towards the next decision and about how many more it needs, queue
depth, batch and publish latency."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import msgspec
import pytest

pytest.importorskip("prometheus_client", reason="the metrics extra: pip install -e '.[metrics]'")

from combee_fast.ace.calls import AceCalls
from combee_fast.config import OnlineConfig, ReleaseConfig, SessionConfig, SimConfig, TaskConfig  # noqa: E402
from combee_fast.embedded.threaded import ThreadedLearner  # noqa: E402
from combee_fast.ace.playbook import Playbook  # noqa: E402
from combee_fast.run.events import Events  # noqa: E402
from combee_fast.embedded.metrics import MetricsEndpoint  # noqa: E402
from combee_fast.session import open_session  # noqa: E402

CONFIG = SessionConfig(task=TaskConfig(train_split="train", val_split="val[0:10]"), sim=SimConfig("flat", 1e-4))


def _samples(text: str) -> dict[str, float]:
    """``name{labels}`` -> value, for every sample line of a Prometheus text exposition."""
    found = {}
    for line in text.splitlines():
        match = re.fullmatch(r"([a-z_]+(?:\{[^}]*\})?) (\S+)", line)
        if match:
            found[match[1]] = float(match[2])
    return found


async def _scrape(url: str) -> dict[str, float]:
    async with aiohttp.ClientSession() as client, client.get(url) as response:
        assert response.status == 200 and response.content_type == "text/plain"
        return _samples(await response.text())


async def test_the_metrics_endpoint_serves_the_release_figures_over_http() -> None:
    metrics = MetricsEndpoint()
    online = OnlineConfig(batch_size=16, max_wait_s=30.0,
                          release=ReleaseConfig(policy="staged", stages=(0.5, 1.0), margin=0.1, status_every=8))
    try:
        async with open_session(CONFIG) as session:
            answers = [await AceCalls(session.calls).generate(e, "", epoch=0) for e in session.train_split.examples[:16]]
            rollouts = [msgspec.structs.replace(answers[i % 16], round=i) for i in range(64)]
            async with ThreadedLearner(session.calls, Playbook.empty(), online, events=Events(metrics)) as learner:
                await asyncio.gather(*[await learner.submit(r, version=0) for r in rollouts[:16]])
                for _ in range(500):
                    if learner.release.candidate is not None:
                        break
                    await asyncio.sleep(0.01)
                tickets = []
                for i, rollout in enumerate(rollouts[16:40]):  # the candidate's rewards beside the incumbent's
                    version = 1 if i % 2 else 0
                    tickets.append(await learner.submit(rollout, version=version))
                figures = await _scrape(metrics.url)
                for _ in range(500):  # the learner's thread emits the status after those rewards
                    if figures["combee_release_next_decision_requests"] > 0:
                        break
                    await asyncio.sleep(0.01)
                    figures = await _scrape(metrics.url)
                await asyncio.gather(*tickets, *[await learner.submit(r, version=0) for r in rollouts[40:48]])
            after = await _scrape(metrics.url)
    finally:
        metrics.close()
    assert figures["combee_release_version_in_service"] == 0
    assert figures["combee_release_candidate_version"] == 1 and figures["combee_release_candidate_share"] == 0.5
    assert figures['combee_release_decisions_total{decision="candidate"}'] == 1
    assert figures["combee_release_next_decision_requests"] > 0 and figures["combee_release_next_decision_more"] > 0
    assert figures['combee_release_rewards{version="0"}'] >= 16
    mean, lower, upper = (figures[f'combee_release_reward_{stat}{{version="0"}}'] for stat in ("mean", "lower", "upper"))
    assert 0 <= lower < mean < upper <= 1
    assert figures["combee_learner_batches_total"] == 1 and figures["combee_learner_queue_depth"] >= 0
    assert figures["combee_learner_batch_seconds_count"] == 1 and figures["combee_learner_publish_latency_seconds_sum"] > 0
    assert after["combee_learner_batches_total"] == 3 and after['combee_release_rewards{version="1"}'] == 12
    assert after["combee_learner_version"] >= 2
    assert after["combee_release_next_decision_requests"] == 32  # 12 of the candidate's, 20 of the incumbent's
    assert after["combee_release_next_decision_more"] > 0  # at a margin of 0.1, tens of rewards decide nothing
    with pytest.raises(aiohttp.ClientConnectionError):
        await _scrape(metrics.url)  # closed: nothing listens any more
