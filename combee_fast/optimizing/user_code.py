"""The user's code, run beside the engine's loop: blocking callables in threads, coroutines awaited.

:class:`UserCode` runs at most ``max_concurrency`` calls of the user's code at once, whatever
their kind: a blocking function (an adapter's ``evaluate``, an evaluator, a ``task_lm``) runs on
a thread of a pool of that many threads, an ``async def`` one is awaited on the loop. Callers
wait for a slot before anything is handed to the pool, so no queue of waiting work grows inside
it: the waiting is bounded by the callers (the search's own in-flight limits).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def is_async(fn: Callable[..., Any]) -> bool:
    """Whether calling ``fn`` returns a coroutine (an ``async def`` function or method, or an
    object whose ``__call__`` is one)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


class UserCode:
    """At most ``max_concurrency`` calls of user code at once (module docstring); close it (or use
    it as a context manager) to let its threads go."""

    def __init__(self, max_concurrency: int) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.max_concurrency = max_concurrency
        self._threads = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="combee-user")
        self._slots = asyncio.Semaphore(max_concurrency)
        self.in_flight = 0
        self.peak_in_flight = 0

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``: awaited when ``fn`` is async, else on one of the threads."""
        async with self._slots:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            try:
                if is_async(fn):
                    return await fn(*args)
                return await asyncio.get_running_loop().run_in_executor(self._threads, fn, *args)
            finally:
                self.in_flight -= 1

    def close(self) -> None:
        """Let the threads go once the calls on them end (none is cut short)."""
        self._threads.shutdown(wait=False)

    def __enter__(self) -> UserCode:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
