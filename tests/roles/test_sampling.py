"""Sampling per role: configured, merged over the default table, sent on the wire, recorded."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from aiohttp import web

from combee_fast.config import SamplingConfig, SessionConfig, config_from_dict
from combee_fast.endpoint.calls import ChatRequest
from combee_fast.endpoint.client import EndpointClient, EndpointConfig
from combee_fast.errors import ConfigError
from combee_fast.ace.calls import AceCalls
from combee_fast.schema import Message
from combee_fast.session import open_session
from combee_fast.tasks.registry import get_task
from tests.conftest import ThreadedServer


def test_a_role_table_is_merged_over_the_default_table() -> None:
    config = config_from_dict({"sampling": {
        "default": {"temperature": 0.2, "extra": {"top_k": 20}},
        "generator": {"frequency_penalty": 0.5, "max_completion_tokens": 300, "extra": {"repeat_penalty": 1.1}},
    }})
    generator = config.sampling_for("generator")
    assert (generator.temperature, generator.max_completion_tokens, generator.frequency_penalty) == (0.2, 300, 0.5)
    assert generator.extra == {"top_k": 20, "repeat_penalty": 1.1}
    assert config.sampling_for("curator") == SamplingConfig(temperature=0.2, extra={"top_k": 20})
    assert SessionConfig().sampling_for("reducer") == SamplingConfig()


@pytest.mark.parametrize("table", [{"generator": {"frequency_penalty": 3}},
                                   {"generator": {"max_completion_tokens": 0}}, {"generator": {"top_p": 0}}])
def test_bad_sampling_is_a_config_error(table) -> None:
    with pytest.raises(ConfigError):
        config_from_dict({"sampling": table})


@pytest.mark.parametrize(("learner", "method", "role"), [("ace", "combee", "critic"), ("gepa", "gepa", "reflector"),
                                                          ("textgrad", "textgrad", "curator")])
def test_sampling_of_a_role_the_learner_does_not_call_is_refused_when_the_session_opens(learner, method, role) -> None:
    config = config_from_dict({"learner": learner, "method": method, "sampling": {role: {"temperature": 0.3}}})
    with pytest.raises(ConfigError, match=f"sampling for unknown roles: {role} \\(learner '{learner}' calls"):
        asyncio.run(_open(config))


async def _open(config: SessionConfig) -> None:
    async with open_session(config):
        pass


def test_a_pool_table_is_merged_under_the_role_table() -> None:
    config = config_from_dict({"sampling": {"default": {"temperature": 0.2}, "propose": {"temperature": 0.9, "top_p": 0.5},
                                            "loss": {"top_p": 0.8}}})
    assert config.sampling_for("loss", "textgrad_loss", "evaluate") == SamplingConfig(temperature=0.2, top_p=0.8)
    assert config.sampling_for("gradient", "textgrad_gradient", "propose") == SamplingConfig(temperature=0.9, top_p=0.5)


def test_the_roles_send_their_sampling_and_extra_fields_on_the_wire() -> None:
    bodies: list[dict] = []

    async def handler(request: web.BaseRequest) -> web.Response:
        bodies.append(json.loads(await request.read()))
        content = json.dumps({"reasoning": "r", "bullet_ids": [], "final_answer": "1"})
        return web.Response(text=json.dumps({"choices": [{"message": {"role": "assistant", "content": content},
                                                          "finish_reason": "stop"}]}),
                            content_type="application/json")

    config = config_from_dict({"sampling": {"generator": {"frequency_penalty": 0.5, "temperature": 0.7,
                                                          "max_completion_tokens": 256, "extra": {"repeat_penalty": 1.1}}}})
    task = get_task("formula")
    example = task.load("train[0:1]").examples[0]

    async def generate(url: str) -> None:
        async with EndpointClient(EndpointConfig(name="e", base_url=url, model="m")) as client:
            agents = AceCalls.on_client(task, client, seed=0, sampling={r: config.sampling_for(r) for r in ('generator',)})
            rollout = await agents.generate(example, "", epoch=0)
            assert rollout.error is None
            assert agents.calls.effective_sampling()["generator"] == {
                "temperature": 0.7, "max_tokens": 256, "frequency_penalty": 0.5, "repeat_penalty": 1.1}

    with ThreadedServer(handler) as server:
        asyncio.run(generate(server.url))
    (body,) = bodies
    assert (body["temperature"], body["max_tokens"], body["frequency_penalty"], body["repeat_penalty"]) == (
        0.7, 256, 0.5, 1.1)
    assert body["response_format"]["type"] == "json_schema"


def test_requests_without_extra_fields_keep_their_cache_key() -> None:
    from combee_fast.endpoint.cache import request_key

    request = ChatRequest(role="r", messages=(Message(role="user", content="x"),))
    assert request_key("m", request) == request_key("m", ChatRequest(role="r", messages=request.messages,
                                                                     extra_body={}))
    assert request_key("m", request) != request_key("m", ChatRequest(role="r", messages=request.messages,
                                                                     extra_body={"top_k": 2}))


def test_the_sampling_flag_is_recorded_in_the_run_directory(tmp_path) -> None:
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "combee_fast.cli", "learn", "--train-split", "train[0:10]", "--val-split", "val[0:5]",
         "--batch-size", "5", "--sim-preset", "flat", "--time-scale", "0.0001", "--out", str(out), "--quiet",
         "--sampling", "generator.frequency_penalty=0.5", "--sampling", "default.temperature=0.3",
         "--sampling", "reflector.extra.repeat_penalty=1.1"],
        capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    sampling = json.loads((out / "sampling.json").read_text())
    assert sampling["generator"] == {"temperature": 0.3, "max_tokens": 1024, "frequency_penalty": 0.5}
    assert sampling["reflector"]["repeat_penalty"] == 1.1 and sampling["curator"]["temperature"] == 0.3
    assert json.loads((out / "config.json").read_text())["sampling"]["generator"] == {"frequency_penalty": 0.5}
