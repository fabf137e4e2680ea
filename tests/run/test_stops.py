"""A run whose calls mostly fail stops with CallsFailed and saves what it learned (real HTTP on loopback)."""

from __future__ import annotations

import re

import aiohttp
import msgspec
import pytest
from aiohttp import web

from combee_fast.config import (CacheConfig, EndpointSpec, FaultConfig, SessionConfig, SimConfig, TaskConfig, TrainConfig,
                                TransportConfig)
from combee_fast.errors import EXIT_CALLS_FAILED, CallsFailed
from combee_fast.learners import role_table
from combee_fast.ace.playbook import Playbook
from combee_fast.record.rundir import RunDir
from combee_fast.run.batch_plans import FixedBatch
from combee_fast.session import open_session
from tests.conftest import ThreadedServer


def _config(**changes: object) -> SessionConfig:
    base = SessionConfig(task=TaskConfig(train_split="train[0:24]", val_split="val[0:10]"), sim=SimConfig("flat", 1e-4),
                         transport=TransportConfig(max_retries=1, backoff_base_s=0.001))
    return msgspec.structs.replace(base, **changes)


async def _forward(request: web.BaseRequest, body: bytes, upstream_url: str) -> web.Response:
    """``request`` (its ``body`` already read) sent on to the server at ``upstream_url``; its reply."""
    async with aiohttp.ClientSession() as session:
        async with session.request(request.method, upstream_url + request.path[len("/v1"):], data=body,
                                   headers={k: v for k, v in request.headers.items() if k.lower() != "host"}) as reply:
            return web.Response(status=reply.status, body=await reply.read(), headers={
                k: v for k, v in reply.headers.items() if k.lower() not in ("content-length", "transfer-encoding")})


async def _learn(config: SessionConfig, run_dir: RunDir | None) -> None:
    async with open_session(config) as session:
        await session.train(plan=FixedBatch(12), run_dir=run_dir)


async def test_a_step_of_malformed_answers_stops_the_run_with_its_own_exit_code(tmp_path) -> None:
    run_dir = RunDir(tmp_path)
    garbage = SimConfig("flat", 1e-4, faults=FaultConfig(rate_malformed=1.0))
    with pytest.raises(CallsFailed) as raised:
        await _learn(_config(sim=garbage), run_dir)
    run_dir.close()
    message = str(raised.value)
    assert raised.value.exit_code == EXIT_CALLS_FAILED != 2
    assert message.startswith("step 1: 12 of 12 calls failed (malformed 12; e.g. ")
    assert f"{tmp_path / 'final.json'} holds what was learned so far (version 0)" in message
    assert "\n" not in message
    assert Playbook.load(tmp_path / "final.json").version == 0
    assert len((tmp_path / "ledger.jsonl").read_text().splitlines()) == 1


async def test_a_replay_cache_that_misses_everything_stops_the_run(tmp_path) -> None:
    empty = tmp_path / "cache.jsonl"
    empty.write_text("")
    run_dir = RunDir(tmp_path / "run")
    with pytest.raises(CallsFailed, match=r"^step 1: 12 of 12 calls failed \(replay_miss 12; e\.g\. .*cache\.jsonl"):
        await _learn(_config(cache=CacheConfig(str(empty), "replay")), run_dir)
    run_dir.close()
    assert (tmp_path / "run" / "final.json").exists()


