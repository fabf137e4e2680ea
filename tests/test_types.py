"""The package's types are checked: ``python -m mypy`` (settings in pyproject.toml) finds no error.

This is how the suite, and so README command 2 and ``.ci/run``, run the type checker: a contract a
seam's protocol declares and an implementation breaks fails here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(900)


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=ROOT, capture_output=True, text=True, timeout=850)


def test_the_package_has_no_type_error() -> None:
    done = _mypy()
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_type_error_is_found(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("from combee_fast.roles.spec import Role\n\nROLE = Role('x', 'serve', max_tokens='many')\n")
    done = _mypy("--config-file", str(ROOT / "pyproject.toml"), str(broken))
    assert done.returncode == 1 and "max_tokens" in done.stdout, done.stdout
