"""Every page of the docs runs as written, in reading order, against a ``combee sim-server``.

The pages are the README and ``docs/*.md`` (``tests/docs_pages.py``: the nav's order, then any
other page alphabetically). Each page runs in a fresh folder of its own, which holds a copy of
the repository's ``cards/`` as a clone does, its blocks one after another, so a command may use
what an earlier one on the same page made:

- a command block (``bash``, ``sh``, ``console``) is a bash script that must exit 0;
- a ``python`` block is a script run in a fresh interpreter that must exit 0 and print something;
- a block whose first line names a file (``# my_learner.py``, ``# run.toml``) is written into the
  folder as that file, for the blocks after it (an agent module, a learner, a configuration).

Blocks name the quickstart's server, ``http://127.0.0.1:8000/v1``; this test starts one on a free
port (``--peers``, for the GEPA interop block; ``--learner NAME:KIND`` for every learner module
of the docs, which it imports from a folder of those modules) and gives its address instead.
``combee`` and ``python`` are this interpreter with this source tree on the import path.

A block that cannot run here (it installs packages, starts a long-lived server this test already
provides, needs hardware or a cluster, or runs for minutes) has ``<!-- not run: REASON -->`` on
the line directly above it. It is never run, and each one is reported as a skipped test with its
reason (``pytest -ra`` lists them), so the list stays in view.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs_pages import README, ROOT, SERVER_URL, SHELL, Block, all_blocks, blocks, name, nav_pages, pages

BLOCK_TIMEOUT_S = 600
"""The longest one block may run."""


def _runs(block: Block) -> bool:
    """Whether the docs test runs ``block`` as a script (not a file's content, not marked)."""
    return block.not_run is None and block.file is None and (block.lang in SHELL or block.lang == "python")


def _learner_modules() -> list[Block]:
    """The docs' Python modules that define a learner kind (``KIND = ...``): the server serves them."""
    return [b for b in all_blocks() if b.lang == "python" and b.file and "\nKIND = " in b.code]


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of ``combee``, ``python`` and ``python3`` commands: this interpreter, and the
    package's CLI run by it."""
    folder = tmp_path_factory.mktemp("docs-bin")
    for tool, command in (("combee", f"{shlex.quote(sys.executable)} -m combee_fast.cli"),
                          ("python", shlex.quote(sys.executable)), ("python3", shlex.quote(sys.executable))):
        (folder / tool).write_text(f'#!/bin/sh\nexec {command} "$@"\n')
        (folder / tool).chmod(0o755)
    return folder


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A ``combee sim-server`` on a free loopback port, serving the docs' learners as well."""
    folder = tmp_path_factory.mktemp("docs-learners")
    learners = []
    for module in _learner_modules():
        (folder / module.file).write_text(module.code)
        learners += ["--learner", f"{Path(module.file).stem}:KIND"]
    server = subprocess.Popen(
        [sys.executable, "-m", "combee_fast.cli", "sim-server", "--port", "0", "--peers", "--time-scale", "0.0005",
         *learners], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_environment(folder))
    assert server.stdout is not None and server.stderr is not None
    try:
        first = server.stdout.readline().split()
        assert first[:2] == ["listening", "on"], (first, server.stderr.read() if server.poll() is not None else "")
        yield first[2]
    finally:
        server.terminate()
        server.wait(timeout=30)


def _environment(*path: Path) -> dict[str, str]:
    """This process's environment with ``path`` and this source tree first on the import path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [*map(str, path), str(ROOT),
                                                                       os.environ.get("PYTHONPATH")]))}


def test_the_docs_have_the_blocks_they_promise() -> None:
    walked = [name(page) for page in pages()]
    assert walked[:2] == ["README.md", "docs/index.md"] and "docs/agents.md" in walked
    scripts = [b for b in all_blocks() if _runs(b)]
    assert sum(b.lang == "python" for b in scripts) >= 6 and sum(b.lang in SHELL for b in scripts) >= 10
    sessions = [b for b in scripts if b.lang == "python" and "open_session" in b.code]
    served = [b for b in sessions if "EndpointSpec" in b.code]  # the others: the in-process simulated endpoint
    assert served and all(SERVER_URL in b.code for b in served)  # each session given an endpoint talks to the server


README_MAX_LINES = 250
"""The README stays a front page: what it is, the two set-up commands and the pages."""


def test_the_readme_is_a_front_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", text))
    assert {page.name for page in nav_pages()} - {"index.md"} <= linked, "a page of the nav the README does not link"


def test_every_block_says_its_language_and_every_command_is_in_a_block() -> None:
    for page in pages():
        assert all(b.lang for b in blocks(page)), f"{name(page)}: a block without a language is never run"
        outside = re.sub(r"^( *)```.*?^\1```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE)
        loose = re.findall(r"^ {4,}(?:combee|python|pip) .*$", outside, re.MULTILINE)
        assert not loose, f"{name(page)}: commands outside a fenced block are never run: {loose}"


def test_a_not_run_mark_stands_directly_above_a_block() -> None:
    for page in pages():
        marks = re.findall(r"<!--.*?-->", page.read_text(encoding="utf-8"), re.DOTALL)
        said = [b for b in blocks(page) if b.not_run is not None]
        marked = [m for m in marks if "not run" in m]
        assert len(marked) == len(said), f"{name(page)}: a not-run mark that is not on the line above a block"


def test_ci_installs_what_readme_command_2_installs() -> None:
    """README command 2 and ``.ci/run`` install the same extras, and the docs' home page gives the
    README's two commands as the README does."""
    install = re.compile(r"pip install (?:--quiet )?-e '\.\[([\w,-]+)\]'")
    command_2 = next(b for b in blocks(README) if "python -m pytest -q" in b.code)
    assert install.findall(command_2.code) == install.findall((ROOT / ".ci" / "run").read_text())
    readme_commands = [b.code for b in blocks(README) if b.lang in SHELL]
    index_commands = [b.code for b in blocks(ROOT / "docs" / "index.md") if b.lang in SHELL]
    assert len(readme_commands) == 2 and index_commands[:2] == readme_commands


@pytest.mark.parametrize("block", [b for b in all_blocks() if b.not_run is not None], ids=lambda b: b.where)
def test_a_block_marked_not_run_says_why(block: Block) -> None:
    assert block.not_run is not None and len(block.not_run.split()) >= 4, f"{block.where}: say why it is not run"
    pytest.skip(f"{block.where} not run: {block.not_run}")


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("page", pages(), ids=name)
def test_a_page_runs_as_written(page: Path, server_url: str, tools: Path, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "cards", tmp_path / "cards")
    environment = {**_environment(), "PATH": os.pathsep.join([str(tools), os.environ["PATH"]])}
    for block in blocks(page):
        if block.not_run is not None:
            continue
        code = (block.script() if block.lang in SHELL else block.code).replace(SERVER_URL, server_url)
        if block.file is not None:
            (tmp_path / block.file).write_text(code)
            continue
        if block.lang == "python":
            command = [sys.executable, "-c", code]
        elif block.lang in SHELL:
            command = ["bash", "-e", "-o", "pipefail", "-c", code]
        else:
            continue  # text, a table of figures, a TOML snippet: nothing to run
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S, cwd=tmp_path,
                              env=environment)
        said = f"{block.where} ({time.monotonic() - started:.1f} s):\n{code}\nstderr:\n{done.stderr[-3000:]}"
        assert done.returncode == 0, said
        assert block.lang != "python" or done.stdout.strip(), f"{said}\nprinted nothing"
