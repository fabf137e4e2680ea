"""``--role-endpoint ROLE=URL`` sends one role's calls to its own server, for any learner's role:
``combee learn`` processes against two simulated servers on loopback, each counting the requests
it received by role."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from combee_fast.learners import role_table
from combee_fast.sim.worlds import task_world
from combee_fast.tasks.registry import get_task

NOTES = "tests.plugins.combee_notes.kind:NOTES"
ROOT = Path(__file__).resolve().parents[2]
FAST = ("--train-split", "train[0:20]", "--val-split", "val[0:10]", "--batch-size", "10", "--quiet")


async def _learn(*args: str) -> dict:
    process = await asyncio.create_subprocess_exec(sys.executable, "-m", "combee_fast.cli", "learn", *args, cwd=ROOT,
                                                   stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 240)
    assert process.returncode == 0, err.decode()
    return json.loads(out.decode().splitlines()[0])


async def _two_servers(start_sim_server, learners=()):  # type: ignore[no-untyped-def]
    world = task_world(get_task("formula"), role_table(learners))
    return [await start_sim_server(world, time_scale=0.0001) for _ in range(2)]


def _learned_calls(server) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """The server's requests by role, less the start-up probes of what it serves."""
    counts = server.counters().requests_by_role
    return {role: n for role, n in counts.items() if role not in STARTUP_ROLES}


STARTUP_ROLES = {"probe"}
"""What the start-up check of an endpoint sends (the structured-output probe)."""


async def test_textgrads_loss_calls_go_to_the_loss_endpoint_and_no_others(start_sim_server, tmp_path) -> None:
    first, second = await _two_servers(start_sim_server)
    summary = await _learn("--task", "formula", "--method", "combee-textgrad", *FAST, "--endpoint", first.url,
                           "--model", "sim", "--role-endpoint", f"loss={second.url}", "--out", str(tmp_path / "run"))
    on_first, on_second = _learned_calls(first), _learned_calls(second)
    assert set(on_second) == {"textgrad_loss"}
    assert on_second["textgrad_loss"] == summary["accounting"]["train"]["calls"]["textgrad_loss"] > 0
    assert "textgrad_loss" not in on_first
    assert {"textgrad_forward", "textgrad_gradient", "textgrad_step"} <= set(on_first)


async def test_a_plugin_learners_role_goes_to_its_own_endpoint(start_sim_server, tmp_path) -> None:
    first, second = await _two_servers(start_sim_server, [NOTES])
    summary = await _learn("--task", "formula", "--learner", NOTES, "--method", "combee", *FAST,
                           "--endpoint", first.url, "--model", "sim", "--role-endpoint", f"editor={second.url}",
                           "--out", str(tmp_path / "run"))
    on_first, on_second = _learned_calls(first), _learned_calls(second)
    assert set(on_second) == {"notes_editor"}
    assert on_second["notes_editor"] == summary["accounting"]["train"]["calls"]["notes_editor"] > 0
    assert set(on_first) == {"notes_answer", "notes_critic"} and summary["notes"] > 0
