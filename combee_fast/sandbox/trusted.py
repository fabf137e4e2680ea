"""The sandbox contract without isolation (``sandbox.mode = "none"``): trusted commands only.

Commands run as ``sh`` processes of the engine's own user in a fresh scratch folder (the working
directory), with the resource limits of :mod:`.limits` (no uid change), an environment holding
only ``PATH``, ``HOME`` and ``LANG``, and the step's wall-clock limit (the whole process group is
killed). Nothing else is contained: a command can read and write anything the user can, reach the
network, and leave processes that escape its group. Use it for your own commands, never for
commands a model chose.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from collections.abc import Sequence
from pathlib import Path

from combee_fast.sandbox.classify import KILLED, CommandResult, classify
from combee_fast.sandbox.launch import Launched
from combee_fast.sandbox.limits import Limits, process_limit, shell_limits
from combee_fast.sandbox.scratch import TRUSTED_KIND, new_folder
from combee_fast.sandbox.state import SetupFile, WorkState, safe_relative, state_of_folder


class TrustedSession:
    """A scratch folder and the commands run in it (module docstring)."""

    def __init__(self, root: Path, limits: Limits) -> None:
        self._root = root
        self._work = root / "work"
        self._out = root / "out"
        self._limits = limits

    @classmethod
    async def start(cls, files: Sequence[SetupFile], limits: Limits) -> TrustedSession:
        root = new_folder(TRUSTED_KIND, None)
        session = cls(root, limits)
        await asyncio.to_thread(session._write_setup, files)
        return session

    def _write_setup(self, files: Sequence[SetupFile]) -> None:
        now = time.time()
        self._work.mkdir()
        for file in files:
            path = self._work / safe_relative(file.path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(file.data)
            os.chmod(path, file.permissions)
            os.utime(path, (now - file.age_s, now - file.age_s))

    async def run(self, command: str, *, timeout_s: float) -> CommandResult:
        """Run ``command`` with ``sh`` in the working directory; its group is killed after ``timeout_s``."""
        started = time.perf_counter()
        limits = shell_limits(self._limits, process_limit(self._limits, None))
        script = limits + '\ncd "$1" || exit 97; exec /bin/sh -c "$2"'
        argv = ["/bin/sh", "-c", script, "sh", str(self._work), command]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self._work), "LANG": "C.UTF-8"}
        with self._out.open("wb") as out:
            process = await Launched.start(argv, pipes=False, stdout_file=out.fileno(), env=env)
            try:
                code = await asyncio.wait_for(process.wait(), timeout_s)
            except TimeoutError:
                os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
                code = KILLED
        seconds = time.perf_counter() - started
        size = self._out.stat().st_size
        with self._out.open("rb") as handle:
            output = handle.read(self._limits.output_bytes).decode("utf-8", errors="replace")
        kind = classify(code, output, output_bytes=size, file_limit=self._limits.file_bytes, elapsed_s=seconds,
                        timeout_s=timeout_s)
        return CommandResult(code, output, size, seconds, kind)

    async def final_state(self) -> WorkState:
        return await asyncio.to_thread(state_of_folder, self._work, max_bytes=self._limits.disk_bytes)

    async def close(self) -> None:
        await asyncio.to_thread(shutil.rmtree, self._root, True)
