"""An environment step's wall-clock limit, less the time the environment waits for its own model.

A step's limit (``executor.step_timeout_s``) bounds the environment's own work: a command, a tool
call. An environment that calls a model itself (a task's user simulator, through ``use_chat``)
waits for that model inside its step; those seconds are bounded by the call's own endpoint timeout
and retries, not by the step's limit, or a customer answering from a slow local model would fail
the agent's step. :class:`StepLimit` is the chat call such an environment is given: while one of
its calls is in flight the current step's deadline is lifted, and when the last one returns the
deadline is put back, later by the seconds the calls took.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from combee_fast.endpoint.calls import ChatCall, ChatRequest, ChatResult


class StepLimit:
    """The engine's chat call for one episode's environment, and the limit of each of its steps
    (module docstring). One episode's steps run one at a time; its calls may overlap."""

    def __init__(self, chat_call: ChatCall) -> None:
        self._chat_call = chat_call
        self._scope: asyncio.Timeout | None = None
        self._in_flight = 0
        self._lifted_at = 0.0  # perf_counter when the first call in flight lifted the deadline
        self._deadline: float | None = None  # the lifted deadline (loop time)

    async def __call__(self, request: ChatRequest) -> ChatResult:
        """``request`` through the engine's chat call, its seconds not charged to the step."""
        self._lift()
        try:
            return await self._chat_call(request)
        finally:
            self._restore()

    @asynccontextmanager
    async def within(self, seconds: float) -> AsyncIterator[None]:
        """A step of at most ``seconds`` of the environment's own work; raises ``TimeoutError``
        past it."""
        async with asyncio.timeout(seconds) as scope:
            self._scope = scope
            try:
                yield
            finally:
                self._scope = None

    def _lift(self) -> None:
        self._in_flight += 1
        scope = self._scope
        if self._in_flight == 1 and scope is not None:
            self._lifted_at = time.perf_counter()
            self._deadline = scope.when()
            scope.reschedule(None)

    def _restore(self) -> None:
        self._in_flight -= 1
        scope = self._scope
        if self._in_flight == 0 and scope is not None and self._deadline is not None:
            scope.reschedule(self._deadline + time.perf_counter() - self._lifted_at)
            self._deadline = None
