"""GEPA interop: Combee's map/reduce as a reflection strategy, over real HTTP on loopback.

The strategy itself needs no ``gepa`` package; the test of GEPA's own loop with it is skipped
only when the package (the ``bench`` extra) is absent.
"""

from __future__ import annotations

import asyncio
import importlib.util
import math

import pytest

from combee_fast.config import CombeeConfig
from combee_fast.endpoint.blocking import BlockingChat
from combee_fast.gepa.interop import CombeeReflectionStrategy, rewrite_text
from combee_fast.learners import role_table
from combee_fast.sim.world import TaskWorld
from combee_fast.sim.peers import PeerReplies, PeerRouter
from combee_fast.sim.server import SimServer
from combee_fast.sim.spans import chain_depth, peak_overlap
from combee_fast.tasks.registry import get_task

CURRENT = "Answer the question."


def _server(time_scale: float = 0.01) -> SimServer:
    world = TaskWorld.for_task(get_task("formula"), ("train", "val"), roles=role_table())
    return SimServer(PeerRouter(world, PeerReplies(world), world.plays()), preset="flat", time_scale=time_scale)


def test_rewrite_text_reads_json_fenced_or_plain_replies() -> None:
    assert rewrite_text('{"reasoning": "r", "instruction": "New.\\n- a"}') == "New.\n- a"
    assert rewrite_text("Thoughts.\n```\nNew text.\n```") == "New text."
    assert rewrite_text("  plain  ") == "plain"
    assert rewrite_text("   ") is None


async def test_map_calls_are_all_in_flight_at_once_then_one_reduce() -> None:
    records = [{"Inputs": f"question {i}", "Generated Outputs": "1.00", "Feedback": "wrong"} for i in range(16)]
    # Each call lasts ~0.5 s, so the map's threads overlap even when a busy machine starts one late
    # (at 0.01, 27 ms a call, CI under two workers once started the fourth after the others ended).
    async with _server(time_scale=0.2) as server:
        lm = BlockingChat(server.url, "sim")
        strategy = CombeeReflectionStrategy(lm, combee=CombeeConfig(), seed=3)
        try:
            proposal, following = await asyncio.to_thread(
                strategy.reflect, {"system_prompt": CURRENT}, {"system_prompt": records}, ["system_prompt"])
        finally:
            lm.close()
        spans = server.spans()
    groups = math.isqrt(16)
    assert following is strategy
    assert proposal.metadata["combee:system_prompt:map_calls"] == groups
    assert proposal.metadata["combee:system_prompt:reduce_calls"] == 1
    assert strategy.calls == len(spans) == groups + 1
    assert peak_overlap(spans) == groups and strategy.peak_in_flight == groups  # the map: all at once
    assert chain_depth(spans) == 2  # map, then reduce
    text = proposal.new_texts["system_prompt"]
    assert text.startswith(CURRENT + "\n") and len(text.split("\n")) == 1 + groups  # every revision's line kept
    assert "<proposals>" in proposal.prompts["system_prompt"]


async def test_no_records_no_proposal() -> None:
    async with _server() as server:
        lm = BlockingChat(server.url, "sim")
        try:
            proposal, _ = await asyncio.to_thread(
                CombeeReflectionStrategy(lm).reflect, {"system_prompt": CURRENT}, {}, ["system_prompt"])
        finally:
            lm.close()
        assert proposal.new_texts == {} and server.spans() == []


@pytest.mark.skipif(
    importlib.util.find_spec("gepa") is None, reason="the PyPI gepa package is not installed (pip install -e '.[bench]')",
)
async def test_gepa_own_loop_runs_with_the_combee_strategy() -> None:
    import gepa

    task = get_task("formula")
    examples = task.load("train").examples[:16]
    data = [{"input": e.input, "answer": e.target or "", "additional_context": {}} for e in examples]
    async with _server() as server:
        lm = BlockingChat(server.url, "sim")
        strategy = CombeeReflectionStrategy(lm)

        class Quiet:
            def log(self, message: str) -> None:
                pass

        try:
            result = await asyncio.to_thread(
                gepa.optimize, seed_candidate={"system_prompt": CURRENT}, trainset=data, valset=data[:4],
                task_lm=lm, reflection_strategy=strategy, reflection_minibatch_size=16, max_metric_calls=60,
                logger=Quiet(),
            )
        finally:
            lm.close()
    assert strategy.calls >= math.isqrt(16) + 1  # at least one reflection: its map and its reduce
    assert strategy.peak_in_flight == math.isqrt(16)
    assert result.total_metric_calls >= 60


async def test_reflect_many_gives_one_proposal_per_job_in_order() -> None:
    records = [{"Inputs": f"question {i}", "Feedback": "wrong"} for i in range(4)]
    jobs = [({"system_prompt": f"Rule {n}."}, {"system_prompt": records}, ["system_prompt"]) for n in range(3)]
    async with _server() as server:
        lm = BlockingChat(server.url, "sim")
        try:
            results = await asyncio.to_thread(CombeeReflectionStrategy(lm).reflect_many, jobs)
        finally:
            lm.close()
    assert [proposal.new_texts["system_prompt"].split("\n")[0] for proposal, _ in results] == [
        "Rule 0.", "Rule 1.", "Rule 2."]
