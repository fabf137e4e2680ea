"""A bounded stdio transport for the ``mcp`` SDK's :class:`~mcp.ClientSession`.

The SDK's own stdio transport reads a server's lines without a bound; this one is the same
pipe (newline-delimited JSON-RPC over the server's stdin and stdout) with walls, so that a
hostile or broken server costs only its own episode:

- the server runs in a process group of its own, under
  :mod:`combee_fast.engine.reaper`: whatever it starts, in a session of its own too, is stopped
  with it, and it dies with the engine (killed or not); on exit of :func:`bounded_stdio` (normal,
  error or cancellation) its stdin is closed, then the whole group gets SIGTERM and,
  :data:`KILL_AFTER_S` later, SIGKILL, and the process is reaped;
- a line longer than ``max_line_bytes`` (``output_too_large``), a line that is not one JSON-RPC
  message (``malformed_jsonrpc``) or the server's stdout ending (``server_exited``) ends the
  connection: the read stream closes, every request waiting on it fails, and :attr:`Fault.kind`
  says why;
- its stderr is read as it comes and only its last :data:`STDERR_TAIL_BYTES` kept: the last line
  (:attr:`Fault.last_words`) says what a server that died said last.

Messages are parsed and written by the SDK's own types (:data:`mcp_types.jsonrpc_message_adapter`);
the protocol (initialize, tools/list, tools/call) is the SDK's :class:`~mcp.ClientSession`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass

import anyio
import anyio.abc
import mcp_types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from combee_fast.engine.reaper import reaped

KILL_AFTER_S = 1.0
"""Seconds between SIGTERM and SIGKILL of a server's process group when it is stopped."""

READ_CHUNK = 65_536

STDERR_TAIL_BYTES = 4096
"""How much of a server's latest stderr is kept."""

DRAIN_S = 0.5
"""Seconds the stderr of a stopped server is read for what it wrote last."""


@dataclass
class Fault:
    """Why a connection ended on the server's side (None: it has not), and the end of what the
    server wrote on stderr."""

    kind: str | None = None
    message: str = ""
    stderr_tail: bytes = b""

    @property
    def last_words(self) -> str:
        """The last non-empty line the server wrote on stderr ("" when none), at most 300 characters."""
        lines = [line for line in self.stderr_tail.decode(errors="replace").splitlines() if line.strip()]
        return lines[-1].strip()[:300] if lines else ""

    def keep(self, chunk: bytes) -> None:
        self.stderr_tail = (self.stderr_tail + chunk)[-STDERR_TAIL_BYTES:]

    def set(self, kind: str, message: str) -> None:
        if self.kind is None:
            self.kind, self.message = kind, message


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def stop_process(process: anyio.abc.Process) -> None:
    """Stop ``process`` and its group (module docstring); shielded from cancellation, bounded."""
    with anyio.CancelScope(shield=True):
        if process.stdin is not None:
            with contextlib.suppress(Exception):
                await process.stdin.aclose()
        if process.returncode is None:
            _signal_group(process.pid, signal.SIGTERM)
            with anyio.move_on_after(KILL_AFTER_S):
                await process.wait()
        _signal_group(process.pid, signal.SIGKILL)  # whatever of its group is left
        if process.returncode is None:
            with anyio.move_on_after(KILL_AFTER_S):
                await process.wait()
        if process.stdout is not None:
            with contextlib.suppress(Exception):
                await process.stdout.aclose()


async def _read_lines(process: anyio.abc.Process, sink: MemoryObjectSendStream[SessionMessage | Exception],
                      fault: Fault, max_line_bytes: int) -> None:
    assert process.stdout is not None
    buffer = b""
    async with sink:
        try:
            while True:
                try:
                    chunk = await process.stdout.receive(READ_CHUNK)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    fault.set("server_exited", "the MCP server closed its output (it exited)")
                    return
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                if len(buffer) > max_line_bytes or any(len(line) > max_line_bytes for line in lines):
                    fault.set("output_too_large", f"the MCP server wrote a line over {max_line_bytes} bytes")
                    return
                for line in lines:
                    if not line.strip():
                        continue
                    try:
                        message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except ValueError as exc:
                        fault.set("malformed_jsonrpc", f"the MCP server wrote a line that is not JSON-RPC: "
                                  f"{str(exc).splitlines()[0][:200]}")
                        return
                    await sink.send(SessionMessage(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return


async def _keep_stderr(stream: anyio.abc.ByteReceiveStream, fault: Fault) -> None:
    """Keep the end of ``stream`` in ``fault`` until it ends."""
    with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
        while True:
            fault.keep(await stream.receive(READ_CHUNK))


async def _write_lines(process: anyio.abc.Process, source: MemoryObjectReceiveStream[SessionMessage],
                       fault: Fault) -> None:
    assert process.stdin is not None
    async with source:
        try:
            async for message in source:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                await process.stdin.send(data.encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            fault.set("server_exited", "the MCP server closed its input (it exited)")


@contextlib.asynccontextmanager
async def bounded_stdio(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
                        max_line_bytes: int, fault: Fault
                        ) -> AsyncIterator[tuple[MemoryObjectReceiveStream[SessionMessage | Exception],
                                                 MemoryObjectSendStream[SessionMessage]]]:
    """Start ``argv`` and yield the (read, write) streams of a :class:`~mcp.ClientSession` over
    its stdio; the server is stopped on exit whatever happened (module docstring). OSError when
    it cannot be started."""
    process = await anyio.open_process(reaped(list(argv)), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, env=dict(env) if env is not None else None,
                                       cwd=cwd, start_new_session=True)
    try:
        to_session, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        to_server, from_session = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as group:
            group.start_soon(_read_lines, process, to_session, fault, max_line_bytes)
            group.start_soon(_write_lines, process, from_session, fault)
            if process.stderr is not None:
                group.start_soon(_keep_stderr, process.stderr, fault)
            try:
                yield from_server, to_server
            finally:
                group.cancel_scope.cancel()
                for stream in (from_server, to_server):
                    await stream.aclose()
    finally:
        await stop_process(process)
        if process.stderr is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(DRAIN_S):
                await _keep_stderr(process.stderr, fault)  # what it wrote last, after the reader was stopped
            with contextlib.suppress(Exception):
                await process.stderr.aclose()
