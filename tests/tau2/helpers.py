"""Driving a tau2 environment by hand: a task's gold actions, then its required information."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec

from combee_fast.schema import ToolCall
from combee_fast.tasks.base import Score
from combee_fast.tasks.tau2.domain import Action
from combee_fast.tasks.tau2.environment import Tau2Environment
from combee_fast.tasks.tau2.task import Tau2DomainTask
from tests.tau2.agents import MISBEHAVIOURS


def example_of(task: Tau2DomainTask, task_id: str):
    for split in ("train", "test"):
        for example in task.load(split).examples:
            if example.meta["tau2_task"] == task_id:
                return example
    raise KeyError(task_id)


async def play(task: Tau2DomainTask, task_id: str, actions: list[Action] | None = None,
               say: list[str] | None = None) -> tuple[Score, list[str]]:
    """Reset an environment on ``task_id``, run ``actions`` (default: the gold ones), tell the
    customer ``say`` (default: the required information), check; the score and the observations.
    The environment is always closed."""
    environment = Tau2Environment(task.domain, step_timeout_s=30.0)
    criteria = task.domain.tasks[task_id].evaluation_criteria
    assert criteria is not None
    actions = criteria.actions or [] if actions is None else actions
    say = criteria.communicate_info or [] if say is None else say
    observations = []
    try:
        await environment.reset(example_of(task, task_id))
        for action in actions:
            observation = await environment.step(ToolCall(action.name, msgspec.json.encode(action.arguments).decode()))
            assert observation.error in (None, "bad_action"), observation
            observations.append(observation.text)
        for info in say:
            await environment.step(ToolCall("respond", msgspec.json.encode({"message": f"Noted: {info}."}).decode()))
        return await environment.check(), observations
    finally:
        await environment.close()


def children() -> set[int]:
    """The pids of this process's live children (zombies excluded)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            found.add(int(entry))
    return found


def replaced(arguments: dict[str, Any], key: str, index: int, value: str) -> dict[str, Any]:
    values = list(arguments[key])
    values[index] = value
    return {**arguments, key: values}


def assert_each_misbehaviour_failed_its_episode(run: Path) -> dict[str, Any]:
    """Each hostile server's misbehaviour (``tests.tau2.agents.MISBEHAVIOURS``, one per train item,
    in order) failed its own episode, with its own kind, in ``run``'s ``errors.jsonl``; the run's
    summary."""
    failures = [json.loads(line) for line in (run / "errors.jsonl").read_text().splitlines()]
    episodes = {f["item"]: f["kind"] for f in failures if "episode" in f}
    assert episodes == {f"train:{index}": kind for index, kind in enumerate(MISBEHAVIOURS.values())}
    exited = [f["message"] for f in failures if f.get("kind") == "mcp_exited"]
    assert exited and all("it said last: hostile: exiting as asked" in message for message in exited), exited
    return json.loads((run / "summary.json").read_text())
