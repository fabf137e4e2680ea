"""One MCP server connection owned by one task: :class:`McpConnection`.

The ``mcp`` SDK's session lives inside anyio task groups, which must be entered and left by the
same task, while an environment's ``reset``, ``step`` and ``close`` are awaited by whichever task
runs the episode. So the connection runs in a task of its own (the *owner*): it starts the server
(:func:`~combee_fast.mcp.transport.bounded_stdio`), initializes the SDK's
:class:`~mcp.ClientSession`, lists the tools, then makes the calls handed to it one at a time
through a queue of one, and on :meth:`McpConnection.close` (or any failure) leaves the session and
stops the server. Every wait is bounded: opening by ``open_timeout_s``, each call by the caller's
timeout; a call that times out breaks the connection (the server is stopped; later calls fail
at once). Failures are :class:`McpFailure` with a ``kind`` (:data:`FAILURE_KINDS`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from combee_fast.errors import McpFailure, McpToolError
from combee_fast.mcp.transport import Fault, bounded_stdio

FAILURE_KINDS = {
    "mcp_start": "the server could not be started or initialized",
    "mcp_timeout": "a call got no answer in its time limit",
    "mcp_exited": "the server exited",
    "mcp_output_too_large": "the server wrote a line over the output bound",
    "mcp_malformed": "the server wrote something that is not JSON-RPC",
    "mcp_tools_too_large": "the server lists more tools than a model request may carry",
    "mcp_bad_check": "the grading tool failed or answered something that is not a grade",
    "mcp_error": "the connection failed otherwise",
}
"""Why a connection or its grading failed, by kind (each fails the episode with that kind)."""

_FAULT_KINDS = {"server_exited": "mcp_exited", "output_too_large": "mcp_output_too_large",
                "malformed_jsonrpc": "mcp_malformed"}

CLOSE_WAIT_S = 5.0
"""Seconds :meth:`McpConnection.close` waits for the owner to stop the server before cancelling it
(the stop itself is shielded and bounded)."""


@dataclass(frozen=True)
class ListedTool:
    """A tool as the server lists it: name, description and input JSON Schema."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class CallResult:
    """A call's answer: its text content (joined), whether the tool flagged an error, and its
    structured content (None: none)."""

    text: str
    is_error: bool
    structured: Any = None


@dataclass
class _Job:
    name: str
    arguments: dict[str, Any]
    done: asyncio.Future[CallResult] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


def _text_of(result: Any) -> str:
    parts = []
    for block in getattr(result, "content", None) or ():
        text = getattr(block, "text", None)
        parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')}]")
    return "\n".join(parts)


