"""Saying a slow wait: when something a run waits for before it can go on (kernels compiling,
endpoints probed) takes noticeable time, its hub hears when the wait begins and when it ends.

:func:`said_if_slow` awaits the work; when it is still running after :data:`NOTICE_AFTER_S`,
it emits ``notice(None)`` then, and ``notice(seconds)`` with the whole wait's seconds once the
work is over. A quick wait (a warm cache, an idle endpoint) says nothing. The notices on stderr
are :class:`combee_fast.readout.notices.WaitNotices`'.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from combee_fast.engine.events import Events

NOTICE_AFTER_S = 1.0
"""Seconds a wait may take before the run says what it waits for."""

T = TypeVar("T")


async def said_if_slow(work: Awaitable[T], events: Events | None, notice: Callable[[float | None], Any]) -> T:
    """``work``'s result; when it takes longer than :data:`NOTICE_AFTER_S`, ``notice(None)`` is
    emitted on ``events`` as that time passes and ``notice(seconds)`` when the work ends (raising
    or not: the wait is over either way). A cancelled caller cancels the work."""
    started = time.monotonic()
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=NOTICE_AFTER_S)
        if done or events is None:
            return await task
        events.emit(notice(None))
        try:
            return await task
        finally:
            events.emit(notice(time.monotonic() - started))
    finally:
        if not task.done():
            task.cancel()
