"""Where a run came from: what made it, on which machine, when, from which data.

:func:`provenance` gathers the package version, the git commit of the package's source tree
when it is a checkout (with ``dirty`` when it has uncommitted changes), the host, the command
line (secrets scrubbed, as every file gets them), the Python version, the start time, the seed
and the manifest of every split the run used; :meth:`Provenance.ended` stamps the end. Every run
directory keeps it (``provenance.json``, and in ``report.md``).
"""

from __future__ import annotations

import platform
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

import msgspec

from combee_fast.redact import scrub
from combee_fast.tasks.base import SplitManifest

PACKAGE = "combee_fast"
GIT_TIMEOUT_S = 5.0
"""Longest a ``git`` query of the source tree may take (a slow file system never holds a run)."""


class Provenance(msgspec.Struct, frozen=True, kw_only=True):
    """What made a run (see the module docstring); times are UTC, ISO 8601 to the second."""

    package: str = PACKAGE
    version: str
    commit: str | None  # None: the package is not run from a git checkout
    host: str
    command: str
    python: str
    started: str
    ended: str | None = None
    seed: int | None = None
    splits: tuple[SplitManifest, ...] = ()

    def ended_now(self) -> Provenance:
        """This provenance with the end time set to now."""
        return msgspec.structs.replace(self, ended=utc_now())


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def package_version() -> str:
    """The installed version of the package ("unknown" when it is not installed)."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "unknown"


def git_commit(folder: Path | None = None) -> str | None:
    """The commit checked out in the git tree holding ``folder`` (default: the package's source),
    with ``-dirty`` when tracked files changed; None when it is not a checkout or git is absent."""
    where = folder or Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=GIT_TIMEOUT_S)
        if head.returncode != 0:
            return None
        status = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    dirty = status.returncode == 0 and bool(status.stdout.strip())
    return head.stdout.strip() + ("-dirty" if dirty else "")


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command that runs this process, shell-quoted, secrets scrubbed (``combee`` for the
    console script's path)."""
    args = list(sys.argv if argv is None else argv)
    if args and Path(args[0]).name in ("combee", "cli.py", "__main__.py"):
        args[0] = "combee"
    return scrub(shlex.join(args))


def provenance(*, seed: int | None = None, splits: Sequence[SplitManifest] = (),
               argv: Sequence[str] | None = None) -> Provenance:
    """The provenance of a run starting now (module docstring)."""
    return Provenance(version=package_version(), commit=git_commit(), host=socket.gethostname(),
                      command=command_line(argv), python=platform.python_version(), started=utc_now(),
                      seed=seed, splits=tuple(splits))
