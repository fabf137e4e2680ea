"""Every Python block of the README runs, as written, against a ``combee sim-server`` on loopback.

The blocks name the server of the README's own command (``http://127.0.0.1:8000/v1``); each runs
in a fresh interpreter in a folder of its own with that address replaced by the server this test
started (on a free port, with ``--peers`` for the GEPA interop block), so a snippet that stops
working fails here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
README_URL = "http://127.0.0.1:8000/v1"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def python_blocks() -> list[str]:
    return _BLOCK.findall(README.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def server_url():
    server = subprocess.Popen(
        [sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0", "--peers", "--time-scale", "0.0005"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = server.stdout.readline().split()
        assert first[:2] == ["listening", "on"], (first, server.stderr.read() if server.poll() is not None else "")
        yield first[2]
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_readme_has_the_python_blocks_it_promises() -> None:
    blocks = python_blocks()
    assert len(blocks) >= 3 and all(README_URL in block for block in blocks)


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_a_readme_python_block_runs_as_written(index: int, server_url: str, tmp_path: Path) -> None:
    code = python_blocks()[index].replace(README_URL, server_url)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, f"README block {index + 1}:\n{code}\nstderr:\n{done.stderr[-3000:]}"
    assert done.stdout.strip(), f"README block {index + 1} printed nothing"
