"""``combee learn --resume``: a real ``combee learn`` process killed (SIGKILL at a random step) or
stopped (SIGINT, SIGTERM) and resumed ends with the same ``final.json``, byte for byte, as an
uninterrupted run with the same seed (two epochs, so the epoch order is crossed; chains carried
between steps included)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from combee_fast.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE
from combee_fast.record.checkpoint import read_checkpoint
from combee_fast.record.rundir import RunDir

RUN = ["--task", "formula", "--method", "combee", "--batch-size", "20", "--epochs", "2",
       "--train-split", "train[0:100]", "--val-split", "val[0:30]", "--eval-every", "3", "--quiet"]
STEPS = 10  # 2 epochs of 5 batches (and any drain steps)


def _combee(*args: str) -> list[str]:
    return [sys.executable, "-m", "combee_fast.cli", *args]


def _ledger_lines(out: Path) -> int:
    try:
        return len((out / "ledger.jsonl").read_bytes().splitlines())
    except FileNotFoundError:
        return 0


def _start_and_stop(out: Path, at_step: int, sig: signal.Signals) -> subprocess.CompletedProcess[str]:
    """Start a run of ``RUN``; once ``at_step`` steps are in its ledger, send ``sig``; wait for its end."""
    return _run_and_signal(RUN, out, at_step, sig)


def _run_and_signal(args: list[str], out: Path, at_step: int, sig: signal.Signals) -> subprocess.CompletedProcess[str]:
    """Start ``combee learn args``; once ``at_step`` steps are in its ledger, send ``sig``; wait for its end."""
    process = subprocess.Popen(_combee("learn", *args, "--out", str(out)), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while _ledger_lines(out) < at_step and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert process.poll() is None, f"the run ended before step {at_step}"
    process.send_signal(sig)
    stdout, stderr = process.communicate(timeout=120)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _resume(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_combee("learn", "--resume", str(out), "--quiet"), capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("resume") / "whole"
    done = subprocess.run(_combee("learn", *RUN, "--out", str(out)), capture_output=True, text=True, timeout=300)
    assert done.returncode == EXIT_OK, done.stderr
    assert _ledger_lines(out) >= STEPS
    return out


def test_sigkill_at_a_random_step_then_resume_gives_the_same_final_json(uninterrupted: Path, tmp_path: Path) -> None:
    at_step = random.Random().randint(1, STEPS - 2)
    out = tmp_path / "killed"
    killed = _start_and_stop(out, at_step, signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL
    assert not (out / "summary.json").exists()
    checkpoint = read_checkpoint(out)
    assert checkpoint.steps >= at_step - 1  # the kill may fall between a ledger line and its checkpoint
    resumed = _resume(out)
    assert resumed.returncode == EXIT_OK, resumed.stderr
    assert json.loads(resumed.stdout)["resumed_from_step"] == checkpoint.steps
    assert (out / "final.json").read_bytes() == (uninterrupted / "final.json").read_bytes(), f"killed at step {at_step}"
    assert (out / "best.json").read_bytes() == (uninterrupted / "best.json").read_bytes()
    assert _ledger_lines(out) == _ledger_lines(uninterrupted)  # the lines of a step cut short are dropped
    steps = [json.loads(line)["step"] for line in (out / "ledger.jsonl").read_bytes().splitlines()]
    assert steps == list(range(len(steps)))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_sigint_and_sigterm_stop_at_a_safe_point_and_resume(uninterrupted: Path, tmp_path: Path,
                                                            sig: signal.Signals) -> None:
    out = tmp_path / "stopped"
    stopped = _start_and_stop(out, 3, sig)
    assert stopped.returncode == EXIT_INTERRUPTED, stopped.stderr
    summary = json.loads((out / "summary.json").read_bytes())
    assert summary["interrupted"] == sig.name
    assert summary["resume_command"] == f"combee learn --resume {out}"
    assert f"resume with: combee learn --resume {out}" in stopped.stderr
    assert stopped.stderr.strip().splitlines()[-1].startswith(f"combee learn: interrupted by {sig.name}")
    assert (out / "final.json").exists() and (out / "best.json").exists()
    assert summary["steps_completed"] == _ledger_lines(out) == read_checkpoint(out).steps
    resumed = _resume(out)
    assert resumed.returncode == EXIT_OK, resumed.stderr
    assert "interrupted" not in json.loads((out / "summary.json").read_bytes())
    assert (out / "final.json").read_bytes() == (uninterrupted / "final.json").read_bytes()


def test_resume_refuses_other_flags_and_folders_without_a_run(uninterrupted: Path, tmp_path: Path) -> None:
    flagged = subprocess.run(_combee("learn", "--resume", str(uninterrupted), "--batch-size", "5"),
                             capture_output=True, text=True, timeout=60)
    assert flagged.returncode == EXIT_USAGE
    assert flagged.stderr.count("\n") == 1 and "--batch-size" in flagged.stderr
    empty = subprocess.run(_combee("learn", "--resume", str(tmp_path)), capture_output=True, text=True, timeout=60)
    assert empty.returncode == EXIT_USAGE
    assert empty.stderr.count("\n") == 1 and "not a run directory" in empty.stderr


AUTO = ["--task", "formula", "--method", "combee", "--batch-size", "auto", "--train-split", "train[0:200]",
        "--val-split", "val[0:30]", "--quiet"]


def _decisions(out: Path) -> list[tuple[int, str]]:
    rows = [json.loads(line) for line in (out / "controller.jsonl").read_bytes().splitlines()]
    return [(row["batch_size"], row["reason"].split(":")[0]) for row in rows]  # the figures in a reason
    # carry the simulated server's timing noise (a live run, no replay cache): compare the decision


def test_the_batch_size_controller_is_resumed_with_its_state(tmp_path: Path) -> None:
    whole = tmp_path / "whole"
    done = subprocess.run(_combee("learn", *AUTO, "--out", str(whole)), capture_output=True, text=True, timeout=300)
    assert done.returncode == EXIT_OK, done.stderr
    steps = _ledger_lines(whole)
    at_step = random.Random().randint(1, steps - 2)
    out = tmp_path / "killed"
    process = subprocess.Popen(_combee("learn", *AUTO, "--out", str(out)), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    while _ledger_lines(out) < at_step and process.poll() is None:
        time.sleep(0.02)
    process.kill()
    process.wait(timeout=60)
    resumed = _resume(out)
    assert resumed.returncode == EXIT_OK, resumed.stderr
    assert (out / "final.json").read_bytes() == (whole / "final.json").read_bytes(), f"killed at step {at_step}"
    # the same decisions: batch sizes and kinds of reason
    assert _decisions(out) == _decisions(whole)


GEPA = ["--method", "gepa", "--train-split", "train[0:30]", "--val-split", "val[0:10]", "--max-metric-calls", "300",
        "--quiet"]


@pytest.fixture(scope="module")
def uninterrupted_gepa(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("resume-gepa") / "whole"
    done = subprocess.run(_combee("learn", *GEPA, "--out", str(out)), capture_output=True, text=True, timeout=300)
    assert done.returncode == EXIT_OK, done.stderr
    assert _ledger_lines(out) >= 10
    return out


def test_a_gepa_run_killed_at_a_random_step_resumes_to_the_same_final_json(uninterrupted_gepa: Path,
                                                                           tmp_path: Path) -> None:
    at_step = random.Random().randint(1, _ledger_lines(uninterrupted_gepa) - 5)
    out = tmp_path / "killed"
    killed = _run_and_signal(GEPA, out, at_step, signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL
    resumed = _resume(out)
    assert resumed.returncode == EXIT_OK, resumed.stderr
    assert (out / "final.json").read_bytes() == (uninterrupted_gepa / "final.json").read_bytes(), f"killed at {at_step}"
    assert (out / "best.json").read_bytes() == (uninterrupted_gepa / "best.json").read_bytes()
    assert _ledger_lines(out) == _ledger_lines(uninterrupted_gepa)
    assert sorted(p.name for p in (out / "candidates").iterdir()) == \
        sorted(p.name for p in (uninterrupted_gepa / "candidates").iterdir())


def test_sigint_stops_a_gepa_run_after_the_step_in_flight_and_it_resumes(uninterrupted_gepa: Path,
                                                                        tmp_path: Path) -> None:
    out = tmp_path / "stopped"
    stopped = _run_and_signal(GEPA, out, 3, signal.SIGINT)
    assert stopped.returncode == EXIT_INTERRUPTED, stopped.stderr
    summary = json.loads((out / "summary.json").read_bytes())
    assert summary["interrupted"] == "SIGINT" and summary["resume_command"] == f"combee learn --resume {out}"
    assert f"resume with: combee learn --resume {out}" in stopped.stderr
    resumed = _resume(out)
    assert resumed.returncode == EXIT_OK, resumed.stderr
    assert (out / "final.json").read_bytes() == (uninterrupted_gepa / "final.json").read_bytes()


def test_a_resume_of_a_run_another_process_holds_is_refused_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "held"
    stopped = _run_and_signal(RUN, out, 2, signal.SIGTERM)
    assert stopped.returncode == EXIT_INTERRUPTED, stopped.stderr
    before = (out / "ledger.jsonl").read_bytes()
    holder = RunDir.reopen(out)  # this process holds the run, as a first resume would
    try:
        second = _resume(out)
    finally:
        holder.close()
    assert second.returncode == EXIT_USAGE and second.stderr.count("\n") == 1
    assert "in use by another combee process" in second.stderr
    assert (out / "ledger.jsonl").read_bytes() == before  # nothing was appended


ASYNC_GEPA = ["--method", "async-gepa", "--combee-minibatch", "12", "--train-split", "train[0:120]", "--val-split",
              "val[0:20]", "--max-metric-calls", "800", "--sim-preset", "flat", "--time-scale", "0.01", "--quiet"]


@pytest.fixture(scope="module")
def uninterrupted_async_gepa(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("resume-async-gepa") / "whole"
    done = subprocess.run(_combee("learn", *ASYNC_GEPA, "--out", str(out)), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == EXIT_OK, done.stderr
    assert _ledger_lines(out) >= 10
    return out


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_an_async_gepa_run_stopped_with_proposals_in_flight_resumes_to_the_same_final_json(
        uninterrupted_async_gepa: Path, tmp_path: Path, sig: signal.Signals) -> None:
    """The checkpoint holds the pipeline (every started stage task's result, the simulated-time
    schedule, the budget's reservations): the resumed run ends as the uninterrupted one."""
    at_step = random.Random().randint(2, _ledger_lines(uninterrupted_async_gepa) - 4)
    out = tmp_path / "stopped"
    stopped = _run_and_signal(ASYNC_GEPA, out, at_step, sig)
    assert stopped.returncode == (-signal.SIGKILL if sig == signal.SIGKILL else EXIT_INTERRUPTED), stopped.stderr
    resumed = _resume(out)
    assert resumed.returncode == EXIT_OK, resumed.stderr
    for name in ("final.json", "best.json"):
        assert (out / name).read_bytes() == (uninterrupted_async_gepa / name).read_bytes(), f"stopped at {at_step}"
    assert _ledger_lines(out) == _ledger_lines(uninterrupted_async_gepa)
    assert sorted(p.name for p in (out / "candidates").iterdir()) == \
        sorted(p.name for p in (uninterrupted_async_gepa / "candidates").iterdir())


SPECULATING = ["--method", "async-gepa", "--combee-minibatch", "6", "--epochs", "3", "--train-split", "val[0:30]",
               "--val-split", "val[0:30]", "--max-metric-calls", "900", "--sim-preset", "flat", "--time-scale", "0.01",
               "--quiet"]
"""Minibatches drawn from the validation set itself, so every child is speculated once
``gepa.pipeline.speculate`` is on."""


@pytest.mark.slow
def test_an_async_gepa_run_killed_while_speculating_resumes_to_the_same_final_json(tmp_path: Path) -> None:
    """A speculated screening holds the start of its child's validation (the checkpoint keeps
    it with the proposal): a run killed at a random step resumes to the uninterrupted run's
    ``final.json``; that speculation changed the search (its metric calls or its path) shows it ran."""
    config = tmp_path / "speculate.toml"
    config.write_text("[gepa.pipeline]\nspeculate = true\n")
    runs = {"plain": SPECULATING, "whole": [*SPECULATING, "--config", str(config)]}
    for name, args in runs.items():
        done = subprocess.run(_combee("learn", *args, "--out", str(tmp_path / name)), capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == EXIT_OK, done.stderr
    plain, whole = (json.loads((tmp_path / name / "summary.json").read_text()) for name in ("plain", "whole"))
    assert (whole["metric_calls"], whole["train_sim_seconds"]) != (plain["metric_calls"], plain["train_sim_seconds"])
    at_step = random.Random().randint(2, _ledger_lines(tmp_path / "whole") - 3)
    out = tmp_path / "killed"
    killed = _run_and_signal(runs["whole"], out, at_step, signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    resumed = _resume(out)
    assert resumed.returncode == EXIT_OK, resumed.stderr
    for name in ("final.json", "best.json"):
        assert (out / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), f"killed at {at_step}"
    assert _ledger_lines(out) == _ledger_lines(tmp_path / "whole")
