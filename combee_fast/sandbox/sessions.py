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
import sys
from collections.abc import Sequence
from typing import Protocol

from combee_fast.config import SandboxConfig
from combee_fast.errors import ConfigError
from combee_fast.sandbox.classify import CommandResult
from combee_fast.sandbox.limits import Limits, UidPool
from combee_fast.sandbox.scratch import SANDBOX_KIND, TRUSTED_KIND, scratch_folder, sweep_abandoned
from combee_fast.sandbox.state import SetupFile, WorkState

UIDS_PER_POOL = 256
"""Uids a pool of sandboxes uses under root unless told otherwise (sandboxes open at once)."""


class SandboxSession(Protocol):
    """One episode's sandbox (module docstring)."""

    async def run(self, command: str, *, timeout_s: float) -> CommandResult: ...

    async def final_state(self) -> WorkState:
        """The working directory now; no command runs after it."""
        ...

    async def close(self) -> None: ...


class Sandboxes:
    """The sandboxes of one process: ``config``'s mode and limits, each command within
    ``step_timeout_s`` (the executor's step limit), ``uid_count`` uids from ``uid_first`` (root
    only; default ``config.uid_base``): as many sandboxes open at once. :meth:`check` proves the
    mode works here before any episode starts."""

    def __init__(self, config: SandboxConfig, *, step_timeout_s: float, uid_first: int | None = None,
                 uid_count: int = UIDS_PER_POOL) -> None:
        self.config = config
        self.step_timeout_s = step_timeout_s
        self.limits = Limits.of(config)
        self.uids = UidPool(config.uid_base if uid_first is None else uid_first, uid_count)

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

        problem = await bwrap_problem(self.limits)
        if problem is not None:
            raise ConfigError(f"sandbox: {problem}; install bubblewrap (apt-get install bubblewrap) or pass "
                              "--sandbox none to run the agent's commands without isolation (trusted commands only)")

    async def open(self, files: Sequence[SetupFile]) -> SandboxSession:
        """A new session starting from ``files``."""
        if self.isolated:
            from combee_fast.sandbox.bwrap import BwrapSession

            return await BwrapSession.start(files, self.limits, self.uids)
        from combee_fast.sandbox.trusted import TrustedSession

        return await TrustedSession.start(files, self.limits)


def warn_unsandboxed() -> None:
    """The one line said when commands run without isolation."""
    print("combee: --sandbox none: the agent's commands run as plain processes of this user, without isolation "
          "(trusted commands only)", file=sys.stderr)
