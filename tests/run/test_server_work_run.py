"""A run counts the work of the llama.cpp servers its endpoints are, not only ``--local``'s: a
server in front of the simulated endpoint that answers as ``llama-server --metrics`` does
(``GET /props``, ``GET /metrics`` with its token counters) is found by the start-up probe, read
before and after the training, and its count is the run's ``server_work``; the simulated endpoint
alone (no ``/props``) is never asked for counters."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
from aiohttp import web

from combee_fast.config import config_from_dict
from combee_fast.learners import role_table
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.session import open_session
from combee_fast.sim.server import SimServer
from combee_fast.sim.world import TaskWorld
from combee_fast.tasks.registry import get_task


class LlamaCppFront:
    """``llama-server --metrics`` as the engine sees it, in front of ``backend``: ``GET /props``
    (context and slots), ``GET /metrics`` (prompt and generated tokens of every chat completion
    it passed on, with a second of slot time a call split between reading and generating), and
    every ``/v1`` request passed on to the simulated endpoint as it came."""

    def __init__(self, backend: SimServer) -> None:
        self.backend = backend
        self.prompt_tokens = self.generated_tokens = self.metrics_read = self._calls = 0
        self._runner: web.AppRunner | None = None
        self._http: aiohttp.ClientSession | None = None
        self.root = ""

    async def __aenter__(self) -> LlamaCppFront:
        app = web.Application()
        app.router.add_get("/props", self._props)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_route("*", "/v1/{tail:.*}", self._pass_on)
        self._http = aiohttp.ClientSession(auto_decompress=False)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.root = f"http://{host}:{port}"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._runner is not None and self._http is not None
        await self._runner.cleanup()
        await self._http.close()

    async def _props(self, request: web.Request) -> web.Response:
        return web.json_response({"default_generation_settings": {"n_ctx": 32768}, "total_slots": 16})

    async def _metrics(self, request: web.Request) -> web.Response:
        self.metrics_read += 1
        calls = self._calls
        return web.Response(text=(f"llamacpp:prompt_tokens_total {self.prompt_tokens}\n"
                                  f"llamacpp:prompt_seconds_total {0.25 * calls}\n"
                                  f"llamacpp:tokens_predicted_total {self.generated_tokens}\n"
                                  f"llamacpp:tokens_predicted_seconds_total {0.75 * calls}\n"))

    async def _pass_on(self, request: web.Request) -> web.Response:
        assert self._http is not None
        target = self.backend.url.removesuffix("/v1") + request.path_qs
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with self._http.request(request.method, target, data=await request.read(), headers=headers) as answer:
            body = await answer.read()
            status, kind = answer.status, answer.headers.get("Content-Type", "application/json")
        if request.path.endswith("/chat/completions") and status == 200:
            usage = json.loads(body).get("usage") or {}
            self.prompt_tokens += usage.get("prompt_tokens", 0)
            self.generated_tokens += usage.get("completion_tokens", 0)
            self._calls += 1
        return web.Response(body=body, status=status, headers={"Content-Type": kind})


def _config(url: str):
    return config_from_dict({
        "task": {"train_split": "train[0:8]", "val_split": "selection[0:4]"},
        "train": {"batch_size": 4},
        "endpoints": {"default": {"url": url, "model": "sim"}},
    })


async def test_a_run_on_a_llama_cpp_server_holds_its_count_of_the_work(tmp_path: Path) -> None:
    backend = SimServer(TaskWorld.for_task(get_task("formula"), roles=role_table()), preset="flat", time_scale=0.0005, seed=1)
    await backend.start()
    try:
        async with LlamaCppFront(backend) as front:
            async with open_session(_config(front.root + "/v1")) as session:
                assert session.clients["generator"].capabilities.server == "llama.cpp"
                result = await session.train(plan=FixedBatch(4), out=tmp_path / "run")
            async with open_session(_config(backend.url)) as plain:
                bare = await plain.train(plan=FixedBatch(4))
                assert plain.clients["generator"].capabilities.server is None
    finally:
        await backend.stop()
    work = result.server_work
    assert work is not None and work.servers == (front.root,) and front.metrics_read == 2
    generated = sum(result.counts.completion_tokens.values()) + sum(result.val_counts.completion_tokens.values())
    read = sum(result.counts.prompt_tokens.values()) + sum(result.val_counts.prompt_tokens.values())
    assert work.generated_tokens == generated > 0 and work.prompt_tokens == read > 0  # every call of the training
    assert work.prefill_share == 0.25
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["server_work"]["servers"] == [front.root] and summary["server_work"]["generated_tokens"] == generated
    assert bare.server_work is None  # the simulated endpoint: no /props, never asked
