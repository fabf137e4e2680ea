"""Small plug-in projects made by the tests and installed as a user installs one (``pip install
--target``), each holding one package that offers one learner by entry point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PROJECT = """[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "0.1.0"

[project.entry-points."combee_fast.learners"]
{learner} = "{package}:{attribute}"

[tool.setuptools]
packages = ["{package}"]
"""


def learner_project(folder: Path, name: str, *, learner: str, attribute: str, module: str) -> Path:
    """Project ``name`` in ``folder/name``: package ``name`` with ``-`` as ``_``, whose
    ``__init__.py`` is ``module``, offering learner ``learner`` as its ``attribute``."""
    package = name.replace("-", "_")
    project = folder / name
    (project / package).mkdir(parents=True)
    (project / "pyproject.toml").write_text(PROJECT.format(name=name, learner=learner, package=package,
                                                           attribute=attribute))
    (project / package / "__init__.py").write_text(module)
    return project


def pip_install(project: Path, site: Path) -> Path:
    """Install ``project`` (no dependencies) into the folder ``site``; ``site``."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
                           str(project)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return site
