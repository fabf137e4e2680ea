"""Starting a sandbox's process cheaply: ``posix_spawn`` (no copy of the engine's memory).

Forking the engine (hundreds of megabytes once numpy and numba are loaded) to run a child's set-up
code costs tens of milliseconds a process; ``posix_spawn`` costs about one. So nothing runs in the
child before ``exec``: the uid is set by ``setpriv`` (util-linux, root only: :func:`as_uid`), the
limits by the sandbox's own first shell (:func:`~combee_fast.sandbox.limits.shell_limits`), and
the child gets its own session (``setsid``: a Ctrl-C at the terminal reaches the engine, which
stops cleanly, not its sandboxes) from ``posix_spawn`` itself. The child gets no descriptor of
the engine but its three standard streams and the ones it is given (``pass_fds``, as descriptors
:data:`PASSED_FD` on): every other
descriptor open here, inheritable or not (one the engine's parent shell left open, a worker's
frame pipe, Ray's log files), is closed in the child before ``exec`` (:func:`closing_actions`). :class:`Launched` is the
running child: its pipes as asyncio streams, and its exit, awaited through a pidfd (no thread,
no child watcher).
"""

from __future__ import annotations

import asyncio
import fcntl
import io
import os
import shutil
import signal
from collections.abc import Sequence


def _pipe_end(fd: int, mode: str, loop: asyncio.AbstractEventLoop) -> io.FileIO:
    """A file object on our end ``fd`` of a pipe, for ``connect_read_pipe``/``connect_write_pipe``.
    uvloop hands the number itself to libuv, which closes it with the transport, and then closes
    the file object too: a second close of the same number, which closes whatever another thread
    opened in between. Under uvloop the file object therefore does not own ``fd`` (the transport
    closes it once); under asyncio's own loop the transport closes it through the file object."""
    return io.FileIO(fd, mode, closefd=type(loop).__module__.partition(".")[0] != "uvloop")


def as_uid(argv: Sequence[str], uid: int | None) -> list[str]:
    """``argv`` run as ``uid`` and its group with no supplementary group (``setpriv``, root only;
    None: as this process's user)."""
    if uid is None:
        return list(argv)
    return [shutil.which("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]


PASSED_FD = 3
"""The descriptor number a child finds the first of its ``pass_fds`` as (the next ones follow)."""


def closing_actions(kept: Sequence[int]) -> list[tuple[int, int]]:
    """``posix_spawn`` actions closing every descriptor open in this process but 0, 1, 2 and
    ``kept`` (read from ``/proc/self/fd``; one opened meanwhile by another thread is close-on-exec
    unless that thread made it inheritable). A descriptor closed meanwhile is no error: glibc's
    close action ignores ``EBADF``."""
    keep = {0, 1, 2, *kept}
    return [(os.POSIX_SPAWN_CLOSE, fd) for fd in sorted(int(name) for name in os.listdir("/proc/self/fd"))
            if fd not in keep]


RESTORED_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)
"""Signals Python ignores that a child must get back (ignored dispositions survive ``exec``):
a writer to a closed pipe, or past the file-size limit, is stopped by them."""


class Launched:
    """A child started by :meth:`start`: ``stdin``, ``stdout`` as asyncio streams (``stdin``/
    ``stdout`` None when not piped), ``stderr`` read in a bounded way by :meth:`error_text`."""

    def __init__(self, pid: int, stdin: asyncio.StreamWriter | None, stdout: asyncio.StreamReader | None,
                 stderr: int | None) -> None:
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self._stderr = stderr
        self.returncode: int | None = None
        self._pidfd = os.pidfd_open(pid)

    def pipes(self) -> tuple[asyncio.StreamWriter, asyncio.StreamReader]:
        """Its stdin and stdout (a child started with ``pipes``)."""
        if self.stdin is None or self.stdout is None:
            raise RuntimeError("the child was started without pipes")
        return self.stdin, self.stdout

    @classmethod
    async def start(cls, argv: Sequence[str], *, pipes: bool = True, stdout_file: int | None = None,
                    pass_fds: Sequence[int] = (), env: dict[str, str] | None = None) -> Launched:
        """Start ``argv`` in a session of its own; ``pipes``: stdin, stdout and stderr are pipes to
        us (else stdin is ``/dev/null`` and stdout and stderr go to ``stdout_file``); ``pass_fds``:
        descriptors the child gets as :data:`PASSED_FD`, :data:`PASSED_FD` + 1... It inherits no
        other (module docstring)."""
        loop = asyncio.get_running_loop()
        ours: list[int] = []
        actions: list[tuple[int, ...]] = []
        if pipes:
            child_in, our_in = os.pipe()
            our_out, child_out = os.pipe()
            our_err, child_err = os.pipe()
            actions += [(os.POSIX_SPAWN_DUP2, child_in, 0), (os.POSIX_SPAWN_DUP2, child_out, 1),
                        (os.POSIX_SPAWN_DUP2, child_err, 2)]
            theirs = [child_in, child_out, child_err]
            ours = [our_in, our_out, our_err]
        else:
            null = os.open(os.devnull, os.O_RDONLY)
            assert stdout_file is not None
            actions += [(os.POSIX_SPAWN_DUP2, null, 0), (os.POSIX_SPAWN_DUP2, stdout_file, 1),
                        (os.POSIX_SPAWN_DUP2, stdout_file, 2)]
            theirs = [null]
        for fd in (*ours, *theirs):
            os.set_inheritable(fd, False)
        kept = tuple(range(PASSED_FD, PASSED_FD + len(pass_fds)))
        above = PASSED_FD + len(pass_fds)  # copies numbered past the targets: no copy overwrites a source
        copies = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, above) for fd in pass_fds]
        theirs += copies
        actions += [(os.POSIX_SPAWN_DUP2, copy, target) for copy, target in zip(copies, kept)]
        actions += closing_actions(kept)
        try:
            pid = os.posix_spawn(argv[0], list(argv), env if env is not None else {}, file_actions=actions,
                                 setsid=True, setsigmask=(), setsigdef=RESTORED_SIGNALS)
        finally:
            for fd in theirs:
                os.close(fd)
        if not pipes:
            return cls(pid, None, None, None)
        our_in, our_out, our_err = ours
        reader = asyncio.StreamReader(limit=1 << 20)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), _pipe_end(our_out, "rb", loop))
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                            _pipe_end(our_in, "wb", loop))
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        os.set_blocking(our_err, False)
        return cls(pid, writer, reader, our_err)

    def error_text(self, limit: int = 2000) -> str:
        """What the child wrote on stderr so far (at most ``limit`` bytes)."""
        if self._stderr is None:
            return ""
        try:
            return os.read(self._stderr, limit).decode(errors="replace").strip()
        except BlockingIOError:
            return ""

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    async def wait(self) -> int:
        """Its exit status (the shell's convention: 128 + the signal that killed it)."""
        if self.returncode is None:
            loop = asyncio.get_running_loop()
            exited: asyncio.Future[None] = loop.create_future()

            def on_exit() -> None:
                if not exited.done():
                    exited.set_result(None)

            loop.add_reader(self._pidfd, on_exit)
            try:
                await exited
            finally:
                loop.remove_reader(self._pidfd)
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
            if self.returncode < 0:
                self.returncode = 128 - self.returncode
            self._release()
        return self.returncode

    def _release(self) -> None:
        os.close(self._pidfd)
        if self._stderr is not None:
            os.close(self._stderr)
            self._stderr = None
        if self.stdin is not None:
            self.stdin.close()
