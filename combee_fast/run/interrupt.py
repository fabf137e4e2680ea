"""Stopping a run at a safe point on SIGINT or SIGTERM.

:meth:`StopRequest.install` makes the first SIGINT or SIGTERM only *ask* for a stop: the train
loop finishes the step in flight, writes its checkpoint, ``final.json`` and ``best.json``, and
returns marked interrupted (the command line then writes ``summary.json`` and prints the resume
command). A second signal of either kind is not caught: SIGINT raises ``KeyboardInterrupt`` at
once and SIGTERM ends the process; the checkpoint of the last completed step is still on disk.
"""

from __future__ import annotations

import asyncio
import signal
import sys

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequest:
    """Whether a stop was asked for, and by which signal (``requested``: e.g. ``"SIGTERM"``)."""

    def __init__(self) -> None:
        self.requested: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def request(self, name: str) -> None:
        """Ask for a stop (what the signal handler does); later signals get their default action."""
        if self.requested is None:
            self.requested = name
            print(f"combee: {name} received; stopping after the current step (send it again to stop at once)",
                  file=sys.stderr, flush=True)
        self.uninstall()

    def install(self) -> None:
        """Catch SIGINT and SIGTERM on the running event loop; off the main thread (where signals
        cannot be caught) nothing changes."""
        loop = asyncio.get_running_loop()
        try:
            for sig in SIGNALS:
                loop.add_signal_handler(sig, self.request, sig.name)
        except (ValueError, RuntimeError, NotImplementedError):
            for sig in SIGNALS:
                loop.remove_signal_handler(sig)
            return
        self._loop = loop

    def uninstall(self) -> None:
        """Give SIGINT and SIGTERM back their default actions."""
        if self._loop is None:
            return
        for sig in SIGNALS:
            self._loop.remove_signal_handler(sig)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self._loop = None