async def test_a_validation_left_mostly_unanswered_stops_the_run(tmp_path, start_sim_server) -> None:
    """A proxy in front of the simulated server answers 404 to every validation question: training
    goes through, validation is unanswered, and the run stops instead of reporting accuracy 0."""
    from combee_fast.sim.world import TaskWorld
    from combee_fast.tasks.registry import get_task

    task = get_task("formula")
    questions = [e.input for e in task.load("val[0:10]").examples]
    upstream = await start_sim_server(TaskWorld.for_task(task, roles=role_table()), time_scale=1e-4)

    async def proxy(request: web.BaseRequest) -> web.StreamResponse:
        body = await request.read()
        prompt = " ".join(m["content"] for m in msgspec.json.decode(body)["messages"]) if body else ""
        if any(q in prompt for q in questions):
            return web.Response(status=404, text="no such model here")
        return await _forward(request, body, upstream.url)

    run_dir = RunDir(tmp_path)
    with ThreadedServer(proxy) as server:
        config = _config(endpoints={"default": EndpointSpec(server.url, "sim")})
        with pytest.raises(CallsFailed) as raised:
            await _learn(config, run_dir)
    run_dir.close()
    message = str(raised.value)
    assert re.match(r"validation after step \d+: 10 of 10 examples unanswered \(http_404 10; e\.g\. HTTP 404", message)
    assert str(tmp_path / "final.json") in message
    row = msgspec.json.decode((tmp_path / "ledger.jsonl").read_text().splitlines()[-1])
    assert (row["val_answered"], row["val_unanswered"]) == (0, 10)
    assert Playbook.load(tmp_path / "final.json").version == row["version"] > 0


async def test_a_few_failures_do_not_stop_the_run() -> None:
    config = _config(sim=SimConfig("flat", 1e-4, faults=FaultConfig(rate_malformed=0.2)))
    async with open_session(config) as session:
        result = await session.train(plan=FixedBatch(12))
    assert result.samples == 24 and result.counts.total_calls > 0


async def test_one_unlucky_call_of_a_small_step_does_not_stop_sequential_ace() -> None:
    """Sequential ACE makes 1-4 calls per step: failures are judged over the latest steps holding
    at least min_judged_calls calls, so a failed call alone never stops it. (At 30% malformed
    replies some steps fail on their own; at 50% a quarter of the reflector's calls fail even
    after their repair request, and the role's own rule may rightly stop the run.)"""
    config = _config(method="sequential", sim=SimConfig("flat", 1e-4, faults=FaultConfig(rate_malformed=0.3)))
    async with open_session(config) as session:
        result = await session.train(plan=FixedBatch(1))
    lone_failures = [row for row in result.ledger if sum(row.calls.values()) and
                     sum(n for k in row.failures.values() for n in k.values()) * 2 > sum(row.calls.values())]
    assert lone_failures, "some step failed on its own"
    assert result.samples == 24


async def test_sequential_ace_whose_calls_all_fail_stops_once_enough_calls_are_judged() -> None:
    config = _config(method="sequential", sim=SimConfig("flat", 1e-4, faults=FaultConfig(rate_malformed=1.0)),
                     train=TrainConfig(min_judged_calls=5))
    with pytest.raises(CallsFailed, match=r"^steps 1-5: 5 of 5 calls failed \(malformed 5; "):
        async with open_session(config) as session:
            await session.train(plan=FixedBatch(1))


async def test_a_run_whose_reflections_all_copy_the_prompts_placeholders_stops(tmp_path, start_sim_server) -> None:
    """A proxy answers every reflector call with the prompt's own placeholders (what a 135M model
    did): generator and validation are fine, the reflector never is, and the run says so."""
    from combee_fast.endpoint.wire import AssistantMessage, Choice, CompletionResponse, CompletionUsage, ROLE_HEADER
    from combee_fast.sim.world import TaskWorld
    from combee_fast.tasks.registry import get_task

    upstream = await start_sim_server(TaskWorld.for_task(get_task("formula"), roles=role_table()), time_scale=1e-4)
    copied = msgspec.json.encode({"reasoning": "<your analysis>", "error_identification": "<what exactly went wrong>",
                                  "root_cause": "<why it went wrong>", "correct_approach": "<what the model should have done>",
                                  "key_insight": "<one reusable, specific lesson>", "bullet_tags": []}).decode()

    async def proxy(request: web.BaseRequest) -> web.StreamResponse:
        body = await request.read()
        if request.headers.get(ROLE_HEADER) == "reflector":
            reply = CompletionResponse(id="copy", model="sim", choices=(Choice(message=AssistantMessage(content=copied), finish_reason="stop"),),
                                       usage=CompletionUsage(10, 10, 20))
            return web.Response(body=msgspec.json.encode(reply), content_type="application/json")
        return await _forward(request, body, upstream.url)

    run_dir = RunDir(tmp_path)
    with ThreadedServer(proxy) as server:
        with pytest.raises(CallsFailed) as raised:
            await _learn(_config(endpoints={"default": EndpointSpec(server.url, "sim")}), run_dir)
    run_dir.close()
    message = str(raised.value)
    assert re.match(r"step 1: 12 of 12 reflector calls failed \(placeholder 12; e\.g\. .*placeholder", message), message
    assert "cannot learn without usable reflector replies" in message and str(tmp_path / "final.json") in message


