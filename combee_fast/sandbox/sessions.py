"""Where an environment gets the sandbox of an episode: :class:`Sandboxes`.

A :class:`SandboxSession` is one episode's working directory and the commands run in it: it
starts from a set-up (:class:`~.state.SetupFile` list), runs commands one at a time (each with
the step's wall-clock limit, its output kept up to the output limit, the wall it hit named by
:mod:`.classify`), gives its final state once at the end, and is always closed (every process
it started is killed, its folders removed). Two implementations: :mod:`.bwrap` (isolated) and
:mod:`.trusted` (``sandbox.mode = "none"``: plain processes, for trusted commands only).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from combee_fast.config import SandboxConfig
from combee_fast.errors import ConfigError, SandboxError
from combee_fast.sandbox.classify import CommandResult
from combee_fast.sandbox.limits import Limits, UidPool
from combee_fast.sandbox.scratch import SANDBOX_KIND, TRUSTED_KIND, scratch_folder, sweep_abandoned
from combee_fast.sandbox.state import SetupFile, WorkState

if TYPE_CHECKING:
    from combee_fast.sandbox.bwrap import BwrapSession

UIDS_PER_POOL = 256
"""Uids a pool of sandboxes uses under root unless told otherwise (sandboxes open at once)."""


class SandboxSession(Protocol):
    """One episode's sandbox (module docstring): a working directory that starts with the set-up
    files, commands run there one at a time, then its final state, and always :meth:`close`."""

    async def run(self, command: str, *, timeout_s: float) -> CommandResult:
        """Run ``command`` with ``/bin/sh -c`` in the working directory, killed (with everything it
        started) after ``timeout_s`` wall seconds (an environment passes
        :attr:`Sandboxes.step_timeout_s`). Never raises for the command's own failure: the result
        has its exit status, its output (stdout and stderr together, cut to ``sandbox.output_kb``),
        the bytes it wrote in all, its seconds, and ``kind``, the wall it hit (``timeout``,
        ``process_limit``, ``network_denied``...; None: none). Files persist between commands."""
        ...

    async def final_state(self) -> WorkState:
        """The working directory now (files, modes, folders, links; read safely); no command runs
        after it."""
        ...

    async def close(self) -> None:
        """End the session (isolated: the sandbox and everything in it is killed) and remove its
        folders; a second close does nothing."""
        ...


def uid_span(open_at_once: int, config: SandboxConfig) -> int:
    """The uids a pool of ``open_at_once`` sandboxes holds: one each, and one per warm one."""
    return open_at_once + config.warm


class Sandboxes:
    """The sandboxes of one process: ``config``'s mode and limits, each command within
    ``step_timeout_s`` (the executor's step limit), ``uid_count`` sandboxes open at once, their
    uids the :func:`uid_span` from ``uid_first`` (root only; default ``config.uid_base``).
    :meth:`check` proves the mode works here before any episode starts. Isolated, ``config.warm``
    sandboxes are kept started ahead of need (:meth:`open` takes one and starts the next); use
    the pool as an async context manager, or :meth:`close` it, so that none is left running."""

    def __init__(self, config: SandboxConfig, *, step_timeout_s: float, uid_first: int | None = None,
                 uid_count: int = UIDS_PER_POOL) -> None:
        self.config = config
        self.step_timeout_s = step_timeout_s
        self.limits = Limits.of(config)
        self.uids = UidPool(config.uid_base if uid_first is None else uid_first, uid_span(uid_count, config))
        self._warm: collections.deque[asyncio.Task[BwrapSession]] = collections.deque()

    async def __aenter__(self) -> Sandboxes:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    @property
    def isolated(self) -> bool:
        return self.config.mode != "none"

    async def check(self) -> None:
        """:class:`ConfigError` in one line when the mode cannot run here (no ``bwrap``, or one
        that cannot create its namespaces); without isolation, the one line saying so. First
        removes the folders that sandboxes of killed processes left (:mod:`.scratch`)."""
        if not self.isolated:
            await asyncio.to_thread(sweep_abandoned, TRUSTED_KIND, None)
            warn_unsandboxed()
            return
        await asyncio.to_thread(sweep_abandoned, SANDBOX_KIND, scratch_folder())
        from combee_fast.sandbox.bwrap import bwrap_problem

        problem = await bwrap_problem(self.limits, self.uids)
        if problem is not None:
            raise ConfigError(f"sandbox: {problem}; install bubblewrap (apt-get install bubblewrap) or pass "
                              "--sandbox none to run the agent's commands without isolation (trusted commands only)")

    async def open(self, files: Sequence[SetupFile]) -> SandboxSession:
        """A new session starting from ``files`` (isolated: a warm one when there is one)."""
        if not self.isolated:
            from combee_fast.sandbox.trusted import TrustedSession

            return await TrustedSession.start(files, self.limits)
        from combee_fast.sandbox.bwrap import BwrapSession

        session = None
        if self._warm:
            with contextlib.suppress(SandboxError, RuntimeError):  # it could not start: a fresh one says why
                session = await self._warm.popleft()
        if session is None:
            session = await BwrapSession.launch(self.limits, self.uids)
        try:
            await session.begin(files)
        finally:  # the next one starts once this one is ready, not competing with it
            while len(self._warm) < self.config.warm:
                self._warm.append(asyncio.ensure_future(BwrapSession.launch(self.limits, self.uids)))
        return session

    async def close(self) -> None:
        """Close the warm sandboxes (the sessions given out are their holders' to close)."""
        warm, self._warm = list(self._warm), collections.deque()
        for started in await asyncio.gather(*warm, return_exceptions=True):
            if not isinstance(started, BaseException):
                await started.close()


def warn_unsandboxed() -> None:
    """The one line said when commands run without isolation."""
    print("combee: --sandbox none: the agent's commands run as plain processes of this user, without isolation "
          "(trusted commands only)", file=sys.stderr)