class McpConnection:
    """One server process and its SDK session (module docstring). ``argv``: the server's
    command; ``env``: its environment (None: ours); ``cwd``: its working directory;
    ``max_line_bytes``: the longest message it may write."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
                 max_line_bytes: int = 1_000_000, open_timeout_s: float = 30.0) -> None:
        if not argv:
            raise ValueError("an MCP server needs a command")
        self.argv = tuple(argv)
        self._env = env
        self._cwd = cwd
        self._max_line_bytes = max_line_bytes
        self._open_timeout_s = open_timeout_s
        self._fault = Fault()
        self._jobs: asyncio.Queue[_Job | None] = asyncio.Queue(maxsize=1)
        self._owner: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[list[ListedTool]] | None = None
        self._broken: McpFailure | None = None

    def _failure(self, exc: BaseException | None, default: str) -> McpFailure:
        said = f"; it said last: {self._fault.last_words}" if self._fault.last_words else ""
        if self._fault.kind is not None:
            return McpFailure(_FAULT_KINDS.get(self._fault.kind, "mcp_error"), self._fault.message + said)
        if isinstance(exc, McpFailure):
            return exc
        text = f"{type(exc).__name__}: {exc}" if exc is not None else "the connection ended"
        return McpFailure(default, text[:300] + said)

    async def _serve(self) -> None:
        assert self._ready is not None
        job: _Job | None = None
        try:
            async with bounded_stdio(self.argv, env=self._env, cwd=self._cwd, max_line_bytes=self._max_line_bytes,
                                     fault=self._fault) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    listed = await session.list_tools()
                    self._ready.set_result([ListedTool(t.name, t.description or "", dict(t.input_schema))
                                            for t in listed.tools])
                    while (job := await self._jobs.get()) is not None:
                        try:
                            result = await session.call_tool(job.name, job.arguments)
                        except MCPError as exc:
                            if self._fault.kind is not None:
                                raise
                            if not job.done.done():
                                job.done.set_exception(McpToolError(exc.message))
                        else:
                            if not job.done.done():
                                job.done.set_result(CallResult(_text_of(result), bool(getattr(result, "is_error",
                                                                                              False)),
                                                               getattr(result, "structured_content", None)))
                        job = None
        except asyncio.CancelledError:
            self._broken = self._broken or McpFailure("mcp_error", "the connection was stopped")
            raise
        except BaseException as exc:  # whatever ended the session: kept as the connection's failure
            kind = "mcp_start" if not self._ready.done() else "mcp_error"
            self._broken = self._broken or self._failure(exc, kind)
        finally:
            failure = self._broken or self._failure(None, "mcp_error")
            self._broken = failure
            if not self._ready.done():
                self._ready.set_exception(failure)
                self._ready.exception()  # retrieved: no "never retrieved" warning when nobody waits
            for pending in (job, *self._drain()):
                if pending is not None and not pending.done.done():
                    pending.done.set_exception(failure)
                    pending.done.exception()  # its caller may have timed out: no "never retrieved" warning

    def _drain(self) -> list[_Job | None]:
        drained = []
        while not self._jobs.empty():
            drained.append(self._jobs.get_nowait())
        return drained

    async def open(self) -> list[ListedTool]:
        """Start the server, initialize and list its tools (within ``open_timeout_s``);
        :class:`McpFailure` (``mcp_start`` or a fault's kind) if that fails, the server stopped."""
        if self._owner is not None:
            raise RuntimeError("McpConnection.open called twice")
        self._ready = asyncio.get_running_loop().create_future()
        self._owner = asyncio.get_running_loop().create_task(self._serve(), name=f"mcp:{self.argv[0]}")
        try:
            return await asyncio.wait_for(asyncio.shield(self._ready), self._open_timeout_s)
        except TimeoutError:
            self._broken = McpFailure("mcp_start", f"no answer to initialize in {self._open_timeout_s:g} s")
            await self.close()
            raise self._broken from None
        except McpFailure as exc:
            await self.close()
            raise McpFailure("mcp_start" if exc.kind == "mcp_error" else exc.kind, exc.message) from None

    async def call(self, name: str, arguments: dict[str, Any], *, timeout_s: float) -> CallResult:
        """Call tool ``name``; :class:`McpToolError` when the server refuses the call (the
        connection goes on), :class:`McpFailure` when the connection failed or the call took
        longer than ``timeout_s`` (the connection is then stopped)."""
        if self._broken is not None:
            raise self._broken
        if self._owner is None or self._owner.done():
            raise McpFailure("mcp_error", "the connection is not open")
        job = _Job(name, arguments)
        try:
            async with asyncio.timeout(timeout_s):
                await self._jobs.put(job)
                return await asyncio.shield(job.done)
        except TimeoutError:
            self._broken = self._broken or McpFailure("mcp_timeout", f"{name}: no answer in {timeout_s:g} s")
            await self.close()
            raise self._broken from None

    async def close(self) -> None:
        """Stop the session and the server (idempotent; bounded by :data:`CLOSE_WAIT_S` plus the
        transport's shielded stop)."""
        owner = self._owner
        if owner is None or owner.done():
            if owner is not None and not owner.cancelled():
                owner.exception()
            return
        if self._broken is None:
            with contextlib.suppress(asyncio.QueueFull):
                self._jobs.put_nowait(None)
        else:
            owner.cancel()
        done, _ = await asyncio.wait({owner}, timeout=CLOSE_WAIT_S)
        if not done:
            owner.cancel()
            await asyncio.wait({owner})
        if not owner.cancelled():
            owner.exception()

    @property
    def pid_alive(self) -> bool:
        """Whether the owner task (and so possibly the server) is still running."""
        return self._owner is not None and not self._owner.done()
