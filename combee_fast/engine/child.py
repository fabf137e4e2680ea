"""One supervisor for the engine's worker processes (the process executor's workers, the process
learner's child): start ``python -m MODULE``, exchange length-prefixed frames (:mod:`.frames`)
over its stdin and stdout, pass its stderr on to ours (keeping its end), say how it ended (its
exit code or signal, and its last error line) and stop it.

- host side: :class:`Child`;
- worker side: :func:`parent_pipes`, the frames' reader and writer on the worker's original
  stdin and stdout (what the worker prints afterwards goes to its stderr, never into the frames).

A frame longer than :data:`~.frames.MAX_FRAME_BYTES` is a broken stream (``ValueError``), as is
one cut short (``asyncio.IncompleteReadError``); the caller decides what that ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Mapping

from combee_fast.engine.frames import frame, read_frame

STDERR_KEPT = 4096
"""Last characters of a worker's stderr kept, to say why it ended."""

READ_LIMIT = 1 << 26
"""Buffer limit of the streams that carry frames (a frame may be a whole published artifact)."""


class Child:
    """One worker process speaking frames (module docstring); built by :meth:`start`."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self._stderr = ""
        assert process.stderr is not None
        self._relaying = asyncio.create_task(self._relay(process.stderr), name="combee-child-stderr")

    @classmethod
    async def start(cls, module: str, *args: str, env: Mapping[str, str] | None = None) -> Child:
        """``python -P -m module *args`` (this interpreter; ``-P``: the working folder is not on its
        import path) with pipes on its stdin, stdout and stderr; ``env``: its whole environment
        (None: ours)."""
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-P", "-m", module, *args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=None if env is None else dict(env), limit=READ_LIMIT)
        return cls(process)

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, *payloads: bytes) -> None:
        """Each payload as one frame, all in one write; nothing once its stdin is closed."""
        stdin = self.process.stdin
        if payloads and stdin is not None and not stdin.is_closing():
            stdin.write(b"".join(frame(payload) for payload in payloads))

    def unsent(self) -> int:
        """Bytes written but not yet taken by the worker."""
        stdin = self.process.stdin
        return stdin.transport.get_write_buffer_size() if stdin is not None and not stdin.is_closing() else 0

    async def drain(self) -> None:
        """Wait until the worker has taken what was written (down to the pipe's low mark)."""
        stdin = self.process.stdin
        if stdin is not None and not stdin.is_closing():
            with contextlib.suppress(ConnectionError):  # it died: its end says why
                await stdin.drain()

    async def receive(self) -> bytes | None:
        """The next frame's payload; None at a clean end of its stdout (``ValueError`` or
        ``asyncio.IncompleteReadError`` for a broken stream)."""
        assert self.process.stdout is not None
        return await read_frame(self.process.stdout)

    def close_input(self) -> None:
        """Close its stdin (after what was written): a worker ends at the end of its input."""
        stdin = self.process.stdin
        if stdin is not None and not stdin.is_closing():
            with contextlib.suppress(OSError):  # it is gone already
                stdin.close()

    def kill(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()

    async def ended(self) -> str:
        """Wait for its end and the last of its stderr; how it ended: ``exited with code N`` or
        ``was killed by signal N``, then ``: <its last error line>`` when it wrote one."""
        code = await self.process.wait()
        await self._relaying
        last = next((line for line in reversed(self._stderr.splitlines()) if line.strip()), "")
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return how + (f": {last.strip()[:300]}" if last else "")

    async def stop(self, timeout: float) -> str:
        """Close its input, give it ``timeout`` seconds to exit, kill it after that; how it ended."""
        self.close_input()
        try:
            await asyncio.wait_for(asyncio.shield(self.process.wait()), timeout)
        except TimeoutError:
            self.kill()
        return await self.ended()

    async def _relay(self, stderr: asyncio.StreamReader) -> None:
        """Its stderr, passed on to ours, its end kept."""
        while chunk := await stderr.read(STDERR_KEPT):
            text = chunk.decode(errors="replace")
            self._stderr = (self._stderr + text)[-STDERR_KEPT:]
            with contextlib.suppress(OSError, ValueError):  # our stderr is closed
                sys.stderr.write(text)


async def parent_pipes() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """In a worker: the frames' reader (its original stdin) and writer (its original stdout).
    File descriptor 0 then reads ``/dev/null`` and 1 writes to stderr, so what the worker (or
    code it runs) prints never lands among the frames."""
    loop = asyncio.get_running_loop()
    frames_in = os.fdopen(os.dup(0), "rb", buffering=0)
    frames_out = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    reader = asyncio.StreamReader(limit=READ_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), frames_in)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, frames_out)
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)
