"""A small copy of the Formula card for tests: sliced splits (pinned by their own hashes), so a
verify or diagnose run takes seconds."""

from __future__ import annotations

import re
from pathlib import Path

from combee_fast.tasks.registry import get_task

CARD = Path(__file__).parents[2] / "cards" / "formula.toml"


def small_card(folder: Path, *, train: str = "train[0:30]", selection: str = "selection[0:20]",
               test: str = "test[0:40]", replace: dict[str, str] | None = None) -> Path:
    """Write a copy of the Formula card into ``folder`` whose splits are the given slices."""
    task = get_task("formula")
    text = CARD.read_text()
    for role, spec in (("train", train), ("selection", selection), ("test", test)):
        manifest = task.load(spec).manifest
        text = re.sub(
            rf'name = "{role}"\nrole = "{role}"\nrows = \d+\nsha256 = "[0-9a-f]+"',
            f'name = "{spec}"\nrole = "{role}"\nrows = {manifest.rows}\nsha256 = "{manifest.sha256}"', text)
    for old, new in (replace or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "card.toml"
    path.write_text(text)
    return path


def run_config(folder: Path, name: str, method: str, batch: int, *, extra: str = "") -> Path:
    """A run-config TOML file: ``method`` at ``batch`` on the ``flat`` preset, tiny time scale."""
    path = folder / f"{name}.toml"
    path.write_text(f'method = "{method}"\n[train]\nbatch_size = {batch}\n[sim]\ntime_scale = 0.0001\n{extra}\n')
    return path
