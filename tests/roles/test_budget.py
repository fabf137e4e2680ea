"""Prompts that fit: the playbook is cut to the endpoint's context, and a context error trims and retries."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web

from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.roles.agents import Agents, RoleClients
from combee_fast.roles.budget import cut_playbook, is_context_error
from combee_fast.schema import CallError
from combee_fast.tasks.registry import get_task
from tests.conftest import ThreadedServer

PLAYBOOK = "## formulas\n" + "".join(f"[form-{i:05d}] helpful=0 harmful=0 :: lesson {i} " + "x" * 80 + "\n"
                                     for i in range(1, 201))
REPLY = {"choices": [{"message": {"role": "assistant", "content": json.dumps(
    {"reasoning": "r", "bullet_ids": [], "final_answer": "1"})}, "finish_reason": "stop"}]}


def _server(n_ctx: int | None, limit_chars: int, prompts: list[int]):
    async def handler(request: web.BaseRequest) -> web.Response:
        if request.path == "/props" and n_ctx is not None:
            return web.json_response({"default_generation_settings": {"n_ctx": n_ctx}, "total_slots": 1})
        if request.path == "/v1/chat/completions":
            body = json.loads(await request.read())
            size = sum(len(m["content"]) for m in body["messages"])
            if request.headers.get("X-Combee-Role") == "generator":
                prompts.append(size)
            if size > limit_chars:
                return web.json_response({"error": {"code": 400, "type": "exceed_context_size_error",
                                                    "message": "the request exceeds the available context size"}},
                                         status=400)
            return web.json_response(REPLY)
        return web.Response(status=404)

    return ThreadedServer(handler)


async def _generate(url: str):
    task = get_task("formula")
    example = task.load("train[0:1]").examples[0]
    async with EndpointClient(EndpointConfig(name="e", base_url=url, model="m")) as client:
        await client.detect()
        agents = Agents(task, RoleClients.single(client), seed=0)
        rollout = await agents.generate(example, PLAYBOOK, epoch=0)
        return rollout, agents


def test_the_playbook_is_cut_to_the_reported_context() -> None:
    prompts: list[int] = []
    with _server(n_ctx=4096, limit_chars=(4096 - 1024) * 3, prompts=prompts) as server:
        rollout, agents = asyncio.run(_generate(server.url))
    assert rollout.error is None and agents.trimmed == 0
    assert len(prompts) == 1 and prompts[0] <= (4096 - 1024) * 3 < len(PLAYBOOK) + 1000


def test_a_context_error_halves_the_playbook_and_sends_again(capsys) -> None:
    prompts: list[int] = []
    with _server(n_ctx=None, limit_chars=len(PLAYBOOK), prompts=prompts) as server:
        rollout, agents = asyncio.run(_generate(server.url))
    assert rollout.error is None and agents.trimmed == 1
    assert len(prompts) == 2 and prompts[1] < prompts[0]
    assert "exceeded the context" in capsys.readouterr().err


def test_context_errors_are_recognised_and_cuts_keep_whole_lines() -> None:
    assert is_context_error(CallError(kind="http_status", message="HTTP 400", status=400,
                                      raw='{"error": {"code": "context_length_exceeded"}}'))
    assert not is_context_error(CallError(kind="http_status", message="HTTP 400", status=400, raw="bad json"))
    cut = cut_playbook(PLAYBOOK, 500)
    assert len(cut) <= 500 and PLAYBOOK.startswith(cut) and cut.endswith("\n")


def test_the_curator_and_reducer_playbooks_are_cut_to_the_reported_context() -> None:
    prompts: dict[str, int] = {}

    async def handler(request: web.BaseRequest) -> web.Response:
        if request.path == "/props":
            return web.json_response({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1})
        if request.path == "/v1/chat/completions":
            body = json.loads(await request.read())
            prompts[request.headers.get("X-Combee-Role", "")] = sum(len(m["content"]) for m in body["messages"])
            content = {"reasoning": "r", "operations": [], "keep": []}
            return web.json_response({"choices": [{"message": {"role": "assistant", "content": json.dumps(content)},
                                                   "finish_reason": "stop"}]})
        return web.Response(status=404)

    async def run(url: str) -> None:
        from combee_fast.playbook import Playbook

        async with EndpointClient(EndpointConfig(name="e", base_url=url, model="m")) as client:
            await client.detect()
            agents = Agents(get_task("formula"), RoleClients.single(client), seed=0)
            curated = await agents.curate([], Playbook.empty(), PLAYBOOK, source="s", seed_path=(0,))
            reduced = await agents.reduce([[], []], PLAYBOOK, source="s", seed_path=(0,))
            assert curated.error is None and reduced.error is None

    with ThreadedServer(handler) as server:
        asyncio.run(run(server.url))
    for role, max_tokens in (("curator", 2048), ("reducer", 2048)):
        assert prompts[role] <= (4096 - max_tokens) * 3 < len(PLAYBOOK), role
