"""A rollout executor backend written outside combee_fast (``combee_notes.executor:QueueExecutor``)
runs the terminal task's agent episodes through the CLI: it learns the same playbook as the
``local`` backend, a run killed with SIGKILL resumes to the same ``final.json``, it is found by its
entry point ``queue`` once installed, and ``combee verify`` runs every cell on it (real processes,
real sandboxes)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from combee_fast.tasks.registry import get_task
from tests.verify.small_card import CARD

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900),
              pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (.ci/run installs it)")]

PLUGINS = Path(__file__).resolve().parent
QUEUE = "combee_notes.executor:QueueExecutor"  # by path, from PLUGINS
RUN = ("learn", "--task", "terminal", "--train-split", "train[0:30]", "--val-split", "selection[0:4]",
       "--batch-size", "10", "--workers", "8", "--eval-every", "0", "--quiet")  # validated once: 4 episodes
RAN = re.compile(r"^queue executor: (\d+) episodes by 8 workers$", re.MULTILINE)


def _combee(*args: str) -> list[str]:
    return [sys.executable, "-m", "combee_fast.cli", *args]


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_combee(*args), cwd=PLUGINS, env=env, capture_output=True, text=True, timeout=600)


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_the_queue_executor_learns_what_local_does_and_resumes_after_sigkill(tmp_path: Path, plugin_env) -> None:
    local, queued, installed, killed = (tmp_path / name for name in ("local", "queued", "installed", "killed"))
    assert _run(*RUN, "--executor", "local", "--out", str(local)).returncode == 0
    done = _run(*RUN, "--executor", QUEUE, "--out", str(queued))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[0])
    [ran] = RAN.findall(done.stderr)
    assert int(ran) == summary["episodes"] + 4 > 30  # every train episode and the 4 of the validation ran on it
    assert (queued / "final.json").read_bytes() == (local / "final.json").read_bytes()
    by_name = _run(*RUN, "--executor", "queue", "--out", str(installed), env=plugin_env)
    assert by_name.returncode == 0 and RAN.search(by_name.stderr), by_name.stderr
    assert (installed / "final.json").read_bytes() == (local / "final.json").read_bytes()

    process = subprocess.Popen(_combee(*RUN, "--executor", QUEUE, "--time-scale", "0.05", "--out", str(killed)),
                               cwd=PLUGINS, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while _lines(killed / "ledger.jsonl") < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert json.loads((killed / "config.json").read_text())["executor"]["backend"] == QUEUE
    resumed = _run("learn", "--resume", str(killed), "--quiet")
    assert resumed.returncode == 0 and RAN.search(resumed.stderr), resumed.stderr
    assert (killed / "final.json").read_bytes() == (local / "final.json").read_bytes()


def _terminal_card(folder: Path) -> Path:
    """The Formula card made a small terminal one: its task, sliced terminal splits (pinned by their
    hashes), its simulated h200 class only."""
    task = get_task("terminal")
    text = CARD.read_text().replace('[task]\nname = "formula"', '[task]\nname = "terminal"')
    text = text[:text.index('[[hardware]]\nname = "hosted"')] + text[text.index("[budget]"):]
    # slices whose questions the test slice does not ask (a card refuses shared questions)
    for role, spec in (("train", "train[20:32]"), ("selection", "selection[4:8]"), ("test", "test[0:8]")):
        manifest = task.load(spec).manifest
        text = re.sub(rf'name = "{role}"\nrole = "{role}"\nrows = \d+\nsha256 = "[0-9a-f]+"',
                      f'name = "{spec}"\nrole = "{role}"\nrows = {manifest.rows}\nsha256 = "{manifest.sha256}"', text)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "card.toml"
    path.write_text(text.replace("speedup = 10.0", "speedup = 1.5").replace("margin = 0.02", "margin = 0.2"))
    return path


def test_verify_runs_every_cell_on_the_queue_executor(tmp_path: Path) -> None:
    card = _terminal_card(tmp_path / "cards")
    config = tmp_path / "queue.toml"
    config.write_text(f'method = "combee"\n[task]\nname = "terminal"\n[train]\nbatch_size = 10\n[map]\nworkers = 8\n'
                      f'[executor]\nbackend = "{QUEUE}"\n[sim]\ntime_scale = 0.0001\n')
    done = _run("verify", str(card), "--config", str(config), "--cache", str(tmp_path / "cache"),
                "--out", str(tmp_path / "v"), "--serial-time-scale", "0.0001", "--resamples", "2000", "--quiet")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("verdict=PASS "), done.stdout
    assert len(RAN.findall(done.stderr)) == 3  # each of our cells ran its episodes on the queue executor
    report = (tmp_path / "v" / "report.md").read_text()
    assert all(f"| h200/seed{seed} |" in report for seed in range(3))
    ours = list((tmp_path / "v" / "runs").iterdir())
    assert len(ours) == 3 and all(json.loads((run / "config.json").read_text())["executor"]["backend"] == QUEUE
                                  for run in ours)
