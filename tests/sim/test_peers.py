"""The peers' responder over real HTTP: routing by role, reply formats the peers parse."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from combee_fast.endpoint.blocking import BlockingChat
from combee_fast.learners import role_table
from combee_fast.sim.world import TaskWorld
from combee_fast.sim.peers import PeerReplies, PeerRouter
from combee_fast.sim.server import SimServer
from combee_fast.tasks.registry import get_task


def _world() -> TaskWorld:
    return TaskWorld.for_task(get_task("formula"), ("train",), roles=role_table())


async def test_peer_prompts_get_replies_in_the_peers_formats() -> None:
    world = _world()
    example = get_task("formula").load("train").examples[0]
    async with SimServer(PeerRouter(world, PeerReplies(world), world.plays()), time_scale=0.001) as server:
        chat = BlockingChat(server.url, "sim")
        try:
            answer = await asyncio.to_thread(
                chat, [{"role": "system", "content": "Answer."}, {"role": "user", "content": example.input}])
            fenced = await asyncio.to_thread(chat, "Instructions:\n```\nBe exact.\n```\nFeedback: ...\nProvide the new instructions within ``` blocks.")
            tagged = await asyncio.to_thread(chat, "<current_instruction>\nBe exact.\n</current_instruction>\n<examples>\n{}\n</examples>")
            merged = await asyncio.to_thread(chat, "<current_instruction>\nBe exact.\n</current_instruction>\n<proposals>\n"
                          "### Revision 1\nadds:\n[1.2] - one\n### Revision 2\nadds:\n[2.2] - two\n</proposals>")
        finally:
            chat.close()
        assert "\nFinal answer: " in answer and len(answer) > 200  # the world's reasoning, then the answer
        block = fenced.split("```\n")[1]
        assert block.startswith("Be exact.\n- ") and fenced.endswith("```")
        assert orjson.loads(tagged)["instruction"].startswith("Be exact.\n- ")
        assert orjson.loads(merged)["keep"] == ["1.2", "2.2"]
        counters = server.counters()
        assert counters.requests_by_role == {"": 4}
        assert len(server.spans()) == 4


async def test_our_roles_still_go_to_the_world() -> None:
    world = _world()
    async with SimServer(PeerRouter(world, PeerReplies(world), world.plays()), time_scale=0.001) as server:
        chat = BlockingChat(server.url, "sim", role="curator")
        try:
            reply = await asyncio.to_thread(chat, "<reflections>\n</reflections>")
        finally:
            chat.close()
    assert "operations" in orjson.loads(reply)


TURBO_REQUEST = (
    "You are TurboGEPA's reflection model. Generate 3 high-quality prompt mutations.\n"
    "- Each mutation MUST be wrapped inside <PROMPT>...</PROMPT> tags.\n"
    "=== PARENT PROMPT SUMMARIES ===\n"
    'PROMPT A (quality=0.50, shard=25%):\n"Be exact.\nShow the formula."\n\n'
    "Generate improved prompts now."
)


async def test_turbo_gepa_and_agentdescent_prompts_get_replies_in_their_formats() -> None:
    """TurboGEPA's mutation request (``Generate <n>``, the parent quoted under ``PROMPT A``): n
    prompts in ``<PROMPT>`` tags, each the parent with one line added; AgentDescent's rule
    proposal: one sentence. The server counts the tokens each reply's usage reports."""
    world = _world()
    async with SimServer(PeerRouter(world, PeerReplies(world), world.plays()), time_scale=0.001) as server:
        chat = BlockingChat(server.url, "sim")
        try:
            turbo = await asyncio.to_thread(chat, TURBO_REQUEST)
            spec = await asyncio.to_thread(chat, "Generate 2 distinct instruction variants.\nEach instruction MUST be "
                                                 "wrapped in <PROMPT>...</PROMPT> tags.\n=== TASK EXAMPLES ===\n...")
            rule = await asyncio.to_thread(chat, "The artifact just failed a task (score 0.00 out of 1.0).\n\nPropose "
                                                 "exactly ONE concise, general rule (a single imperative sentence).")
        finally:
            chat.close()
        counters = server.counters()
    prompts = [part.split("</PROMPT>")[0].strip() for part in turbo.split("<PROMPT>")[1:]]
    assert len(prompts) == 3 and len(set(prompts)) == 3
    assert all(p.startswith("Be exact.\nShow the formula.\n- ") for p in prompts)
    assert spec.count("<PROMPT>") == 2 and spec.count("</PROMPT>") == 2
    assert "<PROMPT>" not in rule and rule.count(".") == 1 and "\n" not in rule.strip()
    assert counters.prompt_tokens > 0 and counters.completion_tokens > 0


async def test_turbo_gepa_parses_the_replies_to_its_own_prompts() -> None:
    """With the bench extra: TurboGEPA's own prompt builder and parser around the reply."""
    strategies = pytest.importorskip("turbo_gepa.strategies", reason="turbo-gepa (the bench extra) is not installed")
    request = strategies.build_incremental_reflection_prompt(
        [{"prompt": "Be exact.\nShow the formula.", "meta": {"quality": 0.5}}], [], [], 4)
    world = _world()
    async with SimServer(PeerRouter(world, PeerReplies(world), world.plays()), time_scale=0.001) as server:
        chat = BlockingChat(server.url, "sim")
        try:
            reply = await asyncio.to_thread(chat, [{"role": "system", "content": strategies.BASE_REFLECTION_SYSTEM_PROMPT},
                                                   {"role": "user", "content": request}])
        finally:
            chat.close()
    parsed = strategies.parse_prompts_from_tags(reply)
    assert len(parsed) == 4 and all(p.startswith("Be exact.\nShow the formula.\n- ") for p in parsed)
