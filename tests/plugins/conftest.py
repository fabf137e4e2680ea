"""The plugin package installed as a user installs it: ``pip install`` of ``tests/plugins`` (and of a
broken plugin made here) into a folder of their own, which a ``combee`` process gets on its path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PLUGINS = Path(__file__).resolve().parent
BROKEN_PROJECT = """[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "combee-broken"
version = "0.1.0"

[project.entry-points."combee_fast.learners"]
broken = "combee_broken:KIND"

[tool.setuptools]
packages = ["combee_broken"]
"""


@pytest.fixture(scope="session")
def plugin_sites(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two folders, one where ``combee-notes`` (entry points ``notes``, ``queue``, ``glossary``)
    is installed, one where ``combee-broken`` (entry point ``broken``, whose module raises) is."""
    root = tmp_path_factory.mktemp("plugins")
    notes = root / "combee-notes"
    notes.mkdir()
    shutil.copy(PLUGINS / "pyproject.toml", notes)
    shutil.copytree(PLUGINS / "combee_notes", notes / "combee_notes", ignore=shutil.ignore_patterns("__pycache__"))
    broken = root / "combee-broken"
    (broken / "combee_broken").mkdir(parents=True)
    (broken / "pyproject.toml").write_text(BROKEN_PROJECT)
    (broken / "combee_broken" / "__init__.py").write_text('raise RuntimeError("this plugin is broken")\n')
    sites = root / "notes-site", root / "broken-site"
    for project, site in zip((notes, broken), sites):
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
                               str(project)], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    return sites


@pytest.fixture
def plugin_env(plugin_sites: tuple[Path, Path]) -> dict[str, str]:
    """The environment of a process that has ``combee-notes`` installed."""
    return {**os.environ, "PYTHONPATH": str(plugin_sites[0])}


@pytest.fixture
def broken_env(plugin_sites: tuple[Path, Path]) -> dict[str, str]:
    """The environment of a process that has ``combee-notes`` and ``combee-broken`` installed."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(str(site) for site in plugin_sites)}
