"""The peers' responder over real HTTP: routing by role, reply formats the peers parse."""

from __future__ import annotations

import asyncio

import orjson

from combee_fast.endpoint.blocking import BlockingChat
from combee_fast.sim.instructions import InstructionWorld
from combee_fast.sim.peers import PeerReplies, PeerRouter
from combee_fast.sim.server import SimServer
from combee_fast.tasks.registry import get_task


def _world() -> InstructionWorld:
    return InstructionWorld.for_task(get_task("formula"), ("train",))


async def test_peer_prompts_get_replies_in_the_peers_formats() -> None:
    world = _world()
    example = get_task("formula").load("train").examples[0]
    async with SimServer(PeerRouter(world, PeerReplies(world)), time_scale=0.001) as server:
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
    async with SimServer(PeerRouter(world, PeerReplies(world)), time_scale=0.001) as server:
        chat = BlockingChat(server.url, "sim", role="curator")
        try:
            reply = await asyncio.to_thread(chat, "<reflections>\n</reflections>")
        finally:
            chat.close()
    assert "operations" in orjson.loads(reply)
