"""Issue 35: the library path writes the run folder ``combee learn`` writes (``train(out=...)``).

A ``combee learn`` process runs first; its own ``config.json`` is loaded and trained through
``open_session(...).train(out=...)``: the two folders hold the same files, the same learned
artifact and summary, and ``combee show`` and ``combee compare`` read the library's folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from combee_fast import ConfigError, load_config, open_session

SRC = Path(__file__).resolve().parents[2]


def _combee(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "combee_fast.cli", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(SRC)}, cwd=SRC)


def _files(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()}


async def test_train_out_writes_the_run_folder_of_combee_learn(tmp_path: Path) -> None:
    cli = tmp_path / "cli"
    done = _combee("learn", "--task", "formula", "--train-split", "train[0:40]", "--val-split", "selection[0:20]",
                   "--batch-size", "20", "--time-scale", "0.0001", "--out", str(cli), "--quiet")
    assert done.returncode == 0, done.stderr
    library = tmp_path / "library"
    async with open_session(load_config(cli / "config.json")) as session:
        result = await session.train(out=library)
    assert _files(library) == _files(cli) and "summary.json" in _files(library) and "report.md" in _files(library)
    assert (library / "final.json").read_bytes() == (cli / "final.json").read_bytes()
    mine, theirs = (json.loads((root / "summary.json").read_text()) for root in (library, cli))
    assert mine.keys() == theirs.keys() and mine["run_dir"] == str(library)
    assert result.final_eval is not None
    assert mine["final_val_accuracy"] == theirs["final_val_accuracy"] == result.final_eval.accuracy
    shown = _combee("show", str(library))
    assert shown.returncode == 0 and shown.stdout == (library / "prompt.txt").read_text()
    compared = _combee("compare", str(cli), str(library))
    assert compared.returncode == 0 and str(library) in compared.stdout, compared.stderr


async def test_train_out_refuses_a_folder_holding_a_run_and_a_run_dir_beside_it(tmp_path: Path) -> None:
    config = load_config(_write_config(tmp_path))
    async with open_session(config) as session:
        await session.train(out=tmp_path / "run")
        with pytest.raises(ConfigError, match="already holds a run"):
            await session.train(out=tmp_path / "run")
        again = await session.train(out=tmp_path / "run", overwrite=True)
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["samples"] == again.samples


def _write_config(folder: Path) -> Path:
    path = folder / "run.toml"
    path.write_text('task = { name = "formula", train_split = "train[0:20]", val_split = "selection[0:10]" }\n'
                    'train = { batch_size = 10 }\nsim = { time_scale = 0.0001 }\n')
    return path
