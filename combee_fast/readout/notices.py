"""What a run says on stderr as it happens: consumers of its events.

- :class:`WaitNotices`: a server asked calls to wait (``[waiting] ... (Retry-After)``, at most one
  line a second, counting the waits since the previous one) and a timeout lowered the requests
  in flight (``[overload] ...``), the batch planner waits for its kernels to compile
  (``[compiling] ...``) and the session for its endpoints' start-up probes (``[probing] ...``),
  each of the last two said only when slow (:mod:`combee_fast.engine.slow_wait`), and the batch
  planner's no-go (``[planner] no-go: ...``); ``combee learn`` subscribes it unless ``--quiet``.
- :func:`rerun_notice`: an episode sent again after its worker was lost (every run says it).
"""

from __future__ import annotations

import sys
import time
from typing import IO

from combee_fast.redact import escape_control
from combee_fast.run.events import EndpointsProbed, EpisodeRerun, Event, KernelsCompiling, NoGo, Overloaded, RetryAfter

NOTICE_EVERY_S = 1.0
"""Fewest seconds between two "waiting on Retry-After" lines."""


class WaitNotices:
    """Says on ``stream`` (default stderr) when calls wait because a server asked, when a
    timeout lowers the requests in flight, and what a slow start waits for (module docstring)."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream
        self._last = -NOTICE_EVERY_S
        self._waits = 0

    def __call__(self, event: Event) -> None:
        stream = self.stream if self.stream is not None else sys.stderr
        if isinstance(event, RetryAfter):
            self._waits += 1
            now = time.monotonic()
            if now - self._last >= NOTICE_EVERY_S:
                print(f"[waiting] {escape_control(event.endpoint)} asked to wait {event.seconds:g} s (Retry-After); "
                      f"{self._waits} call(s) told to wait since the last notice", file=stream, flush=True)
                self._last, self._waits = now, 0
        elif isinstance(event, KernelsCompiling):
            if event.seconds is None:
                print("[compiling] the batch planner's Numba kernels (first run on this machine; cached after, "
                      "about half a minute)...", file=stream, flush=True)
            else:
                print(f"[compiling] kernels ready after {event.seconds:.0f} s", file=stream, flush=True)
        elif isinstance(event, EndpointsProbed):
            if event.seconds is None:
                print(f"[probing] {', '.join(map(escape_control, event.endpoints))} ({', '.join(event.what)})...",
                      file=stream, flush=True)
            else:
                print(f"[probing] done in {event.seconds:.1f} s", file=stream, flush=True)
        elif isinstance(event, Overloaded):
            print(f"[overload] {escape_control(event.endpoint)}: a request timed out; at most {event.limit} "
                  "request(s) in flight from now on, growing back as answers come", file=stream, flush=True)
        elif isinstance(event, NoGo):
            print(f"[planner] {event.reason}", file=stream, flush=True)


def rerun_notice(event: Event) -> None:
    """One line on stderr for each episode sent again after its worker was lost."""
    if isinstance(event, EpisodeRerun):
        print(f"combee: episode {event.episode} runs again: {event.why}", file=sys.stderr)
