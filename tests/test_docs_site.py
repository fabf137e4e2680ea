"""The docs site builds with ``mkdocs build --strict`` (the ``docs`` extra), as CI builds it: a
broken link or anchor, a page missing from the nav or any other warning fails the build."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[docs]'; .ci/run installs it)")


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], capture_output=True, text=True, timeout=300)


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    done = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0 and "WARNING" not in done.stderr, done.stderr
    built = {page.relative_to(tmp_path / "site").as_posix() for page in (tmp_path / "site").rglob("index.html")}
    assert {f"{page.stem}/index.html" for page in (ROOT / "docs").glob("*.md") if page.stem != "index"} <= built


def test_a_broken_anchor_fails_the_strict_build(tmp_path: Path) -> None:
    """The site's validation settings make a link to a missing heading a warning, so a heading
    renamed under a link fails CI."""
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    quickstart = tmp_path / "docs" / "quickstart.md"
    quickstart.write_text(quickstart.read_text() + "\n[gone](your-data.md#no-such-heading)\n")
    done = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "no-such-heading" in done.stderr
