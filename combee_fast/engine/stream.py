"""Run an async function over indexed items through a bounded queue, results reassembled by index.

``IndexedStream`` is the engine's one building block for a parallel stage: a producer feeds a
bounded ``asyncio.Queue`` (backpressure: memory stays bounded however many items there are), a
fixed pool of workers drains it, and result ``i`` resolves future ``i`` as soon as it exists, so a
later stage can start on the items it needs without waiting for the whole stage.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from combee_fast.errors import StageTimeout

T = TypeVar("T")
R = TypeVar("R")

_DONE = object()


class IndexedStream(Generic[T, R]):
    """Apply ``fn(index, item)`` to every item with at most ``concurrency`` calls in flight.

    ``fn`` must record per-item failures in its result; an exception it raises (or a timeout) stops
    the stream and propagates from :meth:`run`, with no task left pending.
    """

    def __init__(
        self,
        items: Sequence[T],
        fn: Callable[[int, T], Awaitable[R]],
        *,
        concurrency: int,
        queue_size: int | None = None,
        item_timeout_s: float | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self._items = items
        self._fn = fn
        self._concurrency = min(concurrency, max(1, len(items)))
        self._queue_size = queue_size or 2 * self._concurrency
        self._item_timeout_s = item_timeout_s
        loop = asyncio.get_running_loop()
        self._futures: list[asyncio.Future[R]] = [loop.create_future() for _ in items]

    def future(self, index: int) -> asyncio.Future[R]:
        """Resolves with the result of item ``index`` as soon as it is done."""
        return self._futures[index]

    async def run(self) -> list[R]:
        """Process every item; return the results in index order."""
        queue: asyncio.Queue[object] = asyncio.Queue(self._queue_size)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self._produce(queue))
                for _ in range(self._concurrency):
                    group.create_task(self._work(queue))
        except BaseException as exc:
            for future in self._futures:
                if not future.done():
                    future.cancel()
            if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
                only = exc.exceptions[0]
                raise only from only.__cause__  # the group hidden, what it was raised from still said
            raise
        return [future.result() for future in self._futures]

    async def _produce(self, queue: asyncio.Queue[object]) -> None:
        for index in range(len(self._items)):
            await queue.put(index)
        for _ in range(self._concurrency):
            await queue.put(_DONE)

    async def _work(self, queue: asyncio.Queue[object]) -> None:
        while (index := await queue.get()) is not _DONE:
            assert isinstance(index, int)
            try:
                result = await asyncio.wait_for(self._fn(index, self._items[index]), self._item_timeout_s)
            except TimeoutError as exc:
                raise StageTimeout(f"item {index} exceeded {self._item_timeout_s} s") from exc
            self._futures[index].set_result(result)


async def indexed_map(
    items: Sequence[T],
    fn: Callable[[int, T], Awaitable[R]],
    *,
    concurrency: int,
    item_timeout_s: float | None = None,
) -> list[R]:
    """``IndexedStream(...).run()`` for callers that only need the ordered results."""
    return await IndexedStream(items, fn, concurrency=concurrency, item_timeout_s=item_timeout_s).run()
