"""Every Python block of the README runs, as written, against a ``combee sim-server`` on loopback.

The blocks name the server of the README's own command (``http://127.0.0.1:8000/v1``); each runs
in a fresh interpreter in a folder of its own with that address replaced by the server this test
started (on a free port, with ``--peers`` for the GEPA interop block), so a snippet that stops
working fails here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
README_URL = "http://127.0.0.1:8000/v1"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


_MODULES_SECTION = re.compile(r"^## Agents\n.*?(?=^## )", re.DOTALL | re.MULTILINE)
"""The section whose Python block is a module, not a script (an example agent, which
``tests/rollouts/test_readme_agent.py`` runs as the agent of a ``combee learn``)."""


_MODULE = re.compile(r"^# (\w+)\.py\n")
"""A block whose first line names a file (``# my_learner.py``) is that module: written into a folder
on the path of the server and of every block; a learner it defines (``KIND``) is served by the
server (``--learner my_learner:KIND``)."""


def _blocks() -> list[str]:
    return _BLOCK.findall(_MODULES_SECTION.sub("", README.read_text(encoding="utf-8")))


def python_blocks() -> list[str]:
    return [block for block in _blocks() if not _MODULE.match(block)]


@pytest.fixture(scope="module")
def modules(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The folder of the README's module blocks, and their names."""
    folder = tmp_path_factory.mktemp("readme-modules")
    names = []
    for block in _blocks():
        if (named := _MODULE.match(block)) is not None:
            (folder / f"{named[1]}.py").write_text(block)
            names.append(named[1])
    return folder, names


@pytest.fixture(scope="module")
def server_url(modules: tuple[Path, list[str]]):
    folder, names = modules
    learners = [part for name in names if "KIND = " in (folder / f"{name}.py").read_text()
                for part in ("--learner", f"{name}:KIND")]
    server = subprocess.Popen(
        [sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0", "--peers", "--time-scale", "0.0005",
         *learners], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_with_path(folder))
    try:
        first = server.stdout.readline().split()
        assert first[:2] == ["listening", "on"], (first, server.stderr.read() if server.poll() is not None else "")
        yield first[2]
    finally:
        server.terminate()
        server.wait(timeout=30)


def _with_path(folder: Path) -> dict[str, str]:
    """This process's environment with ``folder`` first on the import path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))}


def test_the_readme_has_the_python_blocks_it_promises() -> None:
    blocks = python_blocks()
    assert len(blocks) >= 3 and all(README_URL in block for block in blocks)


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_a_readme_python_block_runs_as_written(index: int, server_url: str, modules: tuple[Path, list[str]],
                                               tmp_path: Path) -> None:
    code = python_blocks()[index].replace(README_URL, server_url)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env=_with_path(modules[0]))
    assert done.returncode == 0, f"README block {index + 1}:\n{code}\nstderr:\n{done.stderr[-3000:]}"
    assert done.stdout.strip(), f"README block {index + 1} printed nothing"