async def test_errors_jsonl_holds_every_failed_call_beyond_the_in_memory_history(tmp_path) -> None:
    import collections
    import json

    config = _config(sim=SimConfig("flat", 1e-4, faults=FaultConfig(rate_malformed=0.3)))
    run_dir = RunDir(tmp_path)
    async with open_session(config) as session:
        session.calls.failures = collections.deque(maxlen=2)  # memory keeps the latest 2; the file keeps all
        await session.train(plan=FixedBatch(12), run_dir=run_dir)
        failed = session.calls.failures_total
    run_dir.close()
    lines = [json.loads(line) for line in (tmp_path / "errors.jsonl").read_text().splitlines()]
    assert failed > 2 and len(lines) == failed == json.loads((tmp_path / "calls.json").read_text())["failed"]
    assert all(line["label"] == "malformed" and line["raw"] and line["role"] for line in lines)


async def test_every_stop_rule_declares_what_its_end_means_and_what_the_run_spends() -> None:
    """The loop reads ``ends`` and the session ``budget`` of every rule as the protocol declares them."""
    from typing import get_args

    from combee_fast.gepa.stops import MetricCallBudget
    from combee_fast.protocols.running import Ends, StopRule
    from combee_fast.run.interrupt import StopRequest
    from combee_fast.run.stops import (EpochsDone, FailingCalls, FailingEpisodes, Interrupted, NoImprovement,
                                       NothingKept, ScoreThreshold, UnansweredValidation, WallClock)
    from combee_fast.verify.budget import BudgetGuard
    from combee_fast.verify.card import Budget

    class Patience(StopRule):  # a user's rule: its end declared, the budget left to the protocol's default
        ends = "limit"

        def check(self, state) -> str | None:
            return "enough" if state.steps >= 2 else None

    rules: list[StopRule] = [
        EpochsDone(2), Interrupted(StopRequest()), NoImprovement(3), ScoreThreshold(0.9), WallClock(60.0),
        FailingCalls(max_failed_fraction=0.5, min_judged_calls=10, learning_roles=()),
        FailingEpisodes(max_failed_fraction=0.5, min_judged_calls=10), UnansweredValidation(max_failed_fraction=0.5),
        NothingKept(), MetricCallBudget(100),
        BudgetGuard(Budget(rollouts=10, tokens=10, gpu_seconds=10, wall_clock_s=10, binding="rollouts")), Patience()]
    assert all(rule.ends in get_args(Ends) for rule in rules)
    budgets = {type(rule).__name__: rule.budget(30) for rule in rules}
    epochs, calls = budgets.pop("EpochsDone"), budgets.pop("MetricCallBudget")
    assert budgets == dict.fromkeys(budgets)  # every other rule says nothing of what the run spends
    async with open_session(_config()) as session:
        budget = session.budget()  # ACE's own rule: its epochs over the 24 train examples
        assert budget is not None and (budget.unit, budget.total) == ("samples", session.config.train.epochs * 24)
        result = await session.train(plan=FixedBatch(4), stops=(Patience(),))
    assert result.stopped_by == "enough" and result.steps == 2  # a "limit": the run's stopped_by
    row = result.ledger[0]
    assert epochs is not None and (epochs.unit, epochs.total, epochs.spent(row)) == ("samples", 60, 4)
    assert calls is not None and (calls.unit, calls.total, calls.spent(row)) == ("metric calls", 100, row.rollouts)
