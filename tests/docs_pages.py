"""The docs as the tests read them: the pages in reading order and the fenced blocks of each.

Reading order is the README, then ``docs/`` in the order of ``mkdocs.yml``'s nav, then any page of
``docs/`` the nav does not list, alphabetically (so a new page is walked before it is listed).

A block is a fenced code block (at any indentation: the README's sit in list items). Its first
line may name a file (``# my_learner.py``, ``# run.toml``): the block is that file's content. A
block with ``<!-- not run: REASON -->`` on the line directly above it is one the docs test does
not run, for that reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
NAV = ROOT / "mkdocs.yml"

SERVER_URL = "http://127.0.0.1:8000/v1"
"""The address of the quickstart's ``combee sim-server --port 8000``: every block that talks to a
server names it, and the docs test gives it its own server's instead."""

SHELL = ("bash", "sh", "console")
"""The languages of command blocks: run as shell scripts (``console``: its ``$ `` lines)."""

_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                    re.DOTALL | re.MULTILINE)
_NOT_RUN = re.compile(r"^ *<!-- not run: (?P<reason>\S.*?) -->\n\Z")
_NAMED = re.compile(r"^# (?P<name>[\w-]+\.\w+)\n")
_NAV_PAGE = re.compile(r"^\s*-\s+(?:[^:\n]+:\s+)?(?P<page>[\w/.-]+\.md)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: where it is, its language and text, and why it is not run
    (None: it runs)."""

    page: str
    line: int
    lang: str
    code: str
    not_run: str | None

    @property
    def file(self) -> str | None:
        """The file the block is the content of (its first line ``# NAME.EXT``), else None."""
        named = _NAMED.match(self.code)
        return named["name"] if named else None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def script(self) -> str:
        """The shell script a command block stands for: a ``console`` block's ``$ `` lines (with
        the lines continuing them), any other shell block as it is."""
        if self.lang != "console":
            return self.code
        lines, going_on = [], False
        for line in self.code.splitlines():
            if line.startswith("$ ") or going_on:
                lines.append(line.removeprefix("$ "))
                going_on = line.endswith("\\")
        return "\n".join(lines) + "\n"


def nav_pages() -> list[Path]:
    """The pages of ``docs/`` that ``mkdocs.yml``'s nav lists, in its order."""
    return [DOCS / name for name in _NAV_PAGE.findall(NAV.read_text(encoding="utf-8"))]


def pages() -> list[Path]:
    """Every page in reading order (module docstring)."""
    listed = nav_pages()
    rest = sorted(set(DOCS.glob("*.md")) - set(listed))
    return [README, *listed, *rest]


def name(page: Path) -> str:
    """A page's path from the repository's root, as the tests name it."""
    return page.relative_to(ROOT).as_posix()


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of ``page``, in order."""
    text = page.read_text(encoding="utf-8")
    found = []
    for fence in _FENCE.finditer(text):
        indent = len(fence["indent"])
        code = "".join(line[indent:] for line in fence["body"].splitlines(keepends=True))
        before = text[:fence.start()]
        above = before[:-1].rsplit("\n", 1)[-1] + "\n" if before else ""
        not_run = _NOT_RUN.match(above)
        found.append(Block(name(page), text.count("\n", 0, fence.start()) + 1, fence["lang"], code,
                           not_run["reason"] if not_run else None))
    return found


def all_blocks() -> list[Block]:
    """Every page's blocks, pages in reading order."""
    return [block for page in pages() for block in blocks(page)]


def block_of(page: str, contains: str, lang: str | None = None) -> Block:
    """The one block of ``page`` (``docs/agents.md``) whose text contains ``contains``."""
    found = [b for b in blocks(ROOT / page) if contains in b.code and (lang is None or b.lang == lang)]
    assert len(found) == 1, f"{page}: {len(found)} blocks contain {contains!r}"
    return found[0]
