"""A ``combee sim-server`` process on a free loopback port, as a user starts one."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def sim_server_process(*options: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """``combee sim-server --port 0 OPTIONS...`` running inside the block; its base URL. The
    process is stopped (SIGTERM) when the block ends."""
    process = subprocess.Popen([sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0", *options],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = process.stdout.readline().split()  # type: ignore[union-attr]
        assert first[:2] == ["listening", "on"], first
        yield first[2]
    finally:
        process.terminate()
        process.wait(timeout=30)
