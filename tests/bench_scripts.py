"""Loading a ``bench/`` script in a test process: from its file, never by putting ``bench/`` on the
import path (its scripts are named like packages the suite imports, ``gepa.py`` and
``textgrad.py``, and would shadow them for every later test)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH_DIR = Path(__file__).resolve().parents[1] / "bench"
"""The project's ``bench/`` folder."""


def load_bench(name: str) -> ModuleType:
    """``bench/<name>.py`` loaded as the module ``bench_<name>``, registered in ``sys.modules``
    (a dataclass of the script looks its module up there)."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None, f"no bench/{name}.py"
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
