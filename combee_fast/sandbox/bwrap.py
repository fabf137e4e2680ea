"""One episode's sandbox in bubblewrap (``bwrap``, the Debian package ``bubblewrap``).

The sandbox sees: the host's ``/usr`` read-only (with the ``/bin``, ``/lib``... links of a
merged-usr system), ``/etc/alternatives`` and ``/etc/ld.so.cache`` read-only (nothing else of
``/etc``: no ``passwd``, ``shadow``, keys or hosts), a fresh ``/proc`` and a minimal ``/dev``, an
empty ``/tmp``, and ``/work``: a tmpfs of ``disk_mb`` that starts with the set-up files. It has
no network (a namespace of its own with only loopback), no view of the host's processes, no
capabilities, no descriptor of the engine's (its commands hold ``/dev/null``, the output file and
their script, nothing else: :mod:`.launch`), an empty environment (``PATH``, ``HOME=/work``, ``LANG`` only: no API keys), and
the resource limits of :mod:`.limits`. It dies with the process that opened it.

A sandbox can be started before its episode is known (:meth:`BwrapSession.launch`): bubblewrap
builds its namespaces and mounts while the host does other work, and the runner waits for a
first line (``go``) before it unpacks the set-up archive the host has written by then
(:meth:`BwrapSession.begin`). Inside, after that, a small ``sh`` runner reads one line per command from the host (``N SECONDS``), runs the
command the host wrote to ``/run/cmd/cN`` with its output appended to ``/run/out`` (a host file, the only
writable path the host shares: its size is bounded by the file-size limit), waits for it and
answers ``N STATUS``. A command's result has what was written to ``/run/out`` since the last
result: its own output, and what processes an earlier command left running wrote meanwhile (a
fork bomb run in the background that hit the process limit and died out between two commands
is named by the next result). The host empties the file before a command only when no process
but the init and the runner is left in the sandbox, keeping what it had not read yet for the
next result, so nothing written there is lost before the host has read it. The command runs as a background job the runner waits for: dash starts
foreground commands with ``vfork``, and a writer stopped by the file-size signal would take the
runner with it. At the step's limit the host kills the command and everything it started that is
still its descendant (:func:`kill_tree`); what detached itself dies when the sandbox is closed.
``export BLOCKS`` makes it write the working directory as a tar archive into ``/run/out``,
raising its own file-size limit to the hard limit (the disk's size and a margin) for that: the
final state, read once (:mod:`.state`). Closing kills the sandbox's pid-namespace init while
bwrap still waits for it, so nothing is left for the host's init to reap. The limits are set by
the runner's first line (:func:`~.limits.shell_limits`); the process is started without a fork of
the engine (:mod:`.launch`); its host-side files live in memory (:mod:`.scratch`).

What it does not protect against: kernel bugs (it shares the host's kernel), reading whatever
``/usr`` holds, CPU and memory pressure on the host within the limits, processes a command
detached from itself living until the sandbox is closed, and a hostile command writing bytes into
the runner's own pipes (that only garbles its own episode, which then fails).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import time
from collections.abc import Sequence
from pathlib import Path

from combee_fast.sandbox.classify import FILE_SIGNAL, CommandResult, at_process_limit, classify
from combee_fast.sandbox.launch import PASSED_FD, Launched, as_uid
from combee_fast.sandbox.limits import Limits, UidPool, process_limit, processes_end, shell_limits
from combee_fast.sandbox import seccomp
from combee_fast.sandbox.scratch import SANDBOX_KIND, new_folder, scratch_folder
from combee_fast.errors import SandboxError
from combee_fast.sandbox.state import SetupFile, WorkState, setup_archive, state_from_tar

RUNNER = r"""
cd /work || exit 97
read -r go || exit 96
tar -xpf /run/setup.tar 2>/run/out || { echo "setup-failed $?"; exit 98; }
echo ready
while read -r n t; do
  if [ "$n" = export ]; then
    why=$( ( ulimit -f "$t" && tar -cf /run/out . ) </dev/null 2>&1 )
    s=$?
    [ "$s" = 0 ] || printf '%.400s\n' "$why" >/run/out
  else
    /bin/sh /run/cmd/c"$n" </dev/null >>/run/out 2>&1 &
    wait $!
    s=$?
  fi
  echo "$n $s"
done
"""
"""The command runner inside the sandbox (module docstring)."""

GRACE_S = 5.0
"""Seconds past a command's limit the host waits for the runner before it kills the sandbox."""

