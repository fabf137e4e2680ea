"""The notes learner, written outside combee_fast (``tests/plugins/combee_notes``), through the CLI
in real processes on the simulated endpoint: its serial, naive and Combee methods, a run killed
with SIGKILL and resumed to the same ``final.json``, and ``combee verify`` of it against its serial
baseline. It is named by path from its own folder (``combee`` run there imports it, as
``python -m`` would) or, installed with pip, by its entry point ``notes``."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.plugins.combee_notes.notes import Notes
from tests.verify.small_card import small_card

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

PLUGINS = Path(__file__).resolve().parent
COMBEE = Path(sys.executable).with_name("combee")  # the console script: the working directory is not on its path
NOTES = "combee_notes.kind:NOTES"  # by path, from PLUGINS


def _learn(*args: str) -> list[str]:
    return [str(COMBEE), "learn", "--task", "formula", *args]


def _run(command: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=PLUGINS, env=env, capture_output=True, text=True, timeout=600)


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_the_notes_learner_learns_with_its_serial_naive_and_combee_methods(tmp_path: Path) -> None:
    summaries = {}
    for method in ("sequential", "naive", "combee"):
        out = tmp_path / method
        done = _run(_learn("--learner", NOTES, "--method", method, "--train-split", "train[0:120]", "--val-split",
                           "val[0:60]", "--batch-size", "40", "--quiet", "--out", str(out)))
        assert done.returncode == 0, done.stderr
        summaries[method] = summary = json.loads(done.stdout.splitlines()[0])
        rows = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
        assert {row["method"] for row in rows} == {summary["method"]}
        assert summary["calls"] and summary["accounting"]["train"]["errors"] == {}
        final = Notes.load(out / "final.json")
        assert final is not None and len(final) == summary["notes"]
        assert (out / "versions" / f"v{final.version:05d}.json").is_file() and (out / "report.md").is_file()
    assert [summaries[m]["method"] for m in summaries] == ["notes", "naive-notes", "combee-notes"]
    serial, naive, combee = (summaries[m] for m in ("sequential", "naive", "combee"))
    assert naive["notes"] < combee["notes"]  # one editor over 40 notes keeps few; Combee's parallel editors keep more
    assert combee["train_sim_seconds"] < serial["train_sim_seconds"] / 3
    assert combee["final_val_accuracy"] >= serial["final_val_accuracy"] - 0.05


@pytest.mark.parametrize("named", ["path", "entry point"])
def test_a_killed_notes_run_resumes_to_the_same_final_json(named: str, tmp_path: Path, plugin_env) -> None:
    env = plugin_env if named == "entry point" else None
    learner = "notes" if named == "entry point" else NOTES
    run = ("--learner", learner, "--method", "combee", "--train-split", "train[0:80]", "--val-split", "val[0:20]",
           "--batch-size", "10", "--quiet")
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    done = _run(_learn(*run, "--out", str(whole)), env)
    assert done.returncode == 0, done.stderr
    process = subprocess.Popen(_learn(*run, "--time-scale", "0.01", "--out", str(killed)), cwd=PLUGINS, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    # a step's ledger line is written before its checkpoint: three lines mean two steps checkpointed
    while _lines(killed / "ledger.jsonl") < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    steps = _lines(killed / "ledger.jsonl")
    assert 3 <= steps < 8
    resumed = _run([str(COMBEE), "learn", "--resume", str(killed), "--quiet"], env)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout.splitlines()[0])["resumed_from_step"] >= steps - 1
    assert json.loads((killed / "config.json").read_text())["learner"] == learner
    assert (killed / "final.json").read_bytes() == (whole / "final.json").read_bytes()


def test_verify_compares_combee_notes_with_serial_notes_in_every_cell(tmp_path: Path) -> None:
    card = small_card(tmp_path / "cards", train="train[0:60]", replace={"speedup = 10.0": "speedup = 2.0",
                                                                         "margin = 0.02": "margin = 0.1"})
    config = tmp_path / "notes.toml"
    config.write_text(f'learner = "{NOTES}"\nmethod = "combee"\n[train]\nbatch_size = 20\n[sim]\ntime_scale = 0.0001\n')
    done = _run([str(COMBEE), "verify", str(card), "--config", str(config), "--cache", str(tmp_path / "cache"),
                 "--out", str(tmp_path / "v"), "--serial-time-scale", "0.0001", "--resamples", "2000", "--quiet"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("verdict=PASS "), done.stdout  # the card's claim holds
    report = (tmp_path / "v" / "report.md").read_text()
    for cell in ("h200/seed0", "h200/seed1", "h200/seed2", "hosted/seed0", "hosted/seed1", "hosted/seed2"):
        assert f"| {cell} |" in report
    cached = [json.loads(p.read_text()) for p in (tmp_path / "cache").glob("*.json")]
    assert len(cached) == 6 and {cell["method"] for cell in cached} == {"notes"}  # its serial method, by path
    ours = list((tmp_path / "v" / "runs").iterdir())
    assert len(ours) == 6 and all(json.loads(line)["method"] == "combee-notes" for run in ours
                                  for line in (run / "ledger.jsonl").read_text().splitlines())
