"""Environments the tests plug in with ``--env tests.rollouts.environments:<factory>`` (each
factory takes the run's sandboxes, as every environment factory does).

- ``counting``: a trivial environment (one tool, ``say``) that counts how many are open at once,
  opened and closed in all (:data:`LIVE`).
- ``stuck``: its ``step`` never returns.
- ``broken``: its ``reset`` raises.
- ``consulting``: its ``step`` asks its own model (``use_chat``) again and again for longer than
  :data:`CONSULTING_S` before it answers, as a user simulator on a slow model does.
- ``wordy``: its ``check`` returns a string; ``nan_scoring``: a reward of NaN; ``closing_badly``:
  its ``close`` raises; ``stepping_badly``: its ``step`` raises.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter


from combee_fast.endpoint.calls import ChatCall, ChatRequest
from combee_fast.schema import Example, Message, Observation, Tool, ToolCall
from combee_fast.tasks.base import Score

LIVE: Counter[str] = Counter()
"""``open`` now, ``most`` open at once, ``opened`` and ``closed`` in all."""

SAY = Tool("say", "Say something.", {"type": "object", "properties": {"text": {"type": "string"}}})


class Counting:
    def __init__(self) -> None:
        LIVE["opened"] += 1
        LIVE["open"] += 1
        LIVE["most"] = max(LIVE["most"], LIVE["open"])
        self.said = 0

    def tools(self) -> tuple[Tool, ...]:
        return (SAY,)

    async def reset(self, task: Example) -> str:
        await asyncio.sleep(0.01)
        return f"ready for {task.id}"

    async def step(self, action: ToolCall) -> Observation:
        self.said += 1
        return Observation(f"heard {action.arguments}")

    async def check(self) -> Score:
        return Score(1.0 if self.said else 0.0, f"{self.said} said")

    async def close(self) -> None:
        LIVE["open"] -= 1
        LIVE["closed"] += 1


class Stuck(Counting):
    async def step(self, action: ToolCall) -> Observation:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


CONSULTING_S = 8.0
"""How long a ``consulting`` step waits on its own model: past the step limit and its grace."""


class Consulting(Counting):
    def use_chat(self, chat_call: ChatCall, seed: int) -> None:
        self.chat_call = chat_call

    async def step(self, action: ToolCall) -> Observation:
        started = time.perf_counter()
        while time.perf_counter() - started < CONSULTING_S:
            await self.chat_call(ChatRequest("generator", (Message("user", "What now?"),), max_tokens=8))
        return await super().step(action)


class Broken(Counting):
    async def reset(self, task: Example) -> str:
        raise OSError("this environment cannot start")


def counting(sandboxes: object) -> Counting:
    return Counting()


def stuck(sandboxes: object) -> Stuck:
    return Stuck()


def consulting(sandboxes: object) -> Consulting:
    return Consulting()


def broken(sandboxes: object) -> Broken:
    return Broken()


class Wordy(Counting):
    async def check(self) -> Score:
        return "well done"  # type: ignore[return-value]


class NanScoring(Counting):
    async def check(self) -> Score:
        return Score(float("nan"), "a reward that is no number")


class ClosingBadly(Counting):
    async def close(self) -> None:
        await super().close()
        raise RuntimeError("close failed")


class SteppingBadly(Counting):
    async def step(self, action: ToolCall) -> Observation:
        raise KeyError("no such tool state")


def wordy(sandboxes: object) -> Wordy:
    return Wordy()


def nan_scoring(sandboxes: object) -> NanScoring:
    return NanScoring()


def closing_badly(sandboxes: object) -> ClosingBadly:
    return ClosingBadly()


def stepping_badly(sandboxes: object) -> SteppingBadly:
    return SteppingBadly()