START_TIMEOUT_S = 30.0
"""Seconds a sandbox may take to start (unpack its set-up and say it is ready)."""

INLINE_STATE_BYTES = 256 * 1024
"""A final state archive this small is read on the event loop (a thread's hand-off costs more)."""

END_WAIT_S = 5.0
"""Seconds a closed sandbox's processes may take to be gone before its uid is retired."""

_STATUS = re.compile(rb"^(\d+) (\d+)\n$")
_SYSTEM_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_ETC_KEPT = ("/etc/alternatives", "/etc/ld.so.cache")


def _system_view() -> list[str]:
    """bwrap options giving the sandbox the host's system, read-only."""
    options = ["--ro-bind", "/usr", "/usr"]
    for name in _SYSTEM_LINKS:
        host = Path("/") / name
        if host.is_symlink():
            options += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            options += ["--ro-bind", str(host), f"/{name}"]
    for path in _ETC_KEPT:
        options += ["--ro-bind-try", path, path]
    return options


def bwrap_command(folder: Path, limits: Limits, info_fd: int, processes: int, seccomp_fd: int | None) -> list[str]:
    """The command line of a sandbox whose host-side files are in ``folder``, its runner limited
    to ``limits`` and ``processes``; bwrap writes what it started (its ``child-pid``) on ``info_fd``
    (a single digit), which the runner closes first: its commands hold only their own streams.
    ``seccomp_fd``: the system-call filter bwrap loads (:mod:`.seccomp`; None: none). The root,
    ``/dev`` and the system are read-only; ``/tmp``, ``/dev/shm`` and ``/work`` are tmpfs of
    ``disk_mb`` each; no user namespace can be made inside (no mounts of the command's own)."""
    executable = shutil.which("bwrap") or "bwrap"
    size = str(limits.disk_bytes)
    return [
        executable, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
        "--clearenv", "--info-fd", str(info_fd), *(["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []),
        "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", "/work",
        "--setenv", "LANG", "C.UTF-8", "--setenv", "TMPDIR", "/tmp",
        *_system_view(), "--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/dev/shm",
        "--remount-ro", "/dev", "--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/work",
        "--ro-bind", str(folder / "cmd"), "/run/cmd", "--ro-bind", str(folder / "setup.tar"), "/run/setup.tar",
        "--bind", str(folder / "out"), "/run/out", "--remount-ro", "/", "--chdir", "/work",
        "--", "/bin/sh", "-c", shell_limits(limits, processes) + f"\nexec {info_fd}>&-" + RUNNER,
    ]


async def bwrap_problem(limits: Limits, uids: UidPool) -> str | None:
    """Why a sandbox cannot start here (None: one started, as a uid of ``uids``, and ran a command)."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed"
    try:
        session = await BwrapSession.start([], limits, uids)
    except SandboxError as exc:
        return f"bubblewrap cannot start a sandbox here ({exc})"
    try:
        result = await session.run("echo ok", timeout_s=10.0)
    finally:
        await session.close()
    return None if result.output.strip() == "ok" else f"a probe command answered {result.output[:120]!r}"


def _prepare(uid: int | None) -> Path:
    """The host-side folder of a new sandbox: its (empty) set-up archive, its command folder and
    its output file (the one file the sandbox's uid may write). The folder is the engine's, mode
    0700; under root its group is the sandbox's uid with search permission only (0710), so that
    the sandbox's bwrap can reach the files it binds and no other user can list or read them."""
    folder = new_folder(SANDBOX_KIND, scratch_folder())
    try:
        if uid is not None:
            os.chown(folder, -1, uid)
            os.chmod(folder, 0o710)
        (folder / "cmd").mkdir(mode=0o711)
        (folder / "setup.tar").touch()
        os.chmod(folder / "setup.tar", 0o644)
        out = folder / "out"
        out.touch(mode=0o600)
        if uid is not None:
            os.chown(out, uid, uid)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def _filter_file() -> int | None:
    """A descriptor of the system-call filter (:mod:`.seccomp`) for bwrap to read; None: none."""
    code = seccomp.program()
    if code is None:
        return None
    fd = os.memfd_create("combee-seccomp", os.MFD_CLOEXEC)
    os.write(fd, code)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _write_setup(folder: Path, files: Sequence[SetupFile]) -> None:
    """Write the set-up archive of ``files`` in place: the sandbox sees the file's inode, bound
    when it started."""
    with open(folder / "setup.tar", "r+b") as archive:
        archive.write(setup_archive(files))
        archive.truncate()


def export_failure(line: bytes, said: str, state_bytes: int) -> str:
    """Why the working directory's archive failed, from the runner's answer ``line`` and what
    tar ``said``: past the size its disk allows (stopped by the file-size limit), or tar's own
    first line (a file it could not read, such as one of mode 000...)."""
    answer = line.decode(errors="replace").strip()
    if answer == f"export {FILE_SIGNAL}":
        return f"the working directory's archive is larger than the {state_bytes} bytes its disk allows"
    if not answer.startswith("export "):
        return f"the sandbox did not give its state ({answer!r})"
    first = next((text.strip() for text in said.splitlines() if text.strip()), "no reason given")
    return f"the working directory could not be archived (tar: {first[:200]})"


def _child_pid(info: int) -> int | None:
    """The ``child-pid`` bwrap wrote on its info pipe (None: it wrote none)."""
    os.set_blocking(info, False)
    try:
        data = os.read(info, 4096)
    except BlockingIOError:
        return None
    match = re.search(rb'"child-pid"\s*:\s*(\d+)', data)
    return int(match[1]) if match else None


def _parents() -> dict[int, list[int]]:
    """Every process's children, from ``/proc/*/stat``."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    return children


def _children(pid: int) -> list[int]:
    """The children of process ``pid`` (its main thread's), zombies included (none: it is gone)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as listing:
            return [int(child) for child in listing.read().split()]
    except OSError:
        return []


def kill_tree(init: int, *, keep: int) -> None:
    """SIGKILL the descendants of the sandbox's init ``init`` below its first ``keep`` generations
    (the init's runner at depth 1 is kept with ``keep=2``; the command at depth 2 and what it
    started die), until none is left (a fork bomb keeps forking)."""
    for _ in range(50):
        children = _parents()
        level, doomed = [init], []
        for depth in range(1, 64):
            level = [child for pid in level for child in children.get(pid, ())]
            if not level:
                break
            if depth >= keep:
                doomed += level
        if not doomed:
            return
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class BwrapSession:
    """A running sandbox (module docstring); use :meth:`start`, then :meth:`run`, then
    :meth:`final_state` and :meth:`close` (always)."""

    def __init__(self, process: Launched, folder: Path, limits: Limits, uids: UidPool, uid: int | None,
                 info: int) -> None:
        self._process = process
        self._info = info
        self._init_pid: int | None = None  # the sandbox's first process (its pid namespace's init), host pid
        self._runner_pid: int | None = None  # the init's first child, the runner (host pid)
        self._taken = 0  # how far the host has read the output file
        self._carried = b""  # read before the output file was emptied, not yet given with a result
        self._carried_bytes = 0  # how many bytes that was (it keeps only the output limit's first)
        self._folder = folder
        self._limits = limits
        self._uids = uids
        self._uid = uid
        self._commands = 0
        self._dead: str | None = None  # why the sandbox can run no more commands
        self._troubled = False  # a command hit the process limit or ended the runner
        self._closed = False

    @classmethod
    async def start(cls, files: Sequence[SetupFile], limits: Limits, uids: UidPool) -> BwrapSession:
        """A sandbox whose ``/work`` holds ``files``; :class:`SandboxError` if it does not start."""
        session = await cls.launch(limits, uids)
        await session.begin(files)
        return session

    @classmethod
    async def launch(cls, limits: Limits, uids: UidPool) -> BwrapSession:
        """A sandbox started without its set-up: it waits for :meth:`begin` (then ready) or
        :meth:`close`. Raises only what starting its process raises."""
        uid = uids.take()
        try:
            folder = _prepare(uid)  # a few small files in memory: a thread's hand-off would cost more
        except BaseException:
            uids.give_back(uid)
            raise
        info, info_child = os.pipe()
        seccomp = _filter_file()
        try:
            command = bwrap_command(folder, limits, PASSED_FD, process_limit(limits, uid),
                                    None if seccomp is None else PASSED_FD + 1)
            process = await Launched.start(as_uid(command, uid),
                                           pass_fds=(info_child,) if seccomp is None else (info_child, seccomp))
        except BaseException:
            os.close(info)
            shutil.rmtree(folder, ignore_errors=True)
            uids.give_back(uid)
            raise
        finally:
            os.close(info_child)
            if seccomp is not None:
                os.close(seccomp)
        return cls(process, folder, limits, uids, uid, info)

    async def begin(self, files: Sequence[SetupFile]) -> None:
        """Give a launched sandbox its set-up and wait until it is ready; :class:`SandboxError`
        (the sandbox closed) if it does not start."""
        process = self._process
        try:
            await asyncio.to_thread(_write_setup, self._folder, files)
            process.pipes()[0].write(b"go\n")
            await process.pipes()[0].drain()
            line = await asyncio.wait_for(process.pipes()[1].readline(), START_TIMEOUT_S)
        except (TimeoutError, ConnectionError, BrokenPipeError):
            line = b""
        except BaseException:  # cancelled (the run stops): no one else holds it to close it
            self._remove_now()
            raise
        if line != b"ready\n":
            await self.close()
            detail = process.error_text() or self._out_text() or line.decode(errors="replace").strip()
            raise SandboxError(detail or "no answer")
        self._init_pid = _child_pid(self._info)
        if self._init_pid is not None:
            children = _children(self._init_pid)
            self._runner_pid = children[0] if len(children) == 1 else None
        self._taken = (self._folder / "out").stat().st_size  # what the set-up's tar said: not a command's

    async def run(self, command: str, *, timeout_s: float) -> CommandResult:
        """Run ``command`` (``sh`` syntax) in ``/work``, killed after ``timeout_s`` (whole seconds)."""
        if self._dead is not None:
            return CommandResult(-1, f"the sandbox is gone: {self._dead}", 0, 0.0, "sandbox_failed")
        self._commands += 1
        n = self._commands
        path = self._folder / "cmd" / f"c{n}"
        path.write_text(command + "\n")
        os.chmod(path, 0o644)
        self._make_room()
        limit = max(1, int(timeout_s + 0.999))
        started = time.perf_counter()
        process = self._process
        try:
            process.pipes()[0].write(b"%d %d\n" % (n, limit))
            await process.pipes()[0].drain()
            answer = asyncio.ensure_future(process.pipes()[1].readline())
            done, _ = await asyncio.wait([answer], timeout=timeout_s)
            if not done and self._init_pid is not None:
                await asyncio.to_thread(kill_tree, self._init_pid, keep=2)
            line = await asyncio.wait_for(answer, GRACE_S)
        except (TimeoutError, ConnectionError, BrokenPipeError):
            line = b""
        seconds = time.perf_counter() - started
        match = _STATUS.match(line)
        if match is None or int(match[1]) != n:
            self._dead = "it stopped answering" if not line else f"it answered {line[:80]!r}"
            output, size, _ = self._take_output()
            said = process.error_text()  # the runner's own stderr: "Cannot fork" when it could not start the command
            forked_out = at_process_limit(self._uid, self._limits.processes) or classify(
                0, f"{output}\n{said}", output_bytes=size, file_limit=self._limits.file_bytes, elapsed_s=seconds,
                timeout_s=limit) == "process_limit"
            self._kill()
            self._troubled = True
            timed_out = not line and seconds >= limit
            kind = "process_limit" if forked_out else "step_timeout" if timed_out else "sandbox_failed"
            return CommandResult(-1, f"the command ended its sandbox ({self._dead})\n{output}", size, seconds, kind)
        code = int(match[2])
        output, size, file_size = self._take_output()
        wall = classify(code, output, output_bytes=file_size, file_limit=self._limits.file_bytes, elapsed_s=seconds,
                        timeout_s=limit)
        if wall is None and at_process_limit(self._uid, self._limits.processes):
            wall = "process_limit"
        self._troubled = self._troubled or wall == "process_limit"
        return CommandResult(code, output, size, seconds, wall)

    def _others_running(self) -> bool:
        """Whether a process other than the sandbox's init and runner is in it, between commands:
        one an earlier command left running, which may still write to the output file. Every such
        process is a child of the runner, or of the init once its parent is gone (a parent that
        exits hands its children to the init before it leaves the init's children, as a zombie
        until reaped), so the two lists of children show one of them as long as any is left.
        (The runner not known: taken to be none.)"""
        if self._init_pid is None or self._runner_pid is None:
            return False
        return bool(_children(self._runner_pid)) or any(pid != self._runner_pid for pid in _children(self._init_pid))

    def _make_room(self) -> None:
        """Before a command: empty the output file when no process but the sandbox's own can
        write to it, first keeping what was written since the last result (up to the output
        limit) to give with the next one. Otherwise the file is left as it is (commands append to
        it): nothing a process left running writes is lost before the host has read it."""
        path = self._folder / "out"
        size = path.stat().st_size
        if size == 0 or self._others_running():
            return
        unread = max(0, size - self._taken)
        with path.open("r+b") as handle:
            handle.seek(self._taken)
            self._carried += handle.read(min(unread, max(0, self._limits.output_bytes - len(self._carried))))
            handle.truncate(0)
        self._carried_bytes += unread
        self._taken = 0

    def _take_output(self) -> tuple[str, int, int]:
        """What was written to the output file since the last result (what was kept when it was
        emptied first), as text up to the output limit; how many bytes that is in all, and the
        file's size (the file-size limit's measure)."""
        path = self._folder / "out"
        carried, self._carried, carried_bytes, self._carried_bytes = self._carried, b"", self._carried_bytes, 0
        with path.open("rb") as handle:
            file_size = os.fstat(handle.fileno()).st_size
            if file_size < self._taken:  # a command emptied it itself
                self._taken = 0
            handle.seek(self._taken)
            data = carried + handle.read(min(file_size - self._taken, max(0, self._limits.output_bytes - len(carried))))
        size = carried_bytes + file_size - self._taken
        self._taken = file_size
        return data.replace(b"\x00", b"").decode("utf-8", errors="replace"), size, file_size

    def _read_output(self) -> tuple[str, int]:
        """The first ``output_bytes`` of the command's output, as text, and its whole size."""
        path = self._folder / "out"
        size = path.stat().st_size
        with path.open("rb") as handle:
            data = handle.read(self._limits.output_bytes)
        return data.replace(b"\x00", b"").decode("utf-8", errors="replace"), size

    def _out_text(self) -> str:
        try:
            return self._read_output()[0].strip()
        except OSError:
            return ""

    async def final_state(self) -> WorkState:
        """The working directory, as the sandbox's tar archive of it holds it; :class:`SandboxError`
        when it is unreadable or larger than the disk limit allows."""
        if self._dead is not None:
            raise SandboxError(f"the sandbox is gone: {self._dead}")
        process = self._process
        try:
            process.pipes()[0].write(b"export %d\n" % (self._limits.state_bytes // 512))
            await process.pipes()[0].drain()
            line = await asyncio.wait_for(process.pipes()[1].readline(), START_TIMEOUT_S)
        except (TimeoutError, ConnectionError, BrokenPipeError) as exc:
            raise SandboxError(f"the sandbox did not give its state ({type(exc).__name__})") from None
        finally:
            self._dead = "its state was taken"
        if line != b"export 0\n":
            raise SandboxError(export_failure(line, self._out_text(), self._limits.state_bytes))
        data = (self._folder / "out").read_bytes()
        if len(data) <= INLINE_STATE_BYTES:
            return state_from_tar(data)
        return await asyncio.to_thread(state_from_tar, data)

    def _kill(self) -> None:
        """Kill the sandbox's init: the kernel kills every process of its pid namespace and the
        init reaps them on its way out, then bwrap (still our child) reaps the init and exits.
        Killing bwrap itself instead would leave the init to the host's init to reap."""
        if self._process.returncode is not None:
            return
        if self._init_pid is None:  # launched, never begun: bwrap has said its child's pid by now, or never will
            self._init_pid = _child_pid(self._info)
        try:
            if self._init_pid is not None:
                os.kill(self._init_pid, signal.SIGKILL)
            else:
                self._process.kill()
        except ProcessLookupError:
            pass

    def _remove_now(self) -> None:
        """Kill the sandbox and remove its host-side files without waiting (what :meth:`close`
        does first; its process is reaped, and its uid retired, by no one: for a sandbox being
        abandoned on cancellation)."""
        self._dead = self._dead or "closed"
        self._kill()
        shutil.rmtree(self._folder, ignore_errors=True)

    async def close(self) -> None:
        """Kill the sandbox (everything in it dies with it) and remove its host-side files. Once
        bwrap has reaped the killed init the pid namespace is empty: its uid is free again at once.
        Otherwise (the init ended by itself or outlived the wait, or a command hit the process
        limit) the uid is given back only once no live process of it is left. A second close
        does nothing."""
        if self._closed:
            return
        self._closed = True
        ended_alone = self._process.returncode is not None
        self._remove_now()  # first: a close cut short by cancellation leaves no files
        if self._process.returncode is None:
            try:
                await asyncio.wait_for(self._process.wait(), END_WAIT_S)
            except TimeoutError:
                self._process.kill()
                await self._process.wait()
                ended_alone = True
        os.close(self._info)
        uid, self._uid = self._uid, None
        if uid is not None and (ended_alone or self._troubled) and \
                await asyncio.to_thread(processes_end, uid, within_s=END_WAIT_S) > 0:
            return  # a process runs as it that is not the sandbox's: its uid is not used again
        self._uids.give_back(uid)
