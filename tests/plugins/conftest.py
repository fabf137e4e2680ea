"""The plugin package installed as a user installs it: ``pip install`` of ``tests/plugins`` (and of a
broken plugin made here) into a folder of their own, which a ``combee`` process gets on its path."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.plugins.projects import learner_project, pip_install

PLUGINS = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def plugin_sites(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two folders, one where ``combee-notes`` (entry points ``notes``, ``queue``, ``glossary``)
    is installed, one where ``combee-broken`` (entry point ``broken``, whose module raises) is."""
    root = tmp_path_factory.mktemp("plugins")
    notes = root / "combee-notes"
    notes.mkdir()
    shutil.copy(PLUGINS / "pyproject.toml", notes)
    shutil.copytree(PLUGINS / "combee_notes", notes / "combee_notes", ignore=shutil.ignore_patterns("__pycache__"))
    broken = learner_project(root, "combee-broken", learner="broken", attribute="KIND",
                             module='raise RuntimeError("this plugin is broken")\n')
    return pip_install(notes, root / "notes-site"), pip_install(broken, root / "broken-site")


@pytest.fixture
def plugin_env(plugin_sites: tuple[Path, Path]) -> dict[str, str]:
    """The environment of a process that has ``combee-notes`` installed."""
    return {**os.environ, "PYTHONPATH": str(plugin_sites[0])}


@pytest.fixture
def broken_env(plugin_sites: tuple[Path, Path]) -> dict[str, str]:
    """The environment of a process that has ``combee-notes`` and ``combee-broken`` installed."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(str(site) for site in plugin_sites)}
